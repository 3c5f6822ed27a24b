package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

func init() { benches["reconcile"] = benchReconcile }

// benchReconcile: the reconciliation of one retailer's catalog (its live
// rows streamed in product_id order, each row's attributes hashed afresh,
// merged with the applied generation's index) against a plain
// `SELECT product_id, content_hash ... ORDER BY product_id` of the same rows
// in the same run; time and peak memory, at each catalog size, so that the
// memory's independence of the size shows.
func benchReconcile(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	sizes := fs.String("rows", "100000,1000000", "catalog sizes (products), comma-separated")
	runs := fs.Int("runs", 3, "runs of each side per size (the median is reported)")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	workers := fs.Int("workers", 0, "parts of a walk streamed at once (0: the ops function's default, GOMAXPROCS up to 4)")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			return fmt.Errorf("-rows %q: want positive integers", *sizes)
		}
		ns = append(ns, n)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	stores, srv, cleanup, err := benchDatabases(ctx, "catalog-bench-reconcile-", 6)
	if err != nil {
		return err
	}
	defer cleanup()
	blobs := inmem.NewBlobs()
	h := ops.New(ops.Config{ReconcileWorkers: *workers}, stores, blobs, nil, slog.New(slog.DiscardHandler))

	var table []tableRow
	for _, n := range ns {
		retailer := fmt.Sprintf("bench-%d", n)
		fmt.Fprintf(os.Stderr, "reconcile: loading %d products\n", n)
		if err := loadCatalog(ctx, stores, blobs, retailer, n, *seed); err != nil {
			return err
		}
		if _, err := stores.Shards[0].Pool().Exec(ctx, "VACUUM ANALYZE products"); err != nil {
			return err
		}
		fence, err := stores.Fence(ctx, retailer)
		if err != nil {
			return err
		}
		var ours, ref, attrs []heapRun
		for i := 0; i < *runs; i++ {
			m, err := measure(srv.DataDir(), func() error {
				res, err := h.ReconcileRetailer(ctx, "bench", retailer, false)
				if err == nil && (res.Rows != int64(n) || res.Products != int64(n) || res.Divergent() || res.Skipped != "") {
					err = fmt.Errorf("reconciliation of %d products: %+v", n, res)
				}
				return err
			})
			if err != nil {
				return err
			}
			ours = append(ours, m)
			m, err = measure(srv.DataDir(), func() error {
				rows := 0
				err := stores.Shards[0].ScanHashes(ctx, retailer, func(id, hash []byte) error { rows++; return nil })
				if err == nil && rows != n {
					err = fmt.Errorf("the SELECT read %d rows, want %d", rows, n)
				}
				return err
			})
			if err != nil {
				return err
			}
			ref = append(ref, m)
			m, err = measure(srv.DataDir(), func() error {
				return stores.Shards[0].ScanCatalog(ctx, retailer, fence, "", "", func(id, a []byte) error { return nil })
			})
			if err != nil {
				return err
			}
			attrs = append(attrs, m)
		}
		o, r, a := medianRun(ours), medianRun(ref), medianRun(attrs)
		cores := runtime.GOMAXPROCS(0)
		fmt.Fprintf(os.Stderr, "reconcile: %d products: %s (peak heap %s) vs SELECT %s (peak heap %s)\n",
			n, o.elapsed.Round(time.Millisecond), mib(o.peakHeap), r.elapsed.Round(time.Millisecond), mib(r.peakHeap))
		table = append(table,
			tableRow{fmt.Sprintf("%d products: time", n), o.elapsed.Round(time.Millisecond).String(), r.elapsed.Round(time.Millisecond).String(),
				ratio(o.elapsed.Seconds(), r.elapsed.Seconds()) + " (target ≤ 2)"},
			tableRow{fmt.Sprintf("%d products: rows/s", n), fmtRate(rate(float64(n), o.elapsed), "rows/s"), fmtRate(rate(float64(n), r.elapsed), "rows/s"),
				ratio(rate(float64(n), o.elapsed), rate(float64(n), r.elapsed))},
			tableRow{fmt.Sprintf("%d products: peak heap", n), mib(o.peakHeap), mib(r.peakHeap), ratio(float64(o.peakHeap), float64(r.peakHeap))},
			tableRow{fmt.Sprintf("%d products: reading the rows' attributes alone (one connection, nothing hashed)", n), a.elapsed.Round(time.Millisecond).String(),
				r.elapsed.Round(time.Millisecond).String(), ratio(a.elapsed.Seconds(), r.elapsed.Seconds())},
			tableRow{fmt.Sprintf("%d products: CPU of PostgreSQL", n), cpuTime(o.serverCPU), cpuTime(r.serverCPU), ratio(o.serverCPU.Seconds(), r.serverCPU.Seconds())},
			tableRow{fmt.Sprintf("%d products: CPU of this process (protocol, hashing, merge)", n), cpuTime(o.processCPU), cpuTime(r.processCPU), ratio(o.processCPU.Seconds(), r.processCPU.Seconds())},
			tableRow{fmt.Sprintf("%d products: the least time that CPU takes on %d cores (both CPUs summed / %d) vs the reference's time", n, cores, cores),
				cpuTime((o.serverCPU + o.processCPU) / time.Duration(cores)), r.elapsed.Round(time.Millisecond).String(),
				ratio((o.serverCPU+o.processCPU).Seconds()/float64(cores), r.elapsed.Seconds())},
		)
	}
	printTable(os.Stdout, fmt.Sprintf("reconcile: one retailer's catalog (live rows streamed in product_id order, in %d parts of the id range at once, each row's stored attributes canonicalized and hashed afresh, merged with the applied generation's index from the blob store) against `SELECT product_id, content_hash ... ORDER BY product_id` of the same rows streamed the same way on one connection; median of %d runs each; peak heap = the most heap the process held above its level before the run, sampled every 2 ms; PostgreSQL 15 on the same machine; %s",
		h.Workers(), *runs, machine()), table)
	return nil
}

// heapRun is one timed run in this process: its time, the most heap it
// held, and the CPU time the PostgreSQL server and this process used.
type heapRun struct {
	elapsed    time.Duration
	peakHeap   int64
	serverCPU  time.Duration
	processCPU time.Duration
}

// cpuTime prints a CPU time ("-" when it could not be read).
func cpuTime(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(10 * time.Millisecond).String()
}

// medianRun is the run of median time.
func medianRun(rs []heapRun) heapRun {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b heapRun) int { return int(a.elapsed - b.elapsed) })
	return s[len(s)/2]
}

// measure runs fn after a GC, timing it, sampling the heap and taking the
// CPU time of the PostgreSQL server of dataDir and of this process.
func measure(dataDir string, fn func() error) (heapRun, error) {
	// The CPU times are read outside the heap's sampling (reading /proc allocates).
	server0, serverErr := serverCPU(dataDir)
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() int64 { metrics.Read(sample); return int64(sample[0].Value.Uint64()) }
	base := read()
	var peak atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			if v := read() - base; v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	process0 := processCPU()
	start := time.Now()
	err := fn()
	elapsed := time.Since(start)
	process := processCPU() - process0
	close(done)
	wg.Wait()
	server, serverErr2 := serverCPU(dataDir)
	run := heapRun{elapsed: elapsed, peakHeap: peak.Load(), processCPU: process}
	if serverErr == nil && serverErr2 == nil {
		run.serverCPU = server - server0
	}
	return run, err
}

// loadCatalog makes retailer's catalog of n generated products as the
// pipeline leaves it after applying generation 1: rows with canonical
// attributes and content hashes (COPY), the fence, the generation, and the
// generation's index in the blob store.
func loadCatalog(ctx context.Context, stores *pgstore.Stores, blobs *inmem.Blobs, retailer string, n int, seed uint64) error {
	if err := stores.Control.CreateRetailer(ctx, catalog.Retailer{ID: retailer, Shard: 0, TokenHash: []byte(retailer)}); err != nil {
		return err
	}
	pool := stores.Shards[0].Pool()
	if _, err := pool.Exec(ctx, `INSERT INTO retailer_state (retailer_id, reserved_generation, latest_generation, applied_generation, applied_products)
		VALUES ($1, 1, 1, 1, $2)`, retailer, n); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `INSERT INTO generations (retailer_id, generation, state, format, object_key, upload_expires_at,
		received_at, applied_at, products, index_written) VALUES ($1, 1, 'applied', 'csv', $2, now(), now(), now(), $3, true)`,
		retailer, keys.Upload(retailer, 1), n); err != nil {
		return err
	}
	// The snapshot, parsed as the diff parses it: canonical attributes and hashes.
	pr, pw := io.Pipe()
	go func() {
		products := make([]product, n)
		for i := range products {
			products[i] = product{num: uint64(i) + seed*1e7}
		}
		var line []byte
		_, err := io.WriteString(pw, csvHeader)
		for _, p := range products {
			if err != nil {
				break
			}
			line = appendRow(line[:0], p)
			_, err = pw.Write(line)
		}
		pw.CloseWithError(err)
	}()
	rd, err := snapshot.NewReader(pr, snapshot.FormatCSV, snapshot.Limits{})
	if err != nil {
		return err
	}
	defer rd.Close()
	var index []catalog.IndexEntry
	src := &snapshotRows{rd: rd, retailer: retailer, onRow: func(id string, h catalog.Hash) {
		index = append(index, catalog.IndexEntry{ProductID: id, Hash: h})
	}}
	if _, err := pool.CopyFrom(ctx, pgx.Identifier{"products"},
		[]string{"retailer_id", "product_id", "attributes", "content_hash", "generation"}, src); err != nil {
		return fmt.Errorf("load %d products: %w", n, err)
	}
	slices.SortFunc(index, func(a, b catalog.IndexEntry) int { return strings.Compare(a.ProductID, b.ProductID) })
	w, err := blobs.Create(ctx, keys.Index(retailer, 1))
	if err != nil {
		return err
	}
	iw := catalog.NewIndexWriter(w)
	for _, e := range index {
		if err := iw.Add(e); err != nil {
			return err
		}
	}
	if err := iw.Close(); err != nil {
		return err
	}
	return w.Close()
}

// snapshotRows feeds COPY from a snapshot reader.
type snapshotRows struct {
	rd       *snapshot.Reader
	retailer string
	row      snapshot.RowView
	err      error
	onRow    func(id string, h catalog.Hash)
}

func (s *snapshotRows) Next() bool {
	s.row, s.err = s.rd.Scan()
	if s.err == io.EOF {
		s.err = nil
		return false
	}
	return s.err == nil
}

func (s *snapshotRows) Values() ([]any, error) {
	id := string(s.row.ID)
	s.onRow(id, s.row.Hash)
	return []any{s.retailer, id, string(s.row.Attributes), s.row.Hash[:], int64(1)}, nil
}

func (s *snapshotRows) Err() error { return s.err }
