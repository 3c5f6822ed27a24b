package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func init() { benches["e2e"] = benchE2E }

// benchE2E: on the local stack (PostgreSQL, the SQS emulator, the S3
// stand-in, the event-source pollers, the same handlers as Lambda), the time
// from the end of the PUT to `applied`, for a first 1M-row snapshot and then
// the next day's 4% change.
func benchE2E(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "products in the snapshot")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	work, cleanup, err := workDir("", "catalog-bench-e2e-")
	if err != nil {
		return err
	}
	defer cleanup()
	st, err := stack.Start(ctx, stack.Options{DataDir: filepath.Join(work, "stack"), Addr: "127.0.0.1:0", Shards: 2,
		Progress: os.Stderr, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), HandlerTimeout: 60 * time.Second})
	if err != nil {
		return err
	}
	defer st.Close()
	api := apiclient.New(st.APIURL)
	api.HTTP.Timeout = 5 * time.Minute
	r, err := api.CreateRetailer(ctx, st.AdminToken, benchRetailer.ID)
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "e2e: generating %d-row snapshots\n", *rows)
	p := genPair(*rows, *seed)
	// upload PUTs a snapshot and measures from the end of the PUT to applied.
	upload := func(data []byte) (time.Duration, apiclient.Status, error) {
		slot, err := api.Reserve(ctx, r.Token, benchRetailer.ID, "csv")
		if err != nil {
			return 0, apiclient.Status{}, err
		}
		if err := api.Put(ctx, slot, data); err != nil {
			return 0, apiclient.Status{}, err
		}
		start := time.Now()
		for {
			s, err := api.Status(ctx, r.Token, benchRetailer.ID, slot.Generation)
			if err != nil {
				return 0, s, err
			}
			if apiclient.Settled(s.State) {
				if s.State != "applied" {
					return 0, s, fmt.Errorf("generation %d ended %s", slot.Generation, s.State)
				}
				return time.Since(start), s, nil
			}
			select {
			case <-ctx.Done():
				return 0, s, fmt.Errorf("generation %d still %s: %w", slot.Generation, s.State, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	first, s1, err := upload(snapshotCSV(p.old))
	if err != nil {
		return fmt.Errorf("first snapshot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: first snapshot applied %s after its PUT (%d chunks)\n", first.Round(time.Millisecond), s1.Chunks.Total)
	change, s2, err := upload(snapshotCSV(p.new))
	if err != nil {
		return fmt.Errorf("change: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: change applied %s after its PUT (%d chunks)\n", change.Round(time.Millisecond), s2.Chunks.Total)
	changes := s2.Changes.Inserted + s2.Changes.Updated + s2.Changes.Deleted
	table := []tableRow{
		{fmt.Sprintf("first snapshot (%d rows, %d chunks): PUT to applied", len(p.old), s1.Chunks.Total),
			first.Round(time.Millisecond).String(), "-", "-"},
		{fmt.Sprintf("4%% change (%d rows, %d chunks): PUT to applied", changes, s2.Chunks.Total),
			change.Round(time.Millisecond).String(), "10s (target)", ratio(change.Seconds(), 10) + " of the target"},
	}
	printTable(os.Stdout, fmt.Sprintf("e2e: the local stack (%d shards, apply concurrency %d per queue, SQS emulator, S3 stand-in); %s",
		st.Options.Shards, st.Options.ApplyConcurrency, machine()), table)
	return nil
}
