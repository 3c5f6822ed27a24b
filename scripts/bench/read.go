package main

// The read bench: storefront reads through the HTTP API against raw
// primary-key SELECTs issued straight to PostgreSQL, in the same run.
//
//	go run ./scripts/bench read [--products 100000] [--retailers 10] [--shards 2]
//	    [--replicas 0] [--duration 10s] [--conns 16,32,64] [--page-limit 20] [--loadgen auto]
//
// It starts the local stack (own PostgreSQL and queue emulator in a
// temporary directory, API on loopback), loads the products through the real
// pipeline (upload, diff, apply), then drives the API from separate
// processes: 80% single products, 10% pages of --page-limit, 10% batch-gets
// of --page-limit products (at most 100: a storefront page read by id); then, apart, only
// single GETs and only batch-gets, whose products/s it compares (issue 25:
// batch-get of 20 >= 10x the products/s of single GETs). The maximum
// QPS is measured with wrk (Debian's wrk; the built-in generator below when
// it is missing), the latency at half of that rate with the built-in
// open-loop generator (this binary re-executed as "read-load"). The
// references run the read path's primary-key SELECT
// (pgstore.StorefrontProductSQL) straight to PostgreSQL: pgbench (one
// process per shard database, prepared statements) at full speed and at half
// of its own maximum, and a Go pgx client (this binary as "read-sql") at full
// speed. Then the floors, the same requests with nothing of ours in them:
// a bare net/http server answering the mix with a constant (the API's answer
// to one single GET) driven as the API is, the mix's three statements
// straight to the database (pgbench, one a request, in the mix's shares),
// and batch-gets' statement alone (the batch-get target's bound: products/s
// the database serves that way, against 10x the single GETs').
// Each system's maximum is its best over the concurrency levels of
// --conns (a server that batches wants more requests in flight than
// PostgreSQL, which slows down past a few backends a core), and each half
// load runs at the level of that maximum. Every run is bounded in time and
// in requests; loopback only.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func init() {
	benches["read"] = benchRead
	children["read-load"] = readLoad // the paced HTTP load generator, in a process of its own
	children["read-sql"] = readSQL   // the pgx reference, in a process of its own
}

// readMaxRequests bounds every load run, whatever its duration.
const readMaxRequests = 5_000_000

type readOptions struct {
	products, retailers, shards, replicas int
	duration                              time.Duration
	pageLimit, rate, readConns, slots     int
	conns                                 []int // concurrency levels of the full-speed runs
	connsFlag, loadgen, cpuprofile        string
	lambda                                bool
	lambdaRuns                            lambdaOptions
}

// lambdaOptions are the --lambda run's settings.
type lambdaOptions struct {
	colds, warm int // environments started; single requests in each after the first
}

func benchRead(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	var o readOptions
	fs.IntVar(&o.products, "products", 100_000, "products in the catalog")
	fs.IntVar(&o.retailers, "retailers", 10, "retailers sharing them")
	fs.IntVar(&o.shards, "shards", 2, "shard databases")
	fs.IntVar(&o.replicas, "replicas", 0, "streaming replicas serving the reads (0: the writer serves)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "length of each measured run")
	fs.StringVar(&o.connsFlag, "conns", "16,32,64", "concurrency levels: connections of the HTTP load generator, of pgbench (split over the shards) and of the pgx reference; each system's maximum is its best level")
	fs.IntVar(&o.pageLimit, "page-limit", 20, "products per page request")
	fs.IntVar(&o.readConns, "read-conns", 16, "the API's connections per database it reads from (the read pools' size)")
	fs.IntVar(&o.slots, "lookup-slots", 0, "the API's product-lookup queries in flight per database (0: its default)")
	fs.IntVar(&o.rate, "rate", 0, "only measure the latency at this many requests/s (open loop, first --conns level); no maxima, no references")
	fs.StringVar(&o.loadgen, "loadgen", "auto", "load generator of the full-speed run: wrk, builtin, or auto (wrk when installed)")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the API process during the full-speed run here")
	fs.BoolVar(&o.lambda, "lambda", false, "instead: the read function's bootstrap under AWS's Lambda Runtime Interface Emulator, one request at a time (init duration, single-request latency)")
	fs.IntVar(&o.lambdaRuns.colds, "lambda-environments", 10, "with --lambda: environments started, each measured cold, then warm")
	fs.IntVar(&o.lambdaRuns.warm, "lambda-requests", 50, "with --lambda: single requests to each environment after its first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, f := range strings.Split(o.connsFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 256 {
			return fmt.Errorf("read: --conns %q: want a comma-separated list of 1 to 256", o.connsFlag)
		}
		o.conns = append(o.conns, n)
	}
	if o.products < o.retailers || o.retailers < o.shards || o.products > 100_000*o.retailers ||
		o.duration < time.Second || o.duration > 5*time.Minute {
		return errors.New("read: need retailers >= shards, 1 to 100,000 products per retailer, and 1s <= duration <= 5m")
	}
	if o.loadgen == "auto" {
		o.loadgen = "builtin"
		if _, err := exec.LookPath("wrk"); err == nil {
			o.loadgen = "wrk"
		} else {
			fmt.Fprintln(os.Stderr, "read: wrk is not installed (apt-get install -y wrk); the built-in generator measures the full speed too")
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	// The API runs in this process: give it the read function's GC setting.
	read.TuneGC(os.Getenv("GOGC"))

	dir, err := os.MkdirTemp("", "catalog-bench-read-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "read: starting the local stack in %s (%d shards, %d replicas)\n", dir, o.shards, o.replicas)
	st, err := stack.Start(ctx, stack.Options{NoFullPageWrites: true,
		DataDir: dir, Addr: "127.0.0.1:0", Shards: o.shards, Replicas: o.replicas,
		ReadConns: int32(o.readConns), LookupSlots: o.slots, ApplyConcurrency: 2,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer st.Close()

	retailers, err := loadReadCatalog(ctx, st, o)
	if err != nil {
		return err
	}
	// Settle the databases as a long-running catalog would be: statistics
	// and visibility map up to date, dirty pages written, so that neither
	// autovacuum nor a checkpoint runs during the measured runs.
	for i, sh := range st.Stores.Shards {
		if _, err := sh.Pool().Exec(ctx, `VACUUM (ANALYZE) products`); err != nil {
			return fmt.Errorf("vacuum shard %d: %w", i, err)
		}
	}
	if _, err := st.Stores.Control.Pool().Exec(ctx, `VACUUM (ANALYZE) product_directory`); err != nil {
		return fmt.Errorf("vacuum control: %w", err)
	}
	if _, err := st.Stores.Control.Pool().Exec(ctx, `CHECKPOINT`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if err := st.Stores.WaitReplicas(ctx); err != nil {
		return err
	}
	if o.lambda {
		return benchReadLambda(ctx, st, dir, retailers, o.lambdaRuns)
	}
	paths := filepath.Join(dir, "paths.txt")
	mixProducts, err := writeReadTargets(paths, retailers, o, readMix)
	if err != nil {
		return err
	}
	singlePaths, batchPaths := filepath.Join(dir, "singles.txt"), filepath.Join(dir, "batches.txt")
	if _, err := writeReadTargets(singlePaths, retailers, o, readSingles); err != nil {
		return err
	}
	batchProducts, err := writeReadTargets(batchPaths, retailers, o, readBatches)
	if err != nil {
		return err
	}
	sqlTargets, dsns, err := writeSQLTargets(dir, st, retailers)
	if err != nil {
		return err
	}

	pg, err := newReadPgbench(dir, st, retailers, o)
	if err != nil {
		return err
	}

	// Ours: the API, driven from separate processes.
	fmt.Fprintln(os.Stderr, "read: warming up")
	if _, err := runReadLoad(ctx, st.APIURL, paths, 0, o.conns[0], 2*time.Second); err != nil {
		return err
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	if o.rate > 0 {
		res, err := runReadLoad(ctx, st.APIURL, paths, o.rate, o.conns[0], o.duration)
		if o.cpuprofile != "" {
			pprof.StopCPUProfile()
		}
		if err != nil {
			return err
		}
		fmt.Printf("API at %d requests/s (%d connections, %s): %.0f/s answered, %d errors; latency p50 %s, p90 %s, p99 %s, p99.9 %s, max %s\n",
			o.rate, o.conns[0], o.duration, res.QPS, res.Errors, res.P50, res.P90, res.P99, res.P999, res.Max)
		fmt.Println(readerStats(st))
		return nil
	}
	// The maximum of each system is its best over the concurrency levels:
	// every one is driven at each level, for the same duration.
	full, err := bestOf(o.conns, "API at full speed ("+o.loadgen+")", o.duration, func(conns int) (readResult, error) {
		if o.loadgen == "wrk" {
			return runWrk(ctx, dir, st.APIURL, paths, conns, o.duration)
		}
		return runReadLoad(ctx, st.APIURL, paths, 0, conns, o.duration)
	})
	if o.cpuprofile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	// Lookups a shared query carried, warm-up and the mix's full-speed runs
	// (queries of one lookup not counted: an upper bound).
	lookupsShared := 1
	if s := stackLookupStats(st); s.LookupBatches > 0 {
		lookupsShared = max(1, int(math.Round(float64(s.BatchedLookups)/float64(s.LookupBatches))))
	}
	half := max(1, int(full.QPS/2))
	fmt.Fprintf(os.Stderr, "read: API at %d requests/s (open loop, %d connections) for %s\n", half, full.Conns, o.duration)
	paced, err := runReadLoad(ctx, st.APIURL, paths, half, full.Conns, o.duration)
	if err != nil {
		return err
	}

	// Products/s: single GETs only, then batch-gets only, each at its best level.
	full1, err := bestOf(o.conns, "API, single GETs only ("+o.loadgen+")", o.duration, func(conns int) (readResult, error) {
		if o.loadgen == "wrk" {
			return runWrk(ctx, dir, st.APIURL, singlePaths, conns, o.duration)
		}
		return runReadLoad(ctx, st.APIURL, singlePaths, 0, conns, o.duration)
	})
	if err != nil {
		return err
	}
	fullBatch, err := bestOf(o.conns, fmt.Sprintf("API, batch-gets of %d only (%s)", o.pageLimit, o.loadgen), o.duration, func(conns int) (readResult, error) {
		if o.loadgen == "wrk" {
			return runWrk(ctx, dir, st.APIURL, batchPaths, conns, o.duration)
		}
		return runReadLoad(ctx, st.APIURL, batchPaths, 0, conns, o.duration)
	})
	if err != nil {
		return err
	}

	// References: the same SELECT straight to PostgreSQL.
	refFull, err := bestOf(o.conns, "pgbench at full speed", o.duration, func(conns int) (readResult, error) {
		return pg.run(ctx, "single", conns, 0, o.duration)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "read: pgbench at %d transactions/s (%d connections) for %s\n", int(refFull.QPS/2), refFull.Conns, o.duration)
	refHalf, err := pg.run(ctx, "single", refFull.Conns, refFull.QPS/2, o.duration)
	if err != nil {
		return err
	}
	refPgx, err := bestOf(o.conns, "pgx at full speed", o.duration, func(conns int) (readResult, error) {
		return runReadSQL(ctx, dsns, sqlTargets, conns, o.duration)
	})
	if err != nil {
		return err
	}

	// Floors: the mix's requests with nothing of ours in them, on the same
	// two cores: the CPU a request costs a bare net/http server and its load
	// generator, and the CPU the database spends on each statement the API
	// sends it (pgbench's own CPU left out). Single GETs' lookups go out
	// as many as the API shared a query with up to here.
	httpFloor, err := bestOf(o.conns, "floor: net/http answering the mix's requests with a constant ("+o.loadgen+")", o.duration, func(conns int) (readResult, error) {
		return runHTTPFloor(ctx, dir, st.APIURL, paths, singlePaths, o.loadgen, conns, o.duration)
	})
	if err != nil {
		return err
	}
	if err := pg.addLookups(lookupsShared); err != nil {
		return err
	}
	dbFloor := map[string]readResult{}
	for _, f := range []struct{ kind, what string }{
		{"lookups", fmt.Sprintf("%d single-product lookups a query", lookupsShared)},
		{"page", fmt.Sprintf("pages of %d", o.pageLimit)},
		{"batch", fmt.Sprintf("batch-gets of %d", o.pageLimit)},
	} {
		res, err := bestOf(o.conns, "floor: "+f.what+" straight to the database (pgbench)", o.duration, func(conns int) (readResult, error) {
			return pg.run(ctx, f.kind, conns, 0, o.duration)
		})
		if err != nil {
			return err
		}
		dbFloor[f.kind] = res
	}

	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
	fmt.Printf("\nstorefront reads: %d products, %d retailers, %d shards, %d replicas; 80%% single products, 10%% pages of %d, 10%% batch-gets of %d (%.1f products a request); %s runs at %s connections\n",
		o.products, o.retailers, o.shards, o.replicas, o.pageLimit, o.pageLimit, mixProducts, o.duration, o.connsFlag)
	fmt.Printf("%s\n\n", machine())
	fmt.Println("| figure | ours: HTTP API | reference: raw SELECT | ratio |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| max QPS vs pgbench (C) at (ours, its) best connections (%d, %d) | %.0f | %.0f | %.2f |\n", full.Conns, refFull.Conns, full.QPS, refFull.QPS, full.QPS/refFull.QPS)
	fmt.Printf("| max QPS vs pgx (Go) at (%d, %d) | %.0f | %.0f | %.2f |\n", full.Conns, refPgx.Conns, full.QPS, refPgx.QPS, full.QPS/refPgx.QPS)
	fmt.Printf("| p50 at 50%% of max (ours: %.0f/s, pgbench: %.0f/s) | %s | %s | %.2f |\n", paced.QPS, refHalf.QPS, ms(paced.P50), ms(refHalf.P50), float64(paced.P50)/float64(refHalf.P50))
	fmt.Printf("| p99 at 50%% of max | %s | %s | %.2f |\n", ms(paced.P99), ms(refHalf.P99), float64(paced.P99)/float64(refHalf.P99))
	fmt.Printf("| products/s of the mix at full speed vs pgx's rows/s | %.0f | %.0f | %.2f |\n", full.QPS*mixProducts, refPgx.QPS, full.QPS*mixProducts/refPgx.QPS)
	fmt.Printf("| errors (full speed, half) | %d, %d | %d, %d | |\n", full.Errors, paced.Errors, refFull.Errors+refPgx.Errors, refHalf.Errors)
	fmt.Println()
	fmt.Println("| storefront requests (full speed, best connections) | requests/s | products/s | products/s vs pgx's rows/s |")
	fmt.Println("|---|---:|---:|---:|")
	fmt.Printf("| single GETs only (%d) | %.0f | %.0f | %.2f |\n", full1.Conns, full1.QPS, full1.QPS, full1.QPS/refPgx.QPS)
	fmt.Printf("| batch-gets of %d only (%d) | %.0f | %.0f | %.2f |\n", o.pageLimit, fullBatch.Conns, fullBatch.QPS, fullBatch.QPS*batchProducts, fullBatch.QPS*batchProducts/refPgx.QPS)
	fmt.Printf("| errors (single, batch) | %d | %d | |\n", full1.Errors, fullBatch.Errors)
	batchIDs := float64(min(o.pageLimit, read.MaxBatchIDs))
	us := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond)) }
	cores := float64(runtime.NumCPU())
	lookup := dbFloor["lookups"].cpuPerRequest() / time.Duration(lookupsShared)
	page, batch := dbFloor["page"].cpuPerRequest(), dbFloor["batch"].cpuPerRequest()
	httpCPU := httpFloor.cpuPerRequest()
	dbMix := (time.Duration(10-readMix.pages-readMix.batches)*lookup + time.Duration(readMix.pages)*page + time.Duration(readMix.batches)*batch) / 10
	perSecond := func(cpu time.Duration) float64 { return cores / max(1e-9, cpu.Seconds()) }
	mixCeiling, batchCeiling := perSecond(httpCPU+dbMix), perSecond(httpCPU+batch)*batchIDs
	fmt.Println()
	fmt.Printf("| floor: CPU a request with nothing of ours in it (best connections; %.0f cores) | µs | at most, on these cores |\n", cores)
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| HTTP: net/http answering the mix's requests with the API's answer to one single GET, as a constant; server and %s (%d; %.0f/s) | %s | %.0f requests/s |\n", o.loadgen, httpFloor.Conns, httpFloor.QPS, us(httpCPU), perSecond(httpCPU))
	fmt.Printf("| database: a single-product lookup, %d a query as the API shared them (%d; %.0f queries/s) | %s | %.0f lookups/s |\n", lookupsShared, dbFloor["lookups"].Conns, dbFloor["lookups"].QPS, us(lookup), perSecond(lookup))
	fmt.Printf("| database: a page of %d (%d; %.0f/s) | %s | %.0f pages/s |\n", o.pageLimit, dbFloor["page"].Conns, dbFloor["page"].QPS, us(page), perSecond(page))
	fmt.Printf("| database: a batch-get of %.0f (%d; %.0f/s) | %s | %.0f batch-gets/s, %.0f products/s |\n", batchIDs, dbFloor["batch"].Conns, dbFloor["batch"].QPS, us(batch), perSecond(batch), perSecond(batch)*batchIDs)
	fmt.Printf("| the mix: HTTP and the database's share of its statements | %s | %.0f requests/s (%.2f of pgx's QPS; ours %.2f of it) |\n", us(httpCPU+dbMix), mixCeiling, mixCeiling/max(1, refPgx.QPS), full.QPS/mixCeiling)
	fmt.Printf("| batch-gets: HTTP and the database | %s | %.0f products/s (%.1fx our single GETs'; ours %.2f of it) |\n", us(httpCPU+batch), batchCeiling, batchCeiling/max(1, full1.QPS), fullBatch.QPS*batchProducts/batchCeiling)
	fmt.Printf("| errors (HTTP; lookups, pages, batch-gets) | %d; %d, %d, %d | |\n", httpFloor.Errors, dbFloor["lookups"].Errors, dbFloor["page"].Errors, dbFloor["batch"].Errors)
	ratio := fullBatch.QPS * batchProducts / max(1, full1.QPS)
	fmt.Printf("\nfull speed measured with %s; %s\n", o.loadgen, readerStats(st))
	fmt.Printf("targets (issue 15): max QPS >= 0.7 of pgbench: %v (%.2f); p99 at half load <= 3 ms: %v (%s)\n",
		full.QPS >= 0.7*refFull.QPS, full.QPS/refFull.QPS, paced.P99 <= 3*time.Millisecond, ms(paced.P99))
	fmt.Printf("target (issue 25): max QPS of the mix >= 0.9 of pgx's: %v (%.2f); its floor allows %.2f (out of reach on these cores when under 0.9)\n",
		full.QPS >= 0.9*refPgx.QPS, full.QPS/max(1, refPgx.QPS), mixCeiling/max(1, refPgx.QPS))
	fmt.Printf("target (issue 25): batch-get of %d serves >= 10x the products/s of single GETs: %v (%.1fx); its floor allows %.1fx (out of reach on these cores when under 10x)\n",
		o.pageLimit, ratio >= 10, ratio, batchCeiling/max(1, full1.QPS))
	return nil
}

// readRetailer is one loaded retailer and its product ids.
type readRetailer struct {
	ID    string
	Shard int
	IDs   []string
}

// loadReadCatalog onboards retailers spread evenly over the shards and
// uploads their catalogs through the API, waiting until all are applied.
func loadReadCatalog(ctx context.Context, st *stack.Stack, o readOptions) ([]readRetailer, error) {
	api := apiclient.New(st.APIURL)
	perShard := make([]int, o.shards)
	var retailers []readRetailer
	for i := 0; len(retailers) < o.retailers; i++ {
		id := fmt.Sprintf("bench-%03d", i)
		shard := catalog.ShardFor(id, o.shards)
		if perShard[shard] >= (o.retailers+o.shards-1)/o.shards {
			continue
		}
		perShard[shard]++
		retailers = append(retailers, readRetailer{ID: id, Shard: shard})
	}
	fmt.Fprintf(os.Stderr, "read: loading %d products for %d retailers through the pipeline\n", o.products, o.retailers)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(retailers))
	for i := range retailers {
		r := &retailers[i]
		n := o.products / o.retailers
		if i < o.products%o.retailers {
			n++
		}
		c := fixtures.Generate("sku", n)
		r.IDs = c.IDs()
		wg.Add(1)
		go func() {
			defer wg.Done()
			created, err := api.CreateRetailer(ctx, st.AdminToken, r.ID)
			if err != nil {
				errs <- fmt.Errorf("onboard %s: %w", r.ID, err)
				return
			}
			gen, err := api.Upload(ctx, created.Token, r.ID, "csv", c.CSV(nil))
			if err != nil {
				errs <- fmt.Errorf("upload %s: %w", r.ID, err)
				return
			}
			s, err := api.WaitSettled(ctx, created.Token, r.ID, gen, nil)
			if err == nil && s.State != "applied" {
				err = fmt.Errorf("generation %d is %s", gen, s.State)
			}
			if err != nil {
				errs <- fmt.Errorf("load %s: %w", r.ID, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "read: loaded in %s\n", time.Since(start).Round(time.Millisecond))
	return retailers, nil
}

// readRequestMix is a share of single GETs, pages and batch-gets, in tenths.
type readRequestMix struct{ pages, batches int }

var (
	readMix     = readRequestMix{pages: 1, batches: 1} // 8 tenths single GETs
	readSingles = readRequestMix{}
	readBatches = readRequestMix{batches: 10}
)

// writeReadTargets writes a request mix, one request a line (a path to GET,
// or "POST <path> <body>" for a batch-get): single products, pages starting
// after a random product, batch-gets of --page-limit random products of one
// retailer, in random order. It returns the products a request asks for,
// on average (a page near the end of a catalog holds fewer).
func writeReadTargets(path string, retailers []readRetailer, o readOptions, mix readRequestMix) (float64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(1, 2))
	const lines = 200_000
	products := 0
	for range lines {
		r := retailers[rng.IntN(len(retailers))]
		id := r.IDs[rng.IntN(len(r.IDs))]
		switch tenth := rng.IntN(10); {
		case tenth < mix.pages:
			fmt.Fprintf(w, "/v1/retailers/%s/products?limit=%d&after=%s\n", r.ID, o.pageLimit, url.QueryEscape(id))
			products += o.pageLimit
		case tenth < mix.pages+mix.batches:
			ids := make([]string, 0, o.pageLimit)
			seen := map[string]bool{}
			for len(ids) < min(o.pageLimit, read.MaxBatchIDs, len(r.IDs)) {
				if id := r.IDs[rng.IntN(len(r.IDs))]; !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
			body, err := json.Marshal(read.BatchGet{ProductIDs: ids})
			if err != nil {
				return 0, err
			}
			fmt.Fprintf(w, "POST /v1/retailers/%s/products/batch-get %s\n", r.ID, body)
			products += len(ids)
		default:
			fmt.Fprintf(w, "/v1/retailers/%s/products/%s\n", r.ID, url.PathEscape(id))
			products++
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return float64(products) / lines, f.Close()
}

// stackLookupStats sums the shard readers' counters.
func stackLookupStats(st *stack.Stack) pgstore.ReaderStats {
	var sum pgstore.ReaderStats
	for _, rs := range st.Stores.ShardReaders {
		s := rs.Stats()
		sum.FromReplicas, sum.FromWriter = sum.FromReplicas+s.FromReplicas, sum.FromWriter+s.FromWriter
		sum.LookupBatches, sum.BatchedLookups = sum.LookupBatches+s.LookupBatches, sum.BatchedLookups+s.BatchedLookups
	}
	return sum
}

// readerStats says where the API's shard queries went, and how many
// product lookups shared queries.
func readerStats(st *stack.Stack) string {
	s := stackLookupStats(st)
	return fmt.Sprintf("shard queries served by replicas: %d, by the writers: %d; %d product lookups shared %d queries (%.1f a query)",
		s.FromReplicas, s.FromWriter, s.BatchedLookups, s.LookupBatches, float64(s.BatchedLookups)/max(1, float64(s.LookupBatches)))
}

// readResult is what a load run measured.
type readResult struct {
	Requests, Errors int
	QPS              float64 // successful requests per second
	P50, P99         time.Duration
	P90, P999, Max   time.Duration
	Conns            int `json:"-"` // the concurrency level (set by bestOf)
	// CPU is what the run cost the side measured, where known: the load
	// generator's (a child process), the floor server's too (runHTTPFloor),
	// or the database server's alone (pgbench runs).
	CPU time.Duration `json:"-"`
}

// cpuPerRequest is r's CPU a successful request (0 when either is unknown).
func (r readResult) cpuPerRequest() time.Duration {
	if r.Requests-r.Errors <= 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Requests-r.Errors)
}

// setLatencies sets the percentiles from latencies sorted in increasing
// order (at least one).
func (r *readResult) setLatencies(sorted []time.Duration) {
	at := func(perMille int) time.Duration { return sorted[len(sorted)*perMille/1000] }
	r.P50, r.P90, r.P99, r.P999, r.Max = at(500), at(900), at(990), at(999), sorted[len(sorted)-1]
}

// bestOf runs measure at every concurrency level and returns the run of the
// highest QPS; an error at any level is the result.
func bestOf(levels []int, what string, d time.Duration, measure func(conns int) (readResult, error)) (readResult, error) {
	var best readResult
	for _, conns := range levels {
		fmt.Fprintf(os.Stderr, "read: %s, %d connections, for %s\n", what, conns, d)
		res, err := measure(conns)
		if err != nil {
			return res, err
		}
		fmt.Fprintf(os.Stderr, "read:   %.0f/s\n", res.QPS)
		if res.Conns = conns; res.QPS > best.QPS {
			best = res
		}
	}
	return best, nil
}

// runReadLoad runs the built-in load generator in a separate process (this
// binary again, as "read-load"); rate 0 means as fast as conns connections go.
func runReadLoad(ctx context.Context, apiURL, paths string, rate, conns int, d time.Duration) (readResult, error) {
	return runReadChild(ctx, d, "read-load", "--api", apiURL, "--paths", paths, "--rate", strconv.Itoa(rate),
		"--conns", strconv.Itoa(conns), "--duration", d.String())
}

// runReadChild runs this binary as a hidden subcommand and decodes the
// readResult it prints.
func runReadChild(ctx context.Context, d time.Duration, args ...string) (readResult, error) {
	self, err := os.Executable()
	if err != nil {
		return readResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return readResult{}, fmt.Errorf("%s: %w", args[0], err)
	}
	var res readResult
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("%s output %q: %w", args[0], out, err)
	}
	res.CPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, nil
}

var (
	wrkRPS     = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkTotal   = regexp.MustCompile(`([0-9]+) requests in`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: ([0-9]+)`)
	wrkSockErr = regexp.MustCompile(`Socket errors: connect ([0-9]+), read ([0-9]+), write ([0-9]+), timeout ([0-9]+)`)
)

// runWrk measures the full speed with wrk (one thread, conns connections),
// cycling through the paths; a Lua counter stops it after readMaxRequests
// requests.
func runWrk(ctx context.Context, dir, apiURL, paths string, conns int, d time.Duration) (readResult, error) {
	script := filepath.Join(dir, "wrk.lua")
	// No response() callback: with one, wrk hands every answer's headers
	// and body to Lua, which costs the shared CPU more than the parsing it
	// does itself. The request bound is counted where requests are made.
	lua := fmt.Sprintf(`local reqs, n, sent = {}, 0, 0
init = function(args)
  for line in io.lines(%q) do
    local path, body = line:match("^POST (%%S+) (.*)$")
    if path then
      reqs[#reqs + 1] = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body)
    else
      reqs[#reqs + 1] = wrk.format("GET", line)
    end
  end
end
request = function()
  sent = sent + 1
  if sent > %d then wrk.thread:stop() end
  n = n %% #reqs + 1
  return reqs[n]
end
`, paths, readMaxRequests)
	if err := os.WriteFile(script, []byte(lua), 0o644); err != nil {
		return readResult{}, err
	}
	u, err := url.Parse(apiURL)
	if err != nil || u.Hostname() != "127.0.0.1" {
		return readResult{}, fmt.Errorf("wrk: %s is not a loopback URL", apiURL)
	}
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "wrk", "-t1", "-c"+strconv.Itoa(conns), "-d"+strconv.Itoa(int(d.Seconds()))+"s",
		"--timeout", "5s", "-s", script, apiURL)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return readResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	res := readResult{CPU: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	m := wrkRPS.FindSubmatch(out)
	if m == nil {
		return res, fmt.Errorf("wrk: no Requests/sec in\n%s", out)
	}
	res.QPS, _ = strconv.ParseFloat(string(m[1]), 64)
	if m := wrkTotal.FindSubmatch(out); m != nil {
		res.Requests, _ = strconv.Atoi(string(m[1]))
	}
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		n, _ := strconv.Atoi(string(m[1]))
		res.Errors += n
	}
	if m := wrkSockErr.FindSubmatch(out); m != nil {
		for _, v := range m[1:] {
			n, _ := strconv.Atoi(string(v))
			res.Errors += n
		}
	}
	// Requests/sec counts every answer; the errors are reported beside it.
	return res, nil
}

// runHTTPFloor measures the HTTP floor of the mix: a bare net/http server
// on loopback answering every request of paths (a POST's body read and
// dropped) with the API's answer to the first single GET of singles, as a
// constant, driven as the API is.
func runHTTPFloor(ctx context.Context, dir, apiURL, paths, singles, loadgen string, conns int, d time.Duration) (readResult, error) {
	body, err := firstSingleAnswer(ctx, apiURL, singles)
	if err != nil {
		return readResult{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return readResult{}, err
	}
	length := []string{strconv.Itoa(len(body))}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		h := w.Header()
		h["Content-Type"] = jsonContentType
		h["Content-Length"] = length
		w.Write(body)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	floorURL := "http://" + ln.Addr().String()
	cpu := processCPU()
	var res readResult
	if loadgen == "wrk" {
		res, err = runWrk(ctx, dir, floorURL, paths, conns, d)
	} else {
		res, err = runReadLoad(ctx, floorURL, paths, 0, conns, d)
	}
	res.CPU += processCPU() - cpu // the server's (and this process's idle stack's)
	return res, err
}

var jsonContentType = []string{"application/json"}

// firstSingleAnswer is the API's answer to the first line of singles.
func firstSingleAnswer(ctx context.Context, apiURL, singles string) ([]byte, error) {
	f, err := os.Open(singles)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil, fmt.Errorf("%s: no request", singles)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiURL+sc.Text(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", sc.Text(), resp.Status)
	}
	return body, err
}

// writeSQLTargets writes, for the pgx reference, one "shard retailer
// product" line per single-product lookup, and returns the DSN of each
// shard on the server the API reads from (a replica when there are some).
func writeSQLTargets(dir string, st *stack.Stack, retailers []readRetailer) (string, []string, error) {
	var dsns []string
	for i, sh := range st.Stores.Shards {
		cfg := sh.Pool().Config().ConnConfig
		host := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		if len(st.Replicas) > 0 {
			host = st.Replicas[0]
		}
		u := url.URL{Scheme: "postgres", User: url.User(cfg.User), Host: host, Path: "/" + cfg.Database, RawQuery: "sslmode=disable"}
		if !strings.HasPrefix(host, "127.0.0.1:") {
			return "", nil, fmt.Errorf("shard %d is at %s, not on loopback", i, host)
		}
		dsns = append(dsns, u.String())
	}
	path := filepath.Join(dir, "sql-targets.txt")
	f, err := os.Create(path)
	if err != nil {
		return "", nil, err
	}
	w := bufio.NewWriter(f)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 200_000 {
		r := retailers[rng.IntN(len(retailers))]
		fmt.Fprintf(w, "%d %s %s\n", r.Shard, r.ID, r.IDs[rng.IntN(len(r.IDs))])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return "", nil, err
	}
	return path, dsns, f.Close()
}

// runReadSQL runs the pgx reference in a separate process (this binary
// again, as "read-sql").
func runReadSQL(ctx context.Context, dsns []string, targets string, conns int, d time.Duration) (readResult, error) {
	return runReadChild(ctx, d, "read-sql", "--dsns", strings.Join(dsns, ","), "--targets", targets,
		"--conns", strconv.Itoa(conns), "--duration", d.String())
}

// readSQL is the pgx reference process: conns goroutines, each running the
// storefront's product lookup (pgstore.StorefrontProductSQL, prepared and
// cached by pgx as in the API) for target after target, for a duration.
func readSQL(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("read-sql", flag.ContinueOnError)
	dsnList := fs.String("dsns", "", "comma-separated DSN of each shard")
	targetsFile := fs.String("targets", "", `file of "shard retailer product" lines`)
	conns := fs.Int("conns", 16, "connections (and goroutines) in all")
	d := fs.Duration("duration", 10*time.Second, "how long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	b, err := os.ReadFile(*targetsFile)
	if err != nil {
		return err
	}
	type target struct {
		shard               int
		retailer, productID string
	}
	var targets []target
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			return fmt.Errorf("read-sql: bad target %q", line)
		}
		shard, _ := strconv.Atoi(f[0])
		targets = append(targets, target{shard, f[1], f[2]})
	}
	var pools []*pgxpool.Pool
	for _, dsn := range strings.Split(*dsnList, ",") {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			return err
		}
		cfg.MaxConns = int32(*conns)
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return err
		}
		defer pool.Close()
		pools = append(pools, pool)
	}
	query := pgstore.StorefrontProductSQL()
	var count, failed atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(*d)
	for w := range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; time.Now().Before(deadline) && count.Load() < readMaxRequests && ctx.Err() == nil; i += *conns {
				t := targets[i%len(targets)]
				var attrs []byte
				var gen int64
				var at time.Time
				if err := pools[t.shard].QueryRow(ctx, query, t.retailer, t.productID).Scan(&attrs, &gen, &at); err != nil {
					failed.Add(1)
					continue
				}
				count.Add(1)
			}
		}()
	}
	wg.Wait()
	res := readResult{Requests: int(count.Load() + failed.Load()), Errors: int(failed.Load()),
		QPS: float64(count.Load()) / time.Since(start).Seconds()}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// readPgbench runs the references straight to the database: one pgbench
// process per shard database, in parallel, each running the read path's
// statements for random products of that shard's retailers.
type readPgbench struct {
	bin      string
	dir      string
	shards   []readPgbenchShard
	dataDirs []string // of the servers the reads go to: their CPU is the floors'
}

type readPgbenchShard struct {
	host, port, db string
	scripts        map[string]string // statement kind -> pgbench script file
	retailers      string            // pgbench expression of a random retailer of the shard
	perRetailer    int               // products of its smallest retailer
}

func newReadPgbench(dir string, st *stack.Stack, retailers []readRetailer, o readOptions) (*readPgbench, error) {
	binDir, err := pgserver.EnsureInstalled(context.Background(), io.Discard)
	if err != nil {
		return nil, err
	}
	p := &readPgbench{bin: filepath.Join(binDir, "pgbench"), dir: dir}
	if len(st.Replicas) == 0 {
		p.dataDirs = []string{filepath.Join(dir, "postgres")}
	} else if p.dataDirs, err = filepath.Glob(filepath.Join(dir, "postgres-replica-*")); err != nil {
		return nil, err
	}
	batchIDs := min(o.pageLimit, read.MaxBatchIDs)
	for shard, sh := range st.Stores.Shards {
		cfg := sh.Pool().Config().ConnConfig
		host, port := cfg.Host, strconv.Itoa(int(cfg.Port))
		if len(st.Replicas) > 0 { // the replicas serve the API's reads: the reference reads there too
			h, pp, _ := strings.Cut(st.Replicas[0], ":")
			host, port = h, pp
		}
		var ids []string
		perRetailer := 0
		for _, r := range retailers {
			if r.Shard == shard {
				ids = append(ids, "'"+r.ID+"'")
				if perRetailer == 0 || len(r.IDs) < perRetailer {
					perRetailer = len(r.IDs)
				}
			}
		}
		if len(ids) == 0 {
			continue
		}
		// The read path's statements, with their parameters drawn by
		// pgbench: the ids of fixtures.Generate are sku-00000, sku-00001...
		// The array lookup and the lpad are evaluated once per execution;
		// the index scans and the rows are the API's.
		retailer := fmt.Sprintf("(ARRAY[%s])[:r]", strings.Join(ids, ","))
		product := func(v string) string { return "'sku-' || lpad(:" + v + "::text, 5, '0')" }
		sets := fmt.Sprintf("\\set r random(1, %d)\n\\set p random(0, %d)\n", len(ids), perRetailer-1)
		var batchSets strings.Builder
		batch := make([]string, batchIDs)
		for i := range batch {
			fmt.Fprintf(&batchSets, "\\set p%d random(0, %d)\n", i, perRetailer-1)
			batch[i] = product(fmt.Sprintf("p%d", i))
		}
		scripts := map[string]string{
			"single": sets + pgbenchStatement(pgstore.StorefrontProductSQL(), "$1", retailer, "$2", product("p")),
			// A page as the API asks for it: one row more than it shows.
			"page": sets + pgbenchStatement(pgstore.StorefrontPageSQL(), "$1", retailer, "$2", product("p"), "$3", strconv.Itoa(o.pageLimit+1)),
			"batch": fmt.Sprintf("\\set r random(1, %d)\n", len(ids)) + batchSets.String() +
				pgbenchStatement(pgstore.StorefrontProductsByIDSQL(), "$1", retailer, "$2", "ARRAY["+strings.Join(batch, ", ")+"]"),
		}
		sh := readPgbenchShard{host: host, port: port, db: cfg.Database, scripts: map[string]string{},
			retailers: retailer, perRetailer: perRetailer}
		for kind, script := range scripts {
			if err := sh.addScript(dir, shard, kind, script); err != nil {
				return nil, err
			}
		}
		p.shards = append(p.shards, sh)
	}
	return p, nil
}

// addScript writes a pgbench script of the shard, run as kind.
func (sh *readPgbenchShard) addScript(dir string, shard int, kind, script string) error {
	path := filepath.Join(dir, fmt.Sprintf("pgbench-shard-%d-%s.sql", shard, kind))
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		return err
	}
	sh.scripts[kind] = path
	return nil
}

// addLookups writes the "lookups" scripts: n single-product lookups of
// random products of random retailers in one query, as the API's lookup
// batcher sends the lookups of concurrent single GETs
// (storefront_product_batch; the single-row statement when n is 1).
func (p *readPgbench) addLookups(n int) error {
	for i := range p.shards {
		sh := &p.shards[i]
		if n <= 1 {
			sh.scripts["lookups"] = sh.scripts["single"]
			continue
		}
		var sets strings.Builder
		retailers, products := make([]string, n), make([]string, n)
		for k := range n {
			fmt.Fprintf(&sets, "\\set r%d random(1, %d)\n\\set p%d random(0, %d)\n", k, strings.Count(sh.retailers, ",")+1, k, sh.perRetailer-1)
			retailers[k] = strings.Replace(sh.retailers, "[:r]", fmt.Sprintf("[:r%d]", k), 1)
			products[k] = fmt.Sprintf("'sku-' || lpad(:p%d::text, 5, '0')", k)
		}
		script := sets.String() + pgbenchStatement(pgstore.StorefrontProductBatchSQL(),
			"$1", "ARRAY["+strings.Join(retailers, ", ")+"]", "$2", "ARRAY["+strings.Join(products, ", ")+"]")
		if err := sh.addScript(p.dir, i, "lookups", script); err != nil {
			return err
		}
	}
	return nil
}

// serverCPU is the CPU the database servers of the reads have used so far.
func (p *readPgbench) serverCPU() (time.Duration, error) {
	var sum time.Duration
	for _, d := range p.dataDirs {
		cpu, err := serverCPU(d)
		if err != nil {
			return 0, err
		}
		sum += cpu
	}
	return sum, nil
}

// pgbenchStatement is sql without its comments, on one line, with its
// parameters replaced by pgbench expressions (old, new pairs).
func pgbenchStatement(sql string, params ...string) string {
	var lines []string
	for _, line := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			lines = append(lines, line)
		}
	}
	return strings.NewReplacer(params...).Replace(strings.Join(strings.Fields(strings.Join(lines, " ")), " ")) + "\n"
}

var readPgbenchTPS = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)
var readPgbenchFailed = regexp.MustCompile(`(?m)^number of failed transactions: ([0-9]+)`)
var readPgbenchDone = regexp.MustCompile(`(?m)^number of transactions actually processed: ([0-9]+)`)

// run runs every shard's pgbench script of kind in parallel for d, with
// conns clients in all, at rate transactions per second in all (0: as fast
// as they go), and sums them up; latencies come from the per-transaction
// logs, the CPU from the database servers'.
func (p *readPgbench) run(ctx context.Context, kind string, conns int, rate float64, d time.Duration) (readResult, error) {
	ctx, cancel := context.WithTimeout(ctx, d+time.Minute)
	defer cancel()
	logDir, err := os.MkdirTemp(p.dir, "pgbench-log-")
	if err != nil {
		return readResult{}, err
	}
	defer os.RemoveAll(logDir)
	type out struct {
		tps          float64
		done, failed int
		err          error
	}
	results := make([]out, len(p.shards))
	cpu0, cpuErr := p.serverCPU()
	var wg sync.WaitGroup
	for i, s := range p.shards {
		args := []string{"-n", "-M", "prepared", "-f", s.scripts[kind], "-c", strconv.Itoa(max(1, conns/len(p.shards))), "-j", "1",
			"-T", strconv.Itoa(int(d.Seconds())), "-h", s.host, "-p", s.port, "-U", "postgres"}
		if rate > 0 {
			args = append(args, "-R", strconv.Itoa(max(1, int(rate)/len(p.shards))),
				"--log", "--log-prefix", filepath.Join(logDir, fmt.Sprintf("shard%d", i)))
		}
		args = append(args, s.db)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, p.bin, args...)
			cmd.Dir = logDir
			cmd.Env = []string{"PATH=/usr/bin:/bin", "PGCONNECT_TIMEOUT=10"}
			b, err := cmd.CombinedOutput()
			if err != nil {
				results[i].err = fmt.Errorf("pgbench on %s: %w\n%s", s.db, err, b)
				return
			}
			m := readPgbenchTPS.FindSubmatch(b)
			if m == nil {
				results[i].err = fmt.Errorf("pgbench on %s: no tps in\n%s", s.db, b)
				return
			}
			results[i].tps, _ = strconv.ParseFloat(string(m[1]), 64)
			if m := readPgbenchFailed.FindSubmatch(b); m != nil {
				results[i].failed, _ = strconv.Atoi(string(m[1]))
			}
			if m := readPgbenchDone.FindSubmatch(b); m != nil {
				results[i].done, _ = strconv.Atoi(string(m[1]))
			}
		}()
	}
	wg.Wait()
	var res readResult
	for _, r := range results {
		if r.err != nil {
			return res, r.err
		}
		res.QPS += r.tps
		res.Errors += r.failed
		res.Requests += r.done + r.failed
	}
	// pgbench's backends have exited; once the postmaster has reaped them,
	// their CPU is in its children's.
	time.Sleep(100 * time.Millisecond)
	if cpu1, err := p.serverCPU(); err == nil && cpuErr == nil {
		res.CPU = cpu1 - cpu0
	}
	if rate > 0 {
		lat, err := readPgbenchLatencies(logDir)
		if err != nil {
			return res, err
		}
		res.setLatencies(lat)
	}
	return res, nil
}

// readPgbenchLatencies reads the per-transaction logs (client, transaction,
// latency in microseconds, ...) and returns the sorted latencies.
func readPgbenchLatencies(dir string) ([]time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(dir, "shard*"))
	if err != nil {
		return nil, err
	}
	var lat []time.Duration
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			us, err := strconv.ParseInt(f[2], 10, 64)
			if err != nil {
				continue
			}
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
	}
	if len(lat) == 0 {
		return nil, errors.New("pgbench: no transaction in the logs")
	}
	slices.Sort(lat)
	return lat, nil
}
