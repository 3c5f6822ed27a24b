package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
)

func init() { benches["retention"] = benchRetention }

// retentionTables are the shard tables a retailer's uploads write to (its
// usage rows are finance's and kept by design; usage_daily grows by one
// row a day, not with the catalog).
var retentionTables = []string{"products", "generations", "applied_chunks", "outbox", "consumer_versions"}

// benchRetention simulates days of daily uploads of one retailer (each day
// 1% of the catalog deleted and as many new products inserted, ids drawn at
// random) through the apply path's store calls (reserve, diff fence, take
// over, start, ApplyChunk in chunks of 5,000 ops, the directory, the
// analytics consumer's versions, the relay deleting what it published),
// with the clock moved a day per upload, once with collection after every
// upload (the daily schedule, Stores.Collect with the default tombstone and
// parked retention) and once without, each in databases of its own on one
// PostgreSQL server; then the shard's rows and bytes (pg_total_relation_size
// after a VACUUM, as autovacuum would leave them) against the live
// catalog's (its live products and the consumers' versions of them alone,
// in fresh copies of their tables). A simulated day takes a second or two,
// far less than autovacuum's nap (a minute), so each day ends with a
// VACUUM of products and consumer_versions: what autovacuum does in a real
// day with autovacuum_vacuum_scale_factor at 0.01 (at PostgreSQL's default
// 0.2 it runs only every ~20 days of 1% churn, and the heap holds up to a
// fifth more dead versions between runs). Without any vacuum the heap keeps
// every dead row version of the deletes (measured: 2.19x the bytes instead
// of 1.38x, 120 days of 20,000 products). The schedule collects at 14:00, eight
// hours after the day's upload.
// The diff itself (S3, the merge-walk) is not run: it writes no table.
func benchRetention(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("retention", flag.ContinueOnError)
	days := fs.Int("days", 365, "days of daily uploads")
	products := fs.Int("products", 100_000, "products in the catalog")
	seed := fs.Uint64("seed", 1, "seed of the generated ids and values")
	timeout := fs.Duration("timeout", 2*time.Hour, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *days < 1 || *products < 100 {
		return fmt.Errorf("-days must be at least 1 and -products at least 100")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	on, srv, cleanup, err := benchDatabases(ctx, "catalog-bench-retention-", 4)
	if err != nil {
		return err
	}
	defer cleanup()
	off, err := secondStores(ctx, srv)
	if err != nil {
		return err
	}
	defer off.Close()

	type result struct {
		name  string
		sizes retentionSizes
		took  time.Duration
	}
	var results []result
	for _, run := range []struct {
		name    string
		stores  *pgstore.Stores
		collect bool
	}{{"collection daily", on, true}, {"collection off", off, false}} {
		start := time.Now()
		fmt.Fprintf(os.Stderr, "retention: %s, %d days of a %d-product catalog\n", run.name, *days, *products)
		if err := simulateYear(ctx, run.stores, *days, *products, *seed, run.collect); err != nil {
			return fmt.Errorf("%s: %w", run.name, err)
		}
		sizes, err := measureRetention(ctx, run.stores.Shards[0])
		if err != nil {
			return fmt.Errorf("%s: %w", run.name, err)
		}
		results = append(results, result{run.name, sizes, time.Since(start)})
	}

	var rows [][]string
	for _, r := range results {
		for _, t := range retentionTables {
			rows = append(rows, []string{r.name + ": " + t, fmt.Sprint(r.sizes.rows[t]), mib(r.sizes.bytes[t]), mib(r.sizes.heap[t])})
		}
		rows = append(rows, []string{r.name + ": all", fmt.Sprint(r.sizes.totalRows()), mib(r.sizes.totalBytes()), ""})
		rows = append(rows, []string{r.name + ": tombstones", fmt.Sprint(r.sizes.tombstones), "", ""})
	}
	live := results[0].sizes
	rows = append(rows, []string{"live catalog (products and their consumer versions)", fmt.Sprint(live.liveRows), mib(live.liveBytes), mib(live.liveHeap)})
	printColumns(os.Stdout, fmt.Sprintf("retention after %d days of daily uploads (1%% deletes, 1%% inserts) of a %d-product catalog; %s",
		*days, *products, machine()), []string{"table", "rows", "size", "of it the heap"}, rows)
	for _, r := range results {
		fmt.Printf("%s: rows %.2fx, bytes %.2fx of the live catalog (%s)\n", r.name,
			float64(r.sizes.totalRows())/float64(r.sizes.liveRows), float64(r.sizes.totalBytes())/float64(r.sizes.liveBytes),
			r.took.Round(time.Second))
	}
	fmt.Printf("retention: rows %.2fx, bytes %.2fx of the live catalog\n",
		float64(live.totalRows())/float64(live.liveRows), float64(live.totalBytes())/float64(live.liveBytes))
	return nil
}

// secondStores makes a second control and shard database on srv, migrated.
func secondStores(ctx context.Context, srv *pgserver.Server) (*pgstore.Stores, error) {
	control, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), "bench_control_off")
	if err != nil {
		return nil, err
	}
	shard, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), "bench_shard_off")
	if err != nil {
		return nil, err
	}
	s, err := pgstore.Open(ctx, control, []string{shard}, pgstore.PoolOptions{MaxConns: 4})
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// simulateYear runs the daily uploads of retailer bench on s.
func simulateYear(ctx context.Context, s *pgstore.Stores, days, products int, seed uint64, collect bool) error {
	const retailer = "bench"
	if err := s.CreateRetailer(ctx, catalog.Retailer{ID: retailer, TokenHash: []byte("bench")}); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	newID := func() string { return fmt.Sprintf("SKU-%012d", rng.Int64N(1e12)) }
	live := make([]string, 0, products)
	seen := map[string]bool{}
	for len(live) < products {
		if id := newID(); !seen[id] {
			seen[id] = true
			live = append(live, id)
		}
	}
	attrs := func(id string, day int) []byte {
		return fmt.Appendf(nil, `{"name": "product %s", "price": %d.99, "stock": %d, "day": %d}`, id, rng.IntN(500), rng.IntN(1000), day)
	}
	start := time.Date(2026, 1, 1, 6, 0, 0, 0, time.UTC)
	shard := s.Shards[0]
	for day := 0; day <= days; day++ {
		var ops []message.ChunkOp
		var counts catalog.Counts
		if day == 0 {
			for _, id := range live {
				ops = append(ops, upsertOp(id, attrs(id, day)))
			}
			counts.Inserted = int64(len(live))
		} else {
			n := max(1, products/100)
			rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
			for _, id := range live[:n] {
				ops = append(ops, message.ChunkOp{Op: message.OpDelete, ProductID: id})
			}
			live = live[n:]
			for i := 0; i < n; {
				if id := newID(); !seen[id] {
					seen[id] = true
					live = append(live, id)
					ops = append(ops, upsertOp(id, attrs(id, day)))
					i++
				}
			}
			counts.Inserted, counts.Deleted = int64(n), int64(n)
		}
		slices.SortFunc(ops, func(a, b message.ChunkOp) int { return strings.Compare(a.ProductID, b.ProductID) })
		counts.Products = int64(len(live))
		if err := applyDay(ctx, s, retailer, ops, counts); err != nil {
			return fmt.Errorf("day %d: %w", day, err)
		}
		now := start.Add(time.Duration(day) * 24 * time.Hour)
		// The clock: this upload was applied on day `day`.
		if _, err := shard.Pool().Exec(ctx, `UPDATE generations SET applied_at = $2, state_changed_at = $2, created_at = $2
			WHERE retailer_id = $1 AND generation = (SELECT applied_generation FROM retailer_state WHERE retailer_id = $1)`, retailer, now); err != nil {
			return err
		}
		// The relay publishes and deletes the day's events.
		if _, err := shard.Pool().Exec(ctx, `DELETE FROM outbox WHERE retailer_id = $1`, retailer); err != nil {
			return err
		}
		if collect {
			// The daily schedule runs at 14:00 UTC (infra's gcCron), the
			// uploads at 06:00.
			at := now.Add(8 * time.Hour)
			p := catalog.CollectPolicy{AppliedBefore: at.Add(-catalog.DefaultTombstoneAfter), ParkedBefore: at.Add(-catalog.DefaultParkedAfter)}
			if _, err := s.Collect(ctx, retailer, p, nil); err != nil {
				return fmt.Errorf("day %d: collect: %w", day, err)
			}
		}
		// Autovacuum: a simulated day lasts a second or two, much less
		// than autovacuum's nap; the day's vacuum stands for it.
		if _, err := shard.Pool().Exec(ctx, `VACUUM products, consumer_versions`); err != nil {
			return err
		}
		if day%30 == 0 {
			fmt.Fprintf(os.Stderr, "retention: day %d\n", day)
		}
	}
	return nil
}

func upsertOp(id string, attrs []byte) message.ChunkOp {
	h := catalog.HashAttributes(attrs)
	return message.ChunkOp{Op: message.OpUpsert, ProductID: id, Hash: hex.EncodeToString(h[:]), Attributes: attrs}
}

// applyDay takes one generation through the store calls of the pipeline:
// reserved, its diff's fence, taken over, started, its chunks applied (the
// directory after each, the analytics consumer's versions after them).
func applyDay(ctx context.Context, s *pgstore.Stores, retailer string, ops []message.ChunkOp, counts catalog.Counts) error {
	gen, err := s.ReserveGeneration(ctx, retailer, "csv", time.Now().Add(time.Hour), 0)
	if err != nil {
		return err
	}
	if d, err := s.BeginDiff(ctx, retailer, gen, ""); err != nil || !d.Proceed {
		return fmt.Errorf("begin diff of %d: %v %s", gen, err, d.Reason)
	}
	if _, err := s.TakeOver(ctx, retailer, gen); err != nil {
		return err
	}
	const perChunk = 5000
	n := (len(ops) + perChunk - 1) / perChunk
	if err := s.StartApplying(ctx, retailer, gen, counts, n); err != nil {
		return err
	}
	for seq := 0; seq < n; seq++ {
		part := ops[seq*perChunk : min(len(ops), (seq+1)*perChunk)]
		m := message.ChunkMessage{RetailerID: retailer, Generation: gen, Seq: seq, Key: keys.Chunk(retailer, gen, seq), SHA256: strings.Repeat("0", 64)}
		if _, err := s.ApplyChunk(ctx, m, part); err != nil {
			return err
		}
		if err := s.UpdateDirectory(ctx, retailer, gen, part); err != nil {
			return err
		}
		ids := make([]string, len(part))
		gens := make([]int64, len(part))
		for i, op := range part {
			ids[i], gens[i] = op.ProductID, gen
		}
		if err := s.RecordVersions(ctx, "analytics", retailer, ids, gens); err != nil {
			return err
		}
	}
	return nil
}

// retentionSizes are the shard's rows and bytes of the retailer's tables,
// and its live catalog's.
type retentionSizes struct {
	rows, bytes         map[string]int64
	heap                map[string]int64 // of bytes, the table's own (the rest: its indexes and TOAST)
	tombstones          int64
	liveRows, liveBytes int64
	liveHeap            int64
}

func (r retentionSizes) totalRows() (n int64) {
	for _, v := range r.rows {
		n += v
	}
	return n
}

func (r retentionSizes) totalBytes() (n int64) {
	for _, v := range r.bytes {
		n += v
	}
	return n
}

func measureRetention(ctx context.Context, sh *pgstore.Shard) (retentionSizes, error) {
	out := retentionSizes{rows: map[string]int64{}, bytes: map[string]int64{}, heap: map[string]int64{}}
	db := sh.Pool()
	for _, t := range retentionTables {
		if _, err := db.Exec(ctx, "VACUUM "+t); err != nil {
			return out, err
		}
		var rows, bytes, heap int64
		if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT (SELECT count(*) FROM %s), pg_total_relation_size('%s'), pg_relation_size('%s')`, t, t, t)).Scan(&rows, &bytes, &heap); err != nil {
			return out, err
		}
		out.rows[t], out.bytes[t], out.heap[t] = rows, bytes, heap
	}
	if err := db.QueryRow(ctx, `SELECT count(*) FROM products WHERE deleted`).Scan(&out.tombstones); err != nil {
		return out, err
	}
	// The live catalog alone: its products, and the consumers' versions of
	// them (one row per live product and consumer: what any design keeps),
	// in fresh copies of the tables (the same fillfactor, the indexes).
	for _, q := range []string{
		`DROP TABLE IF EXISTS live_catalog, live_versions`,
		`CREATE TABLE live_catalog (LIKE products INCLUDING ALL)`,
		`ALTER TABLE live_catalog SET (fillfactor = 90)`,
		`INSERT INTO live_catalog SELECT * FROM products WHERE NOT deleted ORDER BY retailer_id, product_id`,
		`CREATE TABLE live_versions (LIKE consumer_versions INCLUDING ALL)`,
		`INSERT INTO live_versions SELECT v.* FROM consumer_versions v JOIN live_catalog p USING (retailer_id, product_id)
		 ORDER BY v.consumer, v.retailer_id, v.product_id`,
		`VACUUM live_catalog`,
		`VACUUM live_versions`,
	} {
		if _, err := db.Exec(ctx, q); err != nil {
			return out, err
		}
	}
	if err := db.QueryRow(ctx, `SELECT (SELECT count(*) FROM live_catalog) + (SELECT count(*) FROM live_versions),
		pg_total_relation_size('live_catalog') + pg_total_relation_size('live_versions'),
		pg_relation_size('live_catalog') + pg_relation_size('live_versions')`).Scan(&out.liveRows, &out.liveBytes, &out.liveHeap); err != nil {
		return out, err
	}
	_, err := db.Exec(ctx, `DROP TABLE live_catalog, live_versions`)
	return out, err
}
