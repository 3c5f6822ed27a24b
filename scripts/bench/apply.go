package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/apply"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/diff"
	"github.com/retailcatalog/catalog/functions/inmem"
	"github.com/retailcatalog/catalog/functions/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
)

func init() { benches["apply"] = benchApply }

// startPostgres starts a private PostgreSQL server in dir (loopback only).
func startPostgres(ctx context.Context, dir string) (*pgserver.Server, error) {
	if _, err := pgserver.EnsureInstalled(ctx, os.Stderr); err != nil {
		return nil, err
	}
	return pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg")})
}

// benchDatabases starts a private PostgreSQL server in a fresh work
// directory and opens a migrated control database and one shard; cleanup
// stops and removes everything.
func benchDatabases(ctx context.Context, pattern string, conns int32) (stores *pgstore.Stores, cleanup func(), err error) {
	work, removeWork, err := workDir("", pattern)
	if err != nil {
		return nil, nil, err
	}
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, removeWork)
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	srv, err := startPostgres(ctx, work)
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() { srv.Stop() })
	controlDSN, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), "bench_control")
	if err != nil {
		return nil, nil, err
	}
	shardDSN, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), "bench_shard")
	if err != nil {
		return nil, nil, err
	}
	stores, err = pgstore.Open(ctx, controlDSN, []string{shardDSN}, pgstore.PoolOptions{MaxConns: conns})
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, stores.Close)
	if err := stores.Migrate(ctx); err != nil {
		return nil, nil, err
	}
	return stores, cleanup, nil
}

// benchApply: the changes of the generated pair and a first load of all its
// rows through the real apply path, against COPY of the same rows into a
// copy of the products table.
func benchApply(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "products in the snapshot")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	workers := fs.Int("workers", 4, "chunks applied at once (the local stack's apply concurrency per queue)")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	stores, cleanup, err := benchDatabases(ctx, "catalog-bench-apply-", int32(*workers+4))
	if err != nil {
		return err
	}
	defer cleanup()
	if err := stores.Control.CreateRetailer(ctx, catalog.Retailer{ID: benchRetailer.ID, Shard: 0, TokenHash: []byte("bench")}); err != nil {
		return err
	}
	shard := stores.Shards[0]

	fmt.Fprintf(os.Stderr, "apply: generating %d-row snapshots\n", *rows)
	p := genPair(*rows, *seed)
	blobs := inmem.NewBlobs()
	queue := inmem.NewQueue()
	var logOut io.Writer = io.Discard
	if os.Getenv("BENCH_LOG") != "" {
		logOut = os.Stderr
	}
	log := slog.New(slog.NewJSONHandler(logOut, nil))
	dh := diff.New(diff.Config{SmallQueueURL: "small", LargeQueueURL: "large", MaxUploadBytes: 1 << 30}, stores, blobs, queue, log)
	ah := apply.New(stores, blobs, log)

	// diffGen uploads a snapshot as the next generation and diffs it (not timed).
	diffGen := func(products []product) (int64, []events.ChunkMessage, error) {
		gen, err := shard.ReserveGeneration(ctx, benchRetailer.ID, "csv", time.Now().Add(time.Hour), 0)
		if err != nil {
			return 0, nil, err
		}
		key := events.UploadKey(benchRetailer.ID, gen)
		blobs.Put(ctx, key, snapshotCSV(products))
		if err := dh.Diff(ctx, events.DiffJob{Key: key, RetailerID: benchRetailer.ID, Generation: gen}); err != nil {
			return 0, nil, err
		}
		msgs, err := chunkMessages(queue.TakeAll())
		return gen, msgs, err
	}
	// applyAll applies the chunks with workers at once, as the event source does.
	applyAll := func(msgs []events.ChunkMessage) (time.Duration, error) {
		ch := make(chan events.ChunkMessage, len(msgs))
		for _, m := range msgs {
			ch <- m
		}
		close(ch)
		var wg sync.WaitGroup
		errs := make(chan error, *workers)
		start := time.Now()
		for i := 0; i < *workers; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for m := range ch {
					if err := ah.Apply(ctx, m); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		return elapsed, <-errs
	}
	checkpoint := func() error { _, err := shard.Pool().Exec(ctx, "CHECKPOINT"); return err }

	// First load.
	gen1, msgs1, err := diffGen(p.old)
	if err != nil {
		return fmt.Errorf("diff of the first load: %w", err)
	}
	copy1, err := copyReference(ctx, shard, blobs, msgs1, "products_copy_first", checkpoint)
	if err != nil {
		return err
	}
	if err := checkpoint(); err != nil {
		return err
	}
	first, err := applyAll(msgs1)
	if err != nil {
		return fmt.Errorf("apply the first load: %w", err)
	}
	if err := requireApplied(ctx, shard, gen1, int64(len(p.old))); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "apply: first load %d rows in %s (%d chunks); COPY %s\n", len(p.old), first.Round(time.Millisecond), len(msgs1), copy1.Round(time.Millisecond))

	// The change.
	gen2, msgs2, err := diffGen(p.new)
	if err != nil {
		return fmt.Errorf("diff of the change: %w", err)
	}
	changes := p.inserted + p.updated + p.deleted
	copy2, err := copyReference(ctx, shard, blobs, msgs2, "products_copy_change", checkpoint)
	if err != nil {
		return err
	}
	if err := checkpoint(); err != nil {
		return err
	}
	change, err := applyAll(msgs2)
	if err != nil {
		return fmt.Errorf("apply the change: %w", err)
	}
	if err := requireApplied(ctx, shard, gen2, int64(len(p.new))); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "apply: change of %d rows in %s (%d chunks); COPY %s\n", changes, change.Round(time.Millisecond), len(msgs2), copy2.Round(time.Millisecond))

	n1, n2 := float64(len(p.old)), float64(changes)
	table := []tableRow{
		{"first load: time", first.Round(time.Millisecond).String(), copy1.Round(time.Millisecond).String(), ratio(first.Seconds(), copy1.Seconds())},
		{"first load: rows/s", fmtRate(rate(n1, first), "rows/s"), fmtRate(rate(n1, copy1), "rows/s"),
			ratio(rate(n1, first), rate(n1, copy1)) + " (target ≥ 0.5)"},
		{"change: time", change.Round(time.Millisecond).String(), copy2.Round(time.Millisecond).String(), ratio(change.Seconds(), copy2.Seconds())},
		{"change: rows/s", fmtRate(rate(n2, change), "rows/s"), fmtRate(rate(n2, copy2), "rows/s"), ratio(rate(n2, change), rate(n2, copy2))},
	}
	printTable(os.Stdout, fmt.Sprintf("apply: first load of %d rows (%d chunks) and a change of %d rows (%d chunks) through ApplyChunk with %d chunks at once (fence, chunk count, fenced upsert/tombstones, outbox rows), against one `COPY` of the same rows into an empty copy of the products table; PostgreSQL 15 on the same machine; %s",
		len(p.old), len(msgs1), changes, len(msgs2), *workers, machine()), table)
	return nil
}

// chunkMessages decodes the chunk messages the diff sent, in order of seq.
func chunkMessages(sent []inmem.Message) ([]events.ChunkMessage, error) {
	out := make([]events.ChunkMessage, len(sent))
	for i, m := range sent {
		if err := json.Unmarshal([]byte(m.Body), &out[i]); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b events.ChunkMessage) int { return a.Seq - b.Seq })
	return out, nil
}

// copyReference COPYs the rows of the chunks into a fresh copy of the
// products table and returns how long the COPY took.
func copyReference(ctx context.Context, shard *pgstore.Shard, blobs *inmem.Blobs, msgs []events.ChunkMessage, table string, checkpoint func() error) (time.Duration, error) {
	var rows [][]any
	now := time.Now()
	for _, m := range msgs {
		body, err := blobs.Get(ctx, m.Key)
		if err != nil {
			return 0, err
		}
		ops, err := events.ReadChunk(bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		for _, op := range ops {
			if op.Op == events.OpDelete {
				rows = append(rows, []any{benchRetailer.ID, op.ProductID, nil, nil, m.Generation, true, now})
				continue
			}
			h, err := hex.DecodeString(op.Hash)
			if err != nil {
				return 0, err
			}
			rows = append(rows, []any{benchRetailer.ID, op.ProductID, string(op.Attributes), h, m.Generation, false, now})
		}
	}
	pool := shard.Pool()
	if _, err := pool.Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (LIKE products INCLUDING ALL)", table, table)); err != nil {
		return 0, err
	}
	if err := checkpoint(); err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := pool.CopyFrom(ctx, pgx.Identifier{table},
		[]string{"retailer_id", "product_id", "attributes", "content_hash", "generation", "deleted", "updated_at"},
		pgx.CopyFromRows(rows))
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("copy into %s: %w", table, err)
	}
	if n != int64(len(rows)) {
		return 0, fmt.Errorf("copied %d rows, want %d", n, len(rows))
	}
	return elapsed, nil
}

func requireApplied(ctx context.Context, shard *pgstore.Shard, gen, products int64) error {
	st, err := shard.Generation(ctx, benchRetailer.ID, gen)
	if err != nil {
		return err
	}
	if st.State != catalog.StateApplied {
		return fmt.Errorf("generation %d is %s, not applied (%d of %d chunks)", gen, st.State, st.ChunksApplied, st.ChunksTotal)
	}
	var live int64
	if err := shard.Pool().QueryRow(ctx, `SELECT count(*) FROM products WHERE retailer_id = $1 AND NOT deleted`, benchRetailer.ID).Scan(&live); err != nil {
		return err
	}
	if live != products {
		return fmt.Errorf("catalog holds %d products after generation %d, want %d", live, gen, products)
	}
	return nil
}
