package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
)

func init() { benches["move"] = benchMove }

// benchMove: a move of a retailer of N products between two shard
// databases (pgstore's runner, as the ops function runs it) against a bare
// COPY of the same rows between the same databases, and the storefront's
// p99 for that retailer (its read path, pgstore.Stores.Product) during the
// move against before it.
func benchMove(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("move", flag.ContinueOnError)
	products := fs.Int("products", 1_000_000, "products of the retailer")
	readers := fs.Int("readers", 2, "storefront readers running beside the move")
	before := fs.Duration("before", 10*time.Second, "how long the storefront is measured before the move")
	if err := fs.Parse(args); err != nil {
		return err
	}
	work, removeWork, err := workDir("", "catalog-bench-move-")
	if err != nil {
		return err
	}
	defer removeWork()
	srv, err := startPostgres(ctx, work)
	if err != nil {
		return err
	}
	defer srv.Stop()
	var dsns []string
	for _, name := range []string{"bench_move_control", "bench_move_shard0", "bench_move_shard1"} {
		dsn, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), name)
		if err != nil {
			return err
		}
		dsns = append(dsns, dsn)
	}
	// The loading and the reference are long single statements: no
	// statement timeout in this bench's pools.
	for i, dsn := range dsns {
		dsns[i] = dsn + map[bool]string{true: "&", false: "?"}[strings.Contains(dsn, "?")] + "statement_timeout=0"
	}
	s, err := pgstore.Open(ctx, dsns[0], dsns[1:], pgstore.PoolOptions{MaxConns: 8})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		return err
	}
	const id = "bench"
	if err := s.CreateRetailer(ctx, catalog.Retailer{ID: id, Shard: 0, TokenHash: []byte("bench")}); err != nil {
		return err
	}
	src, dst := s.Shards[0].Pool(), s.Shards[1].Pool()
	fmt.Fprintf(os.Stderr, "move: loading %d products\n", *products)
	if _, err := src.Exec(ctx, `INSERT INTO retailer_state (retailer_id, reserved_generation, latest_generation, applied_generation, applied_products)
		VALUES ($1, 1, 1, 1, $2)`, id, *products); err != nil {
		return err
	}
	if _, err := src.Exec(ctx, `INSERT INTO generations (retailer_id, generation, state, object_key, upload_expires_at, products)
		VALUES ($1, 1, 'applied', 'snapshots/bench/1', now(), $2)`, id, *products); err != nil {
		return err
	}
	// ~250 bytes of attributes a product, as fixtures.Generate's; in
	// statements of 100,000 (each within the pools' statement timeout).
	for lo := 1; lo <= *products; lo += 100_000 {
		if _, err := src.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
		SELECT $1, 'p-' || lpad(i::text, 8, '0'),
		       jsonb_build_object('title', 'BENCH product ' || i, 'brand', (ARRAY['Acme','Globex','Initech','Umbrella'])[1 + i % 4],
		                          'price', (5 + i % 90) || '.' || lpad((i % 100)::text, 2, '0'), 'availability', 'in stock',
		                          'description', 'A fine item, number ' || i || ', with "quotes", commas, and a second line'),
		       sha256(i::text::bytea), 1
		FROM generate_series($2::int, $3::int) AS i`, id, lo, min(lo+100_000-1, *products)); err != nil {
			return err
		}
	}
	for _, p := range []*pgxpool.Pool{src, dst} {
		if _, err := p.Exec(ctx, "VACUUM ANALYZE products"); err != nil {
			return err
		}
	}

	// The reference: COPY of the same rows from one database to the other.
	if _, err := dst.Exec(ctx, "CREATE TABLE products_ref (LIKE products INCLUDING ALL)"); err != nil {
		return err
	}
	if _, err := src.Exec(ctx, "CHECKPOINT"); err != nil {
		return err
	}
	refStart := time.Now()
	refRows, err := copyReferenceBetween(ctx, src, dst, id)
	if err != nil {
		return fmt.Errorf("reference COPY: %w", err)
	}
	ref := time.Since(refStart)
	if _, err := dst.Exec(ctx, "DROP TABLE products_ref"); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "move: reference COPY of %d rows in %s\n", refRows, ref.Round(time.Millisecond))

	// The storefront, before and during the move.
	ids := func(rnd *rand.Rand) string { return fmt.Sprintf("p-%08d", 1+rnd.IntN(*products)) }
	measure := func(stop <-chan struct{}) ([]time.Duration, error) {
		var mu sync.Mutex
		var all []time.Duration
		var wg sync.WaitGroup
		errc := make(chan error, *readers)
		for r := range *readers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rnd := rand.New(rand.NewPCG(uint64(r), 1))
				var mine []time.Duration
				for {
					select {
					case <-stop:
						mu.Lock()
						all = append(all, mine...)
						mu.Unlock()
						return
					default:
					}
					t0 := time.Now()
					if _, err := s.Product(ctx, id, ids(rnd), false); err != nil {
						errc <- err
						return
					}
					mine = append(mine, time.Since(t0))
					time.Sleep(time.Millisecond) // ~1,000 reads/s a reader
				}
			}()
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			return nil, err
		}
		slices.Sort(all)
		return all, nil
	}
	stop := make(chan struct{})
	time.AfterFunc(*before, func() { close(stop) })
	baseline, err := measure(stop)
	if err != nil {
		return fmt.Errorf("storefront before the move: %w", err)
	}

	var copyStart, copyEnd time.Time
	s.Moves.Hook = func(_, step string) error {
		switch {
		case step == "copy_products" && copyStart.IsZero():
			copyStart = time.Now()
		case step == "copy_versions" && copyEnd.IsZero():
			copyEnd = time.Now()
		}
		return nil
	}
	moveID, err := s.StartMove(ctx, id, 1)
	if err != nil {
		return err
	}
	stop = make(chan struct{})
	type during struct {
		lat []time.Duration
		err error
	}
	res := make(chan during, 1)
	go func() { l, err := measure(stop); res <- during{l, err} }()
	moveStart := time.Now()
	for {
		running, err := s.RunMoves(ctx, time.Now().Add(10*time.Minute))
		if err != nil {
			close(stop)
			return err
		}
		if running == 0 {
			break
		}
	}
	moveTime := time.Since(moveStart)
	close(stop)
	d := <-res
	if d.err != nil {
		return fmt.Errorf("storefront during the move: %w", d.err)
	}
	m, err := s.Move(ctx, moveID)
	if err != nil {
		return err
	}
	if m.State != catalog.MoveDone {
		return fmt.Errorf("move %s ended %s: %s", moveID, m.State, m.Error)
	}
	copyTime := copyEnd.Sub(copyStart)
	p99 := func(l []time.Duration) time.Duration {
		if len(l) == 0 {
			return 0
		}
		return l[len(l)*99/100]
	}
	rows := []tableRow{
		{"products copied per second (copy_products step)", fmtRate(rate(float64(*products), copyTime), "rows/s"),
			fmtRate(rate(float64(refRows), ref), "rows/s"), ratio(ref.Seconds(), copyTime.Seconds())},
		{"the whole move (start to done: copy, catch-up, switch, route wait, cleanup)", moveTime.Round(time.Millisecond).String(), ref.Round(time.Millisecond).String(), "-"},
		{fmt.Sprintf("storefront p99 (%d readers; during vs before)", *readers), p99(d.lat).String(), p99(baseline).String(), ratio(float64(p99(d.lat)), float64(p99(baseline)))},
		{"storefront reads (during vs before)", fmt.Sprint(len(d.lat)), fmt.Sprint(len(baseline)), "-"},
	}
	printTable(os.Stdout, fmt.Sprintf("move: a retailer of %d products between two shard databases of one PostgreSQL 15 server (pgstore's move runner, batches of %d), against one `COPY ... TO STDOUT (FORMAT binary)` piped into `COPY ... FROM STDIN` of the same rows into an empty copy of the products table; the first ratio is the move's speed over COPY's (target >= 0.5), the p99 ratio during over before (target <= 2); %s",
		*products, 20_000, machine()), rows)
	return nil
}

// copyReferenceBetween COPYs the retailer's products from src into
// products_ref on dst, binary, through a pipe.
func copyReferenceBetween(ctx context.Context, src, dst *pgxpool.Pool, retailerID string) (int64, error) {
	sc, err := src.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer sc.Release()
	dc, err := dst.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer dc.Release()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := sc.Conn().PgConn().CopyTo(ctx, pw, "COPY (SELECT * FROM products WHERE retailer_id = '"+retailerID+"' ORDER BY product_id) TO STDOUT (FORMAT binary)")
		pw.CloseWithError(err)
		done <- err
	}()
	tag, err := dc.Conn().PgConn().CopyFrom(ctx, pr, "COPY products_ref FROM STDIN (FORMAT binary)")
	pr.CloseWithError(errors.New("copy ended"))
	if serr := <-done; serr != nil {
		return 0, serr
	}
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}
