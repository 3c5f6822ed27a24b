package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// benchE2EDelta (`e2e -delta`, DESIGN 13): on the local stack, a catalog of
// rows products loaded, then the time from the end of the PUT to
// `applied` of a full snapshot that changes changed products (every other
// row as it was) and of a delta carrying a change of the same size (the
// changed rows only, each naming every attribute of its product), printed
// side by side. Target: the delta in at most a fifth of the full
// snapshot's time. The CPU per process and per function of each phase
// follows (stackprof.go).
func benchE2EDelta(ctx context.Context, prof *stackProfiler, tail bool, rows, changed int, seed uint64) error {
	work, cleanup, err := workDir("", "catalog-bench-e2e-delta-")
	if err != nil {
		return err
	}
	defer cleanup()
	stages := newStageLog()
	st, err := stack.Start(ctx, stack.Options{NoFullPageWrites: true, DataDir: filepath.Join(work, "stack"), Addr: "127.0.0.1:0", Shards: 2,
		Progress: os.Stderr, Logger: slog.New(stages), HandlerTimeout: 5 * time.Minute})
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
	changed = min(changed, rows/2)
	products := make([]product, rows)
	for i := range products {
		products[i] = product{num: 1_000_000 + uint64(i)*7, version: 1}
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	perm := rng.Perm(rows)
	fullSet, deltaSet := perm[:changed], perm[changed:2*changed]

	upload := func(phase string, data []byte, mode string) (tl timeline, err error) {
		err = prof.measure(phase, func() error {
			return withBenchLabel(ctx, func(ctx context.Context) error {
				tl, err = timedUpload(ctx, api, r.Token, stages, data, mode)
				return err
			})
		})
		if err == nil && tail {
			err = prof.settle(ctx, "its tail", st.Options.AnalyticsWindow+time.Second, 2*time.Minute)
		}
		return tl, err
	}

	fmt.Fprintf(os.Stderr, "e2e -delta: loading %d products\n", rows)
	first, err := upload("first load", snapshotCSV(products), "")
	if err != nil {
		return fmt.Errorf("first snapshot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e -delta: first snapshot applied %s after its PUT\n", first.total().Round(time.Millisecond))

	for _, i := range fullSet {
		products[i].version = 2
	}
	fullCSV := snapshotCSV(products)
	full, err := upload("full snapshot", fullCSV, "")
	if err != nil {
		return fmt.Errorf("full snapshot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e -delta: full snapshot applied %s after its PUT\n", full.total().Round(time.Millisecond))

	var deltaRows []product
	for _, i := range deltaSet {
		products[i].version = 2
		deltaRows = append(deltaRows, products[i])
	}
	sortByID(deltaRows)
	deltaCSV := snapshotCSV(deltaRows)
	delta, err := upload("delta", deltaCSV, "delta")
	if err != nil {
		return fmt.Errorf("delta: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e -delta: delta applied %s after its PUT\n", delta.total().Round(time.Millisecond))

	at := func(tl timeline, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.2fs", t.Sub(tl.putEnd).Seconds())
	}
	changes := func(tl timeline) string {
		c := tl.status.Changes
		return fmt.Sprintf("%d updated, %d unchanged", c.Updated, c.Unchanged)
	}
	table := [][]string{
		{"file", fmt.Sprintf("%d rows, %.1f MB", rows, float64(len(fullCSV))/1e6), fmt.Sprintf("%d rows, %.2f MB", len(deltaRows), float64(len(deltaCSV))/1e6)},
		{"changes", changes(full), changes(delta)},
		{"received (the arrival function), after the PUT", at(full, full.received), at(delta, delta.received)},
		{"diff planned", at(full, full.planned), at(delta, delta.planned)},
		{"last chunk applied", at(full, full.lastApplied), at(delta, delta.lastApplied)},
		{"PUT to applied", full.total().Round(time.Millisecond).String(), delta.total().Round(time.Millisecond).String()},
		{"delta / full", "", ratio(delta.total().Seconds(), full.total().Seconds()) + "x (target ≤ 0.2x)"},
	}
	printColumns(os.Stdout, fmt.Sprintf("e2e -delta: the local stack (%d shards, SQS emulator, S3 stand-in); a catalog of %d products, then a full snapshot changing %d of them and a delta changing %d others; stages in seconds after the PUT ended; %s",
		st.Options.Shards, rows, changed, changed, machine()),
		[]string{"stage", "full snapshot", "delta"}, table)
	prof.print(os.Stdout, nil)
	return nil
}
