package main

import (
	"bytes"
	"cmp"
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
)

func init() { benches["apply"] = benchApply }

// startPostgres starts a private PostgreSQL server in dir (loopback only),
// without full-page writes, as Aurora's storage runs (every bench's server).
func startPostgres(ctx context.Context, dir string) (*pgserver.Server, error) {
	if _, err := pgserver.EnsureInstalled(ctx, os.Stderr); err != nil {
		return nil, err
	}
	return pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg"), NoFullPageWrites: true})
}

// benchDatabases starts a private PostgreSQL server in a fresh work
// directory and opens a migrated control database and one shard on it
// (srv); cleanup stops and removes everything.
func benchDatabases(ctx context.Context, pattern string, conns int32) (stores *pgstore.Stores, srv *pgserver.Server, cleanup func(), err error) {
	work, removeWork, err := workDir("", pattern)
	if err != nil {
		return nil, nil, nil, err
	}
	var undo []func()
	undoAll := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	undo = append(undo, removeWork)
	defer func() {
		if err != nil {
			undoAll() // the named results are nil by now
		}
	}()
	srv, err = startPostgres(ctx, work)
	if err != nil {
		return nil, nil, nil, err
	}
	server := srv
	undo = append(undo, func() { server.Stop() })
	controlDSN, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), "bench_control")
	if err != nil {
		return nil, nil, nil, err
	}
	shardDSN, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), "bench_shard")
	if err != nil {
		return nil, nil, nil, err
	}
	stores, err = pgstore.Open(ctx, controlDSN, []string{shardDSN}, pgstore.PoolOptions{MaxConns: conns})
	if err != nil {
		return nil, nil, nil, err
	}
	undo = append(undo, stores.Close)
	if err := stores.Migrate(ctx); err != nil {
		return nil, nil, nil, err
	}
	return stores, srv, undoAll, nil
}

// benchApply: the changes of the generated pair and a first load of all its
// rows through the real apply path, against COPY of the same rows into a
// copy of the products table.
func benchApply(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("apply", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "products in the snapshot")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	workers := fs.Int("workers", 4, "chunks applied at once (the local stack's apply concurrency per queue)")
	nChanges := fs.Int("changes", 3, "changes applied, each against its own references (the median ratio is shown)")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	stores, _, cleanup, err := benchDatabases(ctx, "catalog-bench-apply-", int32(*workers+4))
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
	diffGen := func(products []product) (int64, []message.ChunkMessage, error) {
		gen, err := shard.ReserveGeneration(ctx, benchRetailer.ID, "csv", time.Now().Add(time.Hour), 0)
		if err != nil {
			return 0, nil, err
		}
		key := keys.Upload(benchRetailer.ID, gen)
		blobs.Put(ctx, key, snapshotCSV(products))
		if err := dh.Diff(ctx, message.DiffJob{Key: key, RetailerID: benchRetailer.ID, Generation: gen}); err != nil {
			return 0, nil, err
		}
		msgs, err := chunkMessages(queue.TakeAll())
		return gen, msgs, err
	}
	// applyAll applies the chunks with workers at once, as the event source does.
	applyAll := func(msgs []message.ChunkMessage) (time.Duration, error) {
		ch := make(chan message.ChunkMessage, len(msgs))
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
	walPos := func() (int64, error) {
		var lsn int64
		err := shard.Pool().QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint`).Scan(&lsn)
		return lsn, err
	}
	// section is one timed run and the WAL it wrote.
	type section struct {
		elapsed time.Duration
		wal     int64
	}
	timed := func(run func() (time.Duration, error)) (section, error) {
		if err := checkpoint(); err != nil {
			return section{}, err
		}
		w0, err := walPos()
		if err != nil {
			return section{}, err
		}
		d, err := run()
		if err != nil {
			return section{}, err
		}
		w1, err := walPos()
		return section{d, w1 - w0}, err
	}
	// The reference runs right before and right after each of ours, and
	// ours is compared with their mean: both see the same machine.
	reference := func(rows [][]any, table string) (section, error) {
		return timed(func() (time.Duration, error) { return copyReference(ctx, shard, rows, table) })
	}
	mean := func(a, b section) section { return section{(a.elapsed + b.elapsed) / 2, (a.wal + b.wal) / 2} }

	// First load.
	gen1, msgs1, err := diffGen(p.old)
	if err != nil {
		return fmt.Errorf("diff of the first load: %w", err)
	}
	rows1, err := chunkRows(ctx, blobs, msgs1)
	if err != nil {
		return err
	}
	refBefore, err := reference(rows1, "products_copy_first")
	if err != nil {
		return err
	}
	first, err := timed(func() (time.Duration, error) { return applyAll(msgs1) })
	if err != nil {
		return fmt.Errorf("apply the first load: %w", err)
	}
	refAfter, err := reference(rows1, "products_copy_first")
	if err != nil {
		return err
	}
	copy1 := mean(refBefore, refAfter)
	if err := requireApplied(ctx, shard, gen1, int64(len(p.old))); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "apply: first load %d rows in %s (%d chunks); COPY %s and %s\n", len(p.old),
		first.elapsed.Round(time.Millisecond), len(msgs1), refBefore.elapsed.Round(time.Millisecond), refAfter.elapsed.Round(time.Millisecond))

	// The change, on a settled catalog: statistics and the visibility map
	// up to date, as a long-running catalog's would be (autovacuum would
	// otherwise run through the freshly loaded table during the change).
	// Then back and forth: each generation changes the same 4% of rows.
	changes := p.inserted + p.updated + p.deleted
	var changeRuns, changeRefs, changeFloors []section
	var ratios []float64
	var changeChunks int
	for i := 0; i < *nChanges; i++ {
		if _, err := shard.Pool().Exec(ctx, `VACUUM (ANALYZE) products`); err != nil {
			return err
		}
		next := p.new
		if i%2 == 1 {
			next = p.old
		}
		gen, msgs, err := diffGen(next)
		if err != nil {
			return fmt.Errorf("diff of change %d: %w", i+1, err)
		}
		changeChunks = len(msgs)
		rows, err := chunkRows(ctx, blobs, msgs)
		if err != nil {
			return err
		}
		before, err := reference(rows, "products_copy_change")
		if err != nil {
			return err
		}
		if err := copyCatalog(ctx, shard, "products_floor"); err != nil {
			return err
		}
		floor, err := timed(func() (time.Duration, error) { return upsertFloor(ctx, shard, rows, "products_floor") })
		if err != nil {
			return err
		}
		run, err := timed(func() (time.Duration, error) { return applyAll(msgs) })
		if err != nil {
			return fmt.Errorf("apply change %d: %w", i+1, err)
		}
		after, err := reference(rows, "products_copy_change")
		if err != nil {
			return err
		}
		if err := requireApplied(ctx, shard, gen, int64(len(next))); err != nil {
			return err
		}
		ref := mean(before, after)
		changeRuns, changeRefs, changeFloors = append(changeRuns, run), append(changeRefs, ref), append(changeFloors, floor)
		ratios = append(ratios, ref.elapsed.Seconds()/run.elapsed.Seconds())
		fmt.Fprintf(os.Stderr, "apply: change %d of %d rows in %s (%d chunks); COPY %s and %s; bare upsert %s\n", i+1, changes,
			run.elapsed.Round(time.Millisecond), len(msgs), before.elapsed.Round(time.Millisecond), after.elapsed.Round(time.Millisecond),
			floor.elapsed.Round(time.Millisecond))
	}
	var upd, hot int64
	if err := shard.Pool().QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'products'`).Scan(&upd, &hot); err == nil && upd > 0 {
		fmt.Fprintf(os.Stderr, "apply: %d row updates on products, %.0f%% of them heap-only (HOT)\n", upd, 100*float64(hot)/float64(upd))
	}
	// The run of the median ratio.
	byRatio := make([]int, len(ratios))
	for i := range byRatio {
		byRatio[i] = i
	}
	slices.SortFunc(byRatio, func(a, b int) int { return cmp.Compare(ratios[a], ratios[b]) })
	mid := byRatio[len(byRatio)/2]
	change, copy2, floor := changeRuns[mid], changeRefs[mid], changeFloors[mid]
	var all []string
	for _, r := range ratios {
		all = append(all, fmt.Sprintf("%.2f", r))
	}

	n1, n2 := float64(len(p.old)), float64(changes)
	walPerRow := func(s section, n float64) string { return fmt.Sprintf("%.0f B", float64(s.wal)/n) }
	table := []tableRow{
		{"first load: time", first.elapsed.Round(time.Millisecond).String(), copy1.elapsed.Round(time.Millisecond).String(), ratio(first.elapsed.Seconds(), copy1.elapsed.Seconds())},
		{"first load: rows/s", fmtRate(rate(n1, first.elapsed), "rows/s"), fmtRate(rate(n1, copy1.elapsed), "rows/s"),
			ratio(rate(n1, first.elapsed), rate(n1, copy1.elapsed)) + " (target ≥ 0.8)"},
		{"first load: WAL per row", walPerRow(first, n1), walPerRow(copy1, n1), ratio(float64(first.wal), float64(copy1.wal))},
		{"change: time (the median of " + strconv.Itoa(len(ratios)) + ")", change.elapsed.Round(time.Millisecond).String(), copy2.elapsed.Round(time.Millisecond).String(), ratio(change.elapsed.Seconds(), copy2.elapsed.Seconds())},
		{"change: rows/s", fmtRate(rate(n2, change.elapsed), "rows/s"), fmtRate(rate(n2, copy2.elapsed), "rows/s"),
			ratio(rate(n2, change.elapsed), rate(n2, copy2.elapsed)) + " (target ≥ 0.5; runs: " + strings.Join(all, ", ") + ")"},
		{"change: WAL per row", walPerRow(change, n2), walPerRow(copy2, n2), ratio(float64(change.wal), float64(copy2.wal))},
		// The floor: what any apply of this change into a catalog of this
		// size pays before fences, counts, events and the directory.
		{"change floor: a bare upsert of the same rows into a copy of the catalog, rows/s", fmtRate(rate(n2, floor.elapsed), "rows/s"), fmtRate(rate(n2, copy2.elapsed), "rows/s"),
			ratio(rate(n2, floor.elapsed), rate(n2, copy2.elapsed)) + " (ours: " + ratio(rate(n2, change.elapsed), rate(n2, floor.elapsed)) + " of it)"},
		{"change floor: WAL per row", walPerRow(floor, n2), walPerRow(copy2, n2), ratio(float64(floor.wal), float64(copy2.wal))},
	}
	printTable(os.Stdout, fmt.Sprintf("apply: first load of %d rows (%d chunks) and changes of %d rows (%d chunks) through apply.Handler.Apply with %d chunks at once (read + checksum + decode, fence, chunk count, staged set-based writes or COPY, change event, directory), against one `COPY` of the same rows into an empty copy of the products table, run before and after each of ours (their mean; a CHECKPOINT before each); PostgreSQL 15 on the same machine; %s",
		len(p.old), len(msgs1), changes, changeChunks, *workers, machine()), table)
	return nil
}

// chunkMessages decodes the chunk messages the diff sent, in order of seq.
func chunkMessages(sent []inmem.Message) ([]message.ChunkMessage, error) {
	out := make([]message.ChunkMessage, len(sent))
	for i, m := range sent {
		if err := json.Unmarshal([]byte(m.Body), &out[i]); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b message.ChunkMessage) int { return a.Seq - b.Seq })
	return out, nil
}

// copyReference COPYs the rows of the chunks (chunkRows) into a fresh copy
// of the products table and returns how long the COPY took.
func copyReference(ctx context.Context, shard *pgstore.Shard, rows [][]any, table string) (time.Duration, error) {
	if err := freshProductsTable(ctx, shard, table); err != nil {
		return 0, err
	}
	pool := shard.Pool()
	if _, err := pool.Exec(ctx, "CHECKPOINT"); err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := pool.CopyFrom(ctx, pgx.Identifier{table}, productColumns, pgx.CopyFromRows(rows))
	elapsed := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("copy into %s: %w", table, err)
	}
	if n != int64(len(rows)) {
		return 0, fmt.Errorf("copied %d rows, want %d", n, len(rows))
	}
	return elapsed, nil
}

// productColumns are the columns the references write.
var productColumns = []string{"retailer_id", "product_id", "attributes", "content_hash", "generation", "deleted", "updated_at"}

// freshProductsTable (re)creates table as an empty copy of products: its
// columns, constraints and indexes, and its storage parameters (the
// fillfactor).
func freshProductsTable(ctx context.Context, shard *pgstore.Shard, table string) error {
	if _, err := shard.Pool().Exec(ctx, fmt.Sprintf("DROP TABLE IF EXISTS %s; CREATE TABLE %s (LIKE products INCLUDING ALL)", table, table)); err != nil {
		return err
	}
	var opts string
	if err := shard.Pool().QueryRow(ctx, `SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class WHERE oid = 'products'::regclass`).Scan(&opts); err != nil {
		return err
	}
	if opts == "" {
		return nil
	}
	_, err := shard.Pool().Exec(ctx, fmt.Sprintf("ALTER TABLE %s SET (%s)", table, opts))
	return err
}

// copyCatalog makes table a settled copy of the bench retailer's catalog
// as it stands (untimed): the table the floor's upsert writes into.
func copyCatalog(ctx context.Context, shard *pgstore.Shard, table string) error {
	if err := freshProductsTable(ctx, shard, table); err != nil {
		return err
	}
	pool := shard.Pool()
	if _, err := pool.Exec(ctx, fmt.Sprintf("INSERT INTO %s SELECT * FROM products WHERE retailer_id = $1", table), benchRetailer.ID); err != nil {
		return fmt.Errorf("copy the catalog into %s: %w", table, err)
	}
	_, err := pool.Exec(ctx, fmt.Sprintf("VACUUM (ANALYZE) %s", table))
	return err
}

// upsertFloor writes the chunks' rows (chunkRows) into table, a copy of
// the catalog, the cheapest set-based way: one COPY into a temporary table
// (no WAL), then one INSERT ... ON CONFLICT DO UPDATE in the same
// transaction; no fence, chunk count, change event or directory. It
// returns the time.
func upsertFloor(ctx context.Context, shard *pgstore.Shard, rows [][]any, table string) (time.Duration, error) {
	start := time.Now()
	tx, err := shard.Pool().Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, fmt.Sprintf("CREATE TEMP TABLE floor_stage (LIKE %s) ON COMMIT DROP", table)); err != nil {
		return 0, err
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"floor_stage"}, productColumns, pgx.CopyFromRows(rows)); err != nil {
		return 0, fmt.Errorf("copy into the floor's stage: %w", err)
	}
	tag, err := tx.Exec(ctx, fmt.Sprintf(`INSERT INTO %s SELECT * FROM floor_stage
		ON CONFLICT (retailer_id, product_id) DO UPDATE SET attributes = EXCLUDED.attributes,
		content_hash = EXCLUDED.content_hash, generation = EXCLUDED.generation,
		deleted = EXCLUDED.deleted, updated_at = EXCLUDED.updated_at`, table))
	if err != nil {
		return 0, fmt.Errorf("upsert into %s: %w", table, err)
	}
	if tag.RowsAffected() != int64(len(rows)) {
		return 0, fmt.Errorf("upserted %d rows, want %d", tag.RowsAffected(), len(rows))
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// chunkRows decodes the chunks' operations into rows of products: a
// delete as a tombstone.
func chunkRows(ctx context.Context, blobs *inmem.Blobs, msgs []message.ChunkMessage) ([][]any, error) {
	var rows [][]any
	now := time.Now()
	for _, m := range msgs {
		body, err := blobs.Get(ctx, m.Key)
		if err != nil {
			return nil, err
		}
		ops, err := message.ReadChunk(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		for _, op := range ops {
			if op.Op == message.OpDelete {
				rows = append(rows, []any{benchRetailer.ID, op.ProductID, nil, nil, m.Generation, true, now})
				continue
			}
			h, err := hex.DecodeString(op.Hash)
			if err != nil {
				return nil, err
			}
			rows = append(rows, []any{benchRetailer.ID, op.ProductID, string(op.Attributes), h, m.Generation, false, now})
		}
	}
	return rows, nil
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
