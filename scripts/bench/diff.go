package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
)

func init() {
	benches["diff"] = benchDiff
	children["diff-child"] = diffChild // one diff in a process of its own
}

// diffResult is what a diff child reports on stdout.
type diffResult struct {
	ElapsedNS int64 `json:"elapsed_ns"`
	Inserted  int64 `json:"inserted"`
	Updated   int64 `json:"updated"`
	Deleted   int64 `json:"deleted"`
	Unchanged int64 `json:"unchanged"`
	Chunks    int   `json:"chunks"`
	Sent      int   `json:"sent"`
	PeakRSS   int64 `json:"peak_rss"` // VmHWM at exit
	// The diff's own split, from its log lines: pass 1 (read, parse,
	// sort), the plan (merge walks, index), pass 2 (chunks).
	ReadMS int64 `json:"read_ms"`
	PlanMS int64 `json:"plan_ms"`
	SendMS int64 `json:"send_ms"`
}

// benchDiff: our diff of a generated 1M-row pair against `LC_ALL=C comm -3`
// of the same (sorted) files, on sorted and on shuffled input.
func benchDiff(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("diff", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "products in the snapshot")
	idBytes := fs.Int("id-bytes", 0, "random product_ids of this many bytes (default: SKU-0123456789)")
	large := fs.Bool("large", false, "the external-sort case: -rows 10000000 -id-bytes 128 -runs 1, peak RSS target 1.5 GiB (takes ~15 min and ~12 GB of disk)")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	runs := fs.Int("runs", 3, "runs of each measurement (the median is shown)")
	dir := fs.String("dir", "", "work directory (default: a temporary one, removed at the end)")
	sortMemory := fs.Int64("sort-memory-mb", 0, "the diff's memory budget for sorted runs, MiB (default: the diff's default)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the last shuffled diff to this file (and of the last sorted one to this file + \".sorted\")")
	timeout := fs.Duration("timeout", 20*time.Minute, "bound of the whole run (-large: at least 90m)")
	dryRun := fs.Bool("dry-run", false, "also time a dry run of the shuffled snapshot (DESIGN 13: its plan instead of chunks) beside its diff")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rssTarget int64 // 0: the 1M-row budget of 64 B/product over 64 MiB
	if *large {
		*rows, *idBytes, *runs, rssTarget = 10_000_000, 128, 1, 3<<29
		*timeout = max(*timeout, 90*time.Minute)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	work, cleanup, err := workDir(*dir, "catalog-bench-diff-")
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Fprintf(os.Stderr, "diff: generating %d-row snapshots in %s\n", *rows, work)
	pf, err := makePairFiles(work, *rows, *seed, *idBytes)
	if err != nil {
		return err
	}
	p := pf.pair
	fmt.Fprintf(os.Stderr, "diff: old %s, new %s; %d updated, %d deleted, %d inserted\n",
		mib(pf.oldBytes), mib(pf.newBytes), p.updated, p.deleted, p.inserted)

	// The reference needs sorted files: sort outside the timed section.
	oldC, newC := filepath.Join(work, "old.sorted"), filepath.Join(work, "new.sorted")
	for _, s := range [][2]string{{pf.oldSorted, oldC}, {pf.newShuf, newC}} {
		if _, err := os.Stat(s[1]); err == nil && pf.reused {
			continue
		}
		cmd := exec.CommandContext(ctx, "sort", "-o", s[1]+".part", s[0])
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sort %s: %v: %s", s[0], err, out)
		}
		if err := os.Rename(s[1]+".part", s[1]); err != nil {
			return err
		}
	}

	// Baseline: the old snapshot's first diff writes generation 1's index.
	blobsDir := filepath.Join(work, "blobs")
	databases, stopDatabases, err := startDiffDatabases(ctx)
	if err != nil {
		return err
	}
	defer stopDatabases()
	child := diffChildOptions{blobsDir: blobsDir, spillDir: filepath.Join(work, "spill"), sortMemory: *sortMemory << 20, databases: databases}
	if err := os.MkdirAll(child.spillDir, 0o755); err != nil {
		return err
	}
	first, err := runDiffChild(ctx, child, pf.oldSorted, 1, 0, 0, "")
	if err != nil {
		return fmt.Errorf("first diff: %w", err)
	}
	fmt.Fprintf(os.Stderr, "diff: first load of %d rows: %s, %d chunks, peak RSS %s\n",
		len(p.old), first.elapsed.Round(time.Millisecond), first.res.Chunks, mib(first.maxRSS))

	commRun := func() (measured, error) {
		out, err := os.Create(filepath.Join(work, "comm.out"))
		if err != nil {
			return measured{}, err
		}
		defer out.Close()
		cmd := exec.CommandContext(ctx, "comm", "-3", oldC, newC)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		cmd.Stdout = out
		return runMeasured(cmd)
	}
	// comm runs between our runs, so that both see the same machine.
	var commM []measured
	runComm := func() error {
		m, err := commRun()
		if err != nil {
			return err
		}
		commM = append(commM, m)
		return nil
	}
	if err := runComm(); err != nil {
		return err
	}
	commLines, _ := countLines(filepath.Join(work, "comm.out"))
	budget := int64(32*len(p.new)) + 64<<20 // issue 15: at most 32 B a product over a fixed 64 MiB
	var table []tableRow
	for _, mode := range []struct{ name, file string }{{"sorted", pf.newSorted}, {"shuffled", pf.newShuf}} {
		var ms []childRun
		for i := 0; i < *runs; i++ {
			prof := ""
			if *cpuprofile != "" && i == *runs-1 {
				prof = *cpuprofile
				if mode.name == "sorted" {
					prof += ".sorted"
				}
			}
			os.RemoveAll(filepath.Join(blobsDir, "chunks", "bench", "2"))
			r, err := runDiffChild(ctx, child, mode.file, 2, 1, int64(len(p.old)), prof)
			if err != nil {
				return fmt.Errorf("%s diff: %w", mode.name, err)
			}
			if got, want := r.res.Inserted+r.res.Updated+r.res.Deleted, int64(p.inserted+p.updated+p.deleted); got != want {
				return fmt.Errorf("%s diff found %d changes, want %d", mode.name, got, want)
			}
			fmt.Fprintf(os.Stderr, "diff: %s: %s (CPU %s), %d chunks, peak RSS %s\n", mode.name, r.elapsed.Round(time.Millisecond),
				r.cpu.Round(time.Millisecond), r.res.Chunks, mib(r.maxRSS))
			ms = append(ms, r)
			if err := runComm(); err != nil {
				return err
			}
		}
		comm := median(commM)
		fmt.Fprintf(os.Stderr, "diff: comm -3 so far: %s median of %d (CPU %s; %d lines out), peak RSS %s\n",
			comm.elapsed.Round(time.Millisecond), len(commM), comm.cpu.Round(time.Millisecond), commLines, mib(comm.maxRSS))
		slices.SortFunc(ms, func(a, b childRun) int { return int(a.elapsed - b.elapsed) })
		ours := ms[len(ms)/2]
		var rss int64
		for _, m := range ms {
			rss = max(rss, m.maxRSS)
		}
		n := float64(len(p.new))
		target := map[string]string{"sorted": "1.0", "shuffled": "1.5"}[mode.name] // issue 25
		rssNote := fmt.Sprintf("%.0f B/product over 64 MiB (target ≤ 32: %s)", float64(rss-64<<20)/n, mib(budget))
		if rssTarget > 0 {
			rssNote = fmt.Sprintf("%.0f B/product over 64 MiB (target < %s)", float64(rss-64<<20)/n, mib(rssTarget))
		}
		table = append(table,
			tableRow{mode.name + " input: time", ours.elapsed.Round(time.Millisecond).String(), comm.elapsed.Round(time.Millisecond).String(),
				ratio(ours.elapsed.Seconds(), comm.elapsed.Seconds()) + " (target ≤ " + target + ")"},
			tableRow{mode.name + " input: CPU (user + sys)", ours.cpu.Round(time.Millisecond).String(), comm.cpu.Round(time.Millisecond).String(),
				ratio(ours.cpu.Seconds(), comm.cpu.Seconds())},
			tableRow{mode.name + " input: rows/s", fmtRate(rate(n, ours.elapsed), "rows/s"), fmtRate(rate(n, comm.elapsed), "rows/s"),
				ratio(rate(n, ours.elapsed), rate(n, comm.elapsed))},
			tableRow{mode.name + " input: snapshot MB/s", fmt.Sprintf("%.0f MB/s", rate(float64(pf.newBytes)/1e6, ours.elapsed)),
				fmt.Sprintf("%.0f MB/s", rate(float64(pf.newBytes)/1e6, comm.elapsed)), ratio(rate(1, ours.elapsed), rate(1, comm.elapsed))},
			tableRow{mode.name + " input: peak RSS", mib(rss), mib(comm.maxRSS), rssNote},
			tableRow{mode.name + " input: pass 1 / plan / pass 2", fmt.Sprintf("%d / %d / %d ms", ours.res.ReadMS, ours.res.PlanMS, ours.res.SendMS), "-", "-"},
		)
	}
	if *dryRun {
		prof := ""
		if *cpuprofile != "" {
			prof = *cpuprofile + ".dry-run"
		}
		if err := dryRunRows(ctx, child, pf.newShuf, int64(len(p.old)), *runs, prof, table, &table); err != nil {
			return err
		}
	}
	table = append(table, tableRow{"first load (no baseline): time", first.elapsed.Round(time.Millisecond).String(), "-", "-"},
		tableRow{"first load: peak RSS", mib(first.maxRSS), "-", "-"})
	ids := "ids like SKU-0123456789"
	if *idBytes > 0 {
		ids = fmt.Sprintf("random %d-byte ids", *idBytes)
	}
	printTable(os.Stdout, fmt.Sprintf("diff: %d rows (%s new snapshot, %s), %d changes (2%% updated, 1%% deleted, 1%% inserted); reference `LC_ALL=C comm -3` on the sorted files, run between ours (median of %d); %s",
		len(p.new), mib(pf.newBytes), ids, p.inserted+p.updated+p.deleted, len(commM), machine()), table)
	return nil
}

// dryRunRows times runs dry runs of file (generation 2 against baseline
// 1) and adds their median beside the shuffled diff's row of table: the
// same pass 1 and merge, then the plan (the changed rows read again, the
// shard's values read by id, the plan objects written) instead of the
// chunks. The bench's shard holds no products, so every "from" read finds
// nothing (a catalog's would find the changed rows: one more key probe
// each).
func dryRunRows(ctx context.Context, o diffChildOptions, file string, baselineProducts int64, runs int, cpuprofile string, table []tableRow, out *[]tableRow) error {
	o.dryRun = true
	var ms []childRun
	for i := 0; i < runs; i++ {
		os.RemoveAll(filepath.Join(o.blobsDir, "plans", "bench", "2"))
		prof := ""
		if i == runs-1 {
			prof = cpuprofile
		}
		r, err := runDiffChild(ctx, o, file, 2, 1, baselineProducts, prof)
		if err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
		fmt.Fprintf(os.Stderr, "diff: dry run of the shuffled snapshot: %s, peak RSS %s\n", r.elapsed.Round(time.Millisecond), mib(r.maxRSS))
		ms = append(ms, r)
	}
	slices.SortFunc(ms, func(a, b childRun) int { return int(a.elapsed - b.elapsed) })
	dry := ms[len(ms)/2]
	var diffTime string
	for _, row := range table {
		if row.figure == "shuffled input: time" {
			diffTime = row.ours
		}
	}
	d, _ := time.ParseDuration(diffTime)
	*out = append(*out, tableRow{"shuffled input, dry run: time (vs its diff)", dry.elapsed.Round(time.Millisecond).String(), diffTime,
		ratio(dry.elapsed.Seconds(), d.Seconds()) + " (target ≤ 1)"},
		tableRow{"shuffled input, dry run: peak RSS", mib(dry.maxRSS), "-", "-"})
	return nil
}

type childRun struct {
	measured
	res diffResult
}

// diffChildOptions are the settings every diff child of a run shares.
type diffChildOptions struct {
	blobsDir   string         // the blob store's files
	spillDir   string         // the diff's spilled sorted runs
	sortMemory int64          // the diff's budget for sorted runs, bytes (0: its default)
	databases  *diffDatabases // each child's store: copies of its templates
	dryRun     bool           // the diffed generation is a dry run (DESIGN 13)
}

// runDiffChild runs one diff of generation gen in a child process (so that
// its peak RSS is its own): the upload is file, the baseline generation's
// index is under o.blobsDir, the store is on new copies of the databases'
// templates (the PostgreSQL server's memory is not the child's).
func runDiffChild(ctx context.Context, o diffChildOptions, file string, gen, baseline, baselineProducts int64, cpuprofile string) (childRun, error) {
	exe, err := os.Executable()
	if err != nil {
		return childRun{}, err
	}
	control, shard, err := o.databases.fresh(ctx)
	if err != nil {
		return childRun{}, err
	}
	cmd := exec.CommandContext(ctx, exe, "diff-child", "-control", control, "-shard", shard, "-blobs", o.blobsDir, "-file", file,
		"-gen", strconv.FormatInt(gen, 10), "-baseline", strconv.FormatInt(baseline, 10),
		"-baseline-products", strconv.FormatInt(baselineProducts, 10), "-cpuprofile", cpuprofile,
		"-spill-dir", o.spillDir, "-sort-memory", strconv.FormatInt(o.sortMemory, 10), "-dry-run="+strconv.FormatBool(o.dryRun))
	m, err := runMeasured(cmd)
	if err != nil {
		return childRun{}, err
	}
	var res diffResult
	if err := json.Unmarshal(m.stdout, &res); err != nil {
		return childRun{}, fmt.Errorf("diff child said %q: %w", m.stdout, err)
	}
	m.elapsed = time.Duration(res.ElapsedNS)
	if res.PeakRSS > 0 {
		m.maxRSS = res.PeakRSS
	}
	return childRun{measured: m, res: res}, nil
}

// diffChild runs one diff through diff.Handler over local files, its store
// on the databases of -control and -shard (PostgreSQL, as in production),
// and prints a diffResult. Counted: from opening the upload to the last
// chunk object written and its message handed to the (discarding) queue.
func diffChild(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("diff-child", flag.ContinueOnError)
	controlDSN := fs.String("control", "", "")
	shardDSN := fs.String("shard", "", "")
	blobsDir := fs.String("blobs", "", "")
	file := fs.String("file", "", "")
	gen := fs.Int64("gen", 1, "")
	baseline := fs.Int64("baseline", 0, "")
	baselineProducts := fs.Int64("baseline-products", 0, "")
	cpuprofile := fs.String("cpuprofile", "", "")
	memprofile := fs.String("memprofile", "", "write an allocation profile (every 4 KiB allocated) to this file")
	spillDir := fs.String("spill-dir", "", "")
	sortMemory := fs.Int64("sort-memory", 0, "")
	dryRun := fs.Bool("dry-run", false, "")
	if err := fs.Parse(args); err != nil {
		return err
	}
	key := keys.Upload(benchRetailer.ID, *gen)
	blobs := &inmem.Blobs{Dir: *blobsDir}
	blobs.Link(key, *file)
	queue := inmem.NewQueue()
	store, err := benchStore(ctx, *controlDSN, *shardDSN, *gen, *baseline, *baselineProducts, *dryRun)
	if err != nil {
		return err
	}
	defer store.Close()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	h := diff.New(diff.Config{SmallQueueURL: "small", LargeQueueURL: "large", MaxUploadBytes: 16 << 30,
		SortMemoryBytes: *sortMemory, SpillDir: *spillDir}, store, blobs, queue, log)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 4096
	}
	start := time.Now()
	err = h.Diff(ctx, message.DiffJob{Key: key, RetailerID: benchRetailer.ID, Generation: *gen})
	elapsed := time.Since(start)
	if err != nil {
		return err
	}
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		runtime.GC() // the profile is as of the last collection
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			return err
		}
	}
	c, err := diffOutcome(ctx, store, *gen)
	if err != nil {
		return err
	}
	res := diffResult{ElapsedNS: elapsed.Nanoseconds(), Inserted: c.Inserted, Updated: c.Updated,
		Deleted: c.Deleted, Unchanged: c.Unchanged, Chunks: c.ChunksTotal, Sent: queue.Sent(), PeakRSS: selfHWM()}
	for _, line := range bytes.Split(logs.Bytes(), []byte("\n")) {
		var l struct {
			Msg    string `json:"msg"`
			ReadMS *int64 `json:"read_ms"`
			PlanMS *int64 `json:"plan_ms"`
			SendMS *int64 `json:"send_ms"`
		}
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		for _, f := range []struct{ from, to *int64 }{{l.ReadMS, &res.ReadMS}, {l.PlanMS, &res.PlanMS}, {l.SendMS, &res.SendMS}} {
			if f.from != nil {
				*f.to = *f.from
			}
		}
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

func median(ms []measured) measured {
	s := slices.Clone(ms)
	slices.SortFunc(s, func(a, b measured) int { return int(a.elapsed - b.elapsed) })
	m := s[len(s)/2]
	for _, x := range s {
		m.maxRSS = max(m.maxRSS, x.maxRSS)
	}
	return m
}

func countLines(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n, nil
}

// workDir returns dir (created) or a new temporary directory removed by cleanup.
func workDir(dir, pattern string) (string, func(), error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	d, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	return d, func() { os.RemoveAll(d) }, nil
}
