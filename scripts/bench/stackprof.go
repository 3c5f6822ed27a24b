package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// The whole stack's CPU during the phases of `e2e` (issue 25): per process
// (this one, which runs our functions, the S3 stand-in and the pollers;
// PostgreSQL's postmaster and backends; the fauxqs node process; whatever
// else this process started) from /proc, and per function inside this
// process from a CPU profile whose samples carry the stack's goroutine
// labels (stack.ProfileLabel).
//
// A process tree's CPU at an instant is the sum, over its live members, of
// utime+stime (their own) and cutime+cstime (their reaped children's,
// which the kernel folds into the parent at wait, recursively). A backend
// that exits during a phase moves from the first term (its own, while it
// lives) into the postmaster's cutime once reaped, so the difference of
// two readings, one at each end of the phase, counts it exactly once:
// periodic sampling would add nothing to the totals. It splits
// PostgreSQL's by kind of process (client backends, autovacuum workers,
// checkpointer, ...: the process titles), which an exited backend's
// cutime no longer tells: every 200 ms each child of the postmaster's
// last value is kept, so a backend that exits loses at most its last
// 200 ms to "not sampled".

// userHZ is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on
// every Linux the kernel ABI allows).
const userHZ = 100

// procStat is one process's line of /proc/<pid>/stat, its CPU in clock
// ticks (userHZ a second).
type procStat struct {
	pid, ppid                    int
	comm                         string
	utime, stime, cutime, cstime int64
}

// parseProcStat parses a /proc/<pid>/stat line: "pid (comm) state ppid
// ... utime stime cutime cstime ..." (fields 1, 2, 4 and 14-17); comm may
// hold spaces and parentheses, so the fields are counted from its last ')'.
func parseProcStat(line string) (procStat, error) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 1 || end < open {
		return procStat{}, fmt.Errorf("proc stat %q: no (comm)", line)
	}
	var s procStat
	var err error
	if s.pid, err = strconv.Atoi(strings.TrimSpace(line[:open])); err != nil {
		return procStat{}, fmt.Errorf("proc stat pid: %w", err)
	}
	s.comm = line[open+1 : end]
	f := strings.Fields(line[end+1:])
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("proc stat of %d: %d fields after comm, want at least 15", s.pid, len(f))
	}
	ints := []*int64{&s.utime, &s.stime, &s.cutime, &s.cstime}
	for i, p := range ints {
		if *p, err = strconv.ParseInt(f[11+i], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("proc stat of %d, field %d: %w", s.pid, 14+i, err)
		}
	}
	if s.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("proc stat of %d, ppid: %w", s.pid, err)
	}
	return s, nil
}

// readProcs reads every process's stat under procDir (/proc); a process
// gone meanwhile is skipped.
func readProcs(procDir string) (map[int]procStat, error) {
	entries, err := os.ReadDir(procDir)
	if err != nil {
		return nil, err
	}
	procs := make(map[int]procStat, len(entries))
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(procDir, e.Name(), "stat"))
		if err != nil {
			continue
		}
		s, err := parseProcStat(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		procs[s.pid] = s
	}
	return procs, nil
}

// treeTicks is the CPU of root's process tree in procs: over root and its
// live descendants, their own and their reaped children's ticks (0 when
// root is not in procs).
func treeTicks(procs map[int]procStat, root int) int64 {
	if _, ok := procs[root]; !ok {
		return 0
	}
	children := map[int][]int{}
	for pid, s := range procs {
		children[s.ppid] = append(children[s.ppid], pid)
	}
	var ticks int64
	todo := []int{root}
	seen := map[int]bool{}
	for len(todo) > 0 {
		pid := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		s := procs[pid]
		ticks += s.utime + s.stime + s.cutime + s.cstime
		todo = append(todo, children[pid]...)
	}
	return ticks
}

// machineBusyTicks parses /proc/stat's first line ("cpu user nice system
// idle iowait irq softirq steal ..."): the ticks all cores spent busy
// (everything but idle and iowait; guest time is already in user).
func machineBusyTicks(stat string) (int64, error) {
	line, _, _ := strings.Cut(stat, "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, fmt.Errorf("/proc/stat: first line %q", line)
	}
	var busy int64
	for i, v := range f[1:9] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/stat field %d: %w", i+1, err)
		}
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, nil
}

// cpuByLabel sums a CPU profile's samples by the value of label key, ""
// for the samples without it (the runtime's own goroutines: GC workers,
// the scheduler, and goroutines started outside any labelled one).
func cpuByLabel(p *profile.Profile, key string) (map[string]time.Duration, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" && st.Unit == "nanoseconds" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("profile has no cpu/nanoseconds sample type (%d types)", len(p.SampleType))
	}
	out := map[string]time.Duration{}
	for _, s := range p.Sample {
		label := ""
		if v := s.Label[key]; len(v) > 0 {
			label = v[0]
		}
		out[label] += time.Duration(s.Value[idx])
	}
	return out, nil
}

// cpuSnapshot is the stack's CPU at one instant.
type cpuSnapshot struct {
	at    time.Time
	self  time.Duration // this process, getrusage
	procs map[int]procStat
	busy  int64 // the machine's busy ticks, all cores
}

func takeSnapshot() cpuSnapshot {
	s := cpuSnapshot{at: time.Now(), self: processCPU()}
	s.procs, _ = readProcs("/proc")
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		s.busy, _ = machineBusyTicks(string(b))
	}
	return s
}

// phaseCPU is what the stack spent in one phase.
type phaseCPU struct {
	name      string
	wall      time.Duration
	self      time.Duration            // this process (getrusage)
	children  map[string]time.Duration // by process kind (childName), trees of this process's children
	stack     time.Duration            // this process's whole tree (/proc)
	machine   time.Duration            // every core's busy time
	functions map[string]time.Duration // this process by stack.ProfileLabel ("" unlabelled)
	pgKinds   map[string]time.Duration // PostgreSQL's children by pgKind, sampled
	sampled   time.Duration            // the profile's samples in all
	profErr   error
}

// childName is how the tables name a child process of the bench by its comm.
func childName(comm string) string {
	switch comm {
	case "postgres":
		return "PostgreSQL: postmaster and all its backends"
	case "node":
		return "fauxqs, the SQS/SNS emulator (node)"
	}
	return comm
}

// phaseDelta is the CPU of each child tree of self between two snapshots:
// the children of self at either end, grouped by childName, and "exited
// children" for what the whole tree spent beyond this process and its
// live children (children that ended during the phase).
func phaseDelta(a, b map[int]procStat, self int) (children map[string]time.Duration, tree time.Duration) {
	ticks := func(t int64) time.Duration { return time.Duration(t) * time.Second / userHZ }
	roots := map[int]string{}
	for _, m := range []map[int]procStat{a, b} {
		for pid, s := range m {
			if s.ppid == self && pid != self {
				roots[pid] = s.comm
			}
		}
	}
	children = map[string]time.Duration{}
	whole := treeTicks(b, self) - treeTicks(a, self)
	rest := whole - (b[self].utime + b[self].stime - a[self].utime - a[self].stime)
	for pid, comm := range roots {
		if _, alive := b[pid]; !alive {
			continue // its CPU is in self's cutime now: counted in rest
		}
		d := treeTicks(b, pid) - treeTicks(a, pid)
		children[childName(comm)] += ticks(d)
		rest -= d
	}
	if rest > 0 {
		children["exited children"] += ticks(rest)
	}
	return children, ticks(whole)
}

// stackProfiler measures the phases of an e2e bench.
type stackProfiler struct {
	dir    string // where the raw CPU profiles are kept ("" none)
	phases []*phaseCPU
}

// measure runs fn as phase name: the stack's CPU from /proc at both ends
// and a CPU profile of this process meanwhile (kept in p.dir as
// <n>-<name>.pprof).
func (p *stackProfiler) measure(name string, fn func() error) error {
	var buf bytes.Buffer
	profErr := pprof.StartCPUProfile(&buf)
	a := takeSnapshot()
	pg := newPGSampler(a.procs, os.Getpid())
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				if procs, err := readProcs("/proc"); err == nil {
					pg.sample(procs, readTitle)
				}
			}
		}
	}()
	err := fn()
	b := takeSnapshot()
	close(stop)
	<-sampled
	pg.sample(b.procs, readTitle)
	if profErr == nil {
		pprof.StopCPUProfile()
	}
	ph := &phaseCPU{name: name, wall: b.at.Sub(a.at), self: b.self - a.self,
		machine: time.Duration(b.busy-a.busy) * time.Second / userHZ, profErr: profErr, pgKinds: pg.byKind()}
	ph.children, ph.stack = phaseDelta(a.procs, b.procs, os.Getpid())
	if profErr == nil {
		raw := buf.Bytes()
		if p.dir != "" {
			file := filepath.Join(p.dir, fmt.Sprintf("%d-%s.pprof", len(p.phases)+1, strings.ReplaceAll(name, " ", "-")))
			if werr := os.WriteFile(file, raw, 0o644); werr != nil {
				ph.profErr = werr
			}
		}
		if prof, perr := profile.Parse(bytes.NewReader(raw)); perr != nil {
			ph.profErr = perr
		} else if ph.functions, perr = cpuByLabel(prof, stack.ProfileLabel); perr != nil {
			ph.profErr = perr
		}
		for _, d := range ph.functions {
			ph.sampled += d
		}
	}
	p.phases = append(p.phases, ph)
	return err
}

// settle measures phase name as the wait until the stack is quiet: its
// processes together below 0.15 of a core over the last quiet (the
// consumers' batching window and more), at most limit.
func (p *stackProfiler) settle(ctx context.Context, name string, quiet, limit time.Duration) error {
	return p.measure(name, func() error {
		type point struct {
			at    time.Time
			ticks int64
		}
		self := os.Getpid()
		start := time.Now()
		var points []point
		for time.Since(start) < limit {
			procs, err := readProcs("/proc")
			if err != nil {
				return nil // not Linux: no tail
			}
			now := point{time.Now(), treeTicks(procs, self)}
			points = append(points, now)
			for len(points) > 1 && now.at.Sub(points[1].at) >= quiet {
				points = points[1:]
			}
			if span := now.at.Sub(points[0].at); span >= quiet {
				cores := float64(now.ticks-points[0].ticks) / userHZ / span.Seconds()
				if cores < 0.15 {
					return nil
				}
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
		return nil
	})
}

// cpuCell is "12.34 s (56%)": d and its share of wall x cores.
func cpuCell(d, wall time.Duration) string {
	if wall <= 0 {
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
	return fmt.Sprintf("%.2f s (%.0f%%)", d.Seconds(), 100*d.Seconds()/(wall.Seconds()*float64(runtime.NumCPU())))
}

// functionKind says whose CPU a label's is on AWS.
func functionKind(label string) string {
	switch label {
	case stack.LabelS3, stack.LabelPollers, stack.LabelAPIServer:
		return "stand-in (AWS's)"
	case benchClientLabel:
		return "the bench"
	case "":
		return "Go runtime: GC, scheduler"
	}
	return "ours (Lambda)"
}

// benchClientLabel labels the bench's own goroutines (the PUT of the file,
// the status polls).
const benchClientLabel = "bench client"

// print writes the two tables: CPU per process and per function of this
// process, a column per phase; ref, when set, is the reference's CPU and
// wall time (a row of the process table).
func (p *stackProfiler) print(w io.Writer, ref *measured) {
	if len(p.phases) == 0 {
		return
	}
	cores := runtime.NumCPU()
	header := []string{"process", "on AWS"}
	for _, ph := range p.phases {
		header = append(header, ph.name)
	}
	row := func(name, kind string, cell func(*phaseCPU) string) []string {
		r := []string{name, kind}
		for _, ph := range p.phases {
			r = append(r, cell(ph))
		}
		return r
	}
	rows := [][]string{
		row("wall time of the phase", "", func(ph *phaseCPU) string { return fmt.Sprintf("%.2f s", ph.wall.Seconds()) }),
		row("this process: our functions, the S3 stand-in, the pollers (split below)", "ours + stand-ins", func(ph *phaseCPU) string { return cpuCell(ph.self, ph.wall) }),
	}
	names := map[string]bool{}
	for _, ph := range p.phases {
		for n := range ph.children {
			names[n] = true
		}
	}
	for _, n := range sortedKeys(names) {
		kind := "stand-in (AWS's)"
		switch {
		case strings.HasPrefix(n, "PostgreSQL"):
			kind = "the database (Aurora)"
		case n == "exited children" || n == "comm" || n == "sort":
			kind = "the bench"
		}
		rows = append(rows, row(n, kind, func(ph *phaseCPU) string { return cpuCell(ph.children[n], ph.wall) }))
		if strings.HasPrefix(n, "PostgreSQL") {
			kinds := map[string]bool{}
			for _, ph := range p.phases {
				for k := range ph.pgKinds {
					kinds[k] = true
				}
			}
			for _, k := range sortedKeys(kinds) {
				rows = append(rows, row("- of which "+k, "", func(ph *phaseCPU) string { return cpuCell(ph.pgKinds[k], ph.wall) }))
			}
			rows = append(rows, row("- of which the postmaster and what exited between samples", "", func(ph *phaseCPU) string {
				rest := ph.children[n]
				for _, d := range ph.pgKinds {
					rest -= d
				}
				return cpuCell(max(rest, 0), ph.wall)
			}))
		}
	}
	rows = append(rows,
		row("the whole stack (this process's tree)", "", func(ph *phaseCPU) string { return cpuCell(ph.stack, ph.wall) }),
		row("the rest of the machine (other tenants)", "not ours", func(ph *phaseCPU) string { return cpuCell(max(ph.machine-ph.stack, 0), ph.wall) }),
	)
	if ref != nil {
		r := []string{fmt.Sprintf("reference `comm -3` (median run; share of its own %.2f s)", ref.elapsed.Seconds()), "", cpuCell(ref.cpu, ref.elapsed)}
		for len(r) < len(header) {
			r = append(r, "")
		}
		rows = append(rows, r)
	}
	printColumns(w, fmt.Sprintf("e2e: CPU per process in each phase, seconds (share of the phase's wall time x %d cores), from /proc (a process tree: its live members' own and reaped children's times); load average at the end %s",
		cores, loadAverage()), header, rows)

	labels := map[string]time.Duration{}
	for _, ph := range p.phases {
		for l, d := range ph.functions {
			labels[l] += d
		}
	}
	order := make([]string, 0, len(labels))
	for l := range labels {
		order = append(order, l)
	}
	sort.Slice(order, func(i, j int) bool {
		if labels[order[i]] != labels[order[j]] {
			return labels[order[i]] > labels[order[j]]
		}
		return order[i] < order[j]
	})
	header[0] = "function (goroutine label)"
	rows = nil
	for _, l := range order {
		name := l
		if name == "" {
			name = "unlabelled"
		}
		rows = append(rows, row(name, functionKind(l), func(ph *phaseCPU) string {
			if ph.profErr != nil {
				return "?"
			}
			return cpuCell(ph.functions[l], ph.wall)
		}))
	}
	rows = append(rows,
		row("all samples of the profile", "", func(ph *phaseCPU) string { return cpuCell(ph.sampled, ph.wall) }),
		row("this process (getrusage)", "", func(ph *phaseCPU) string { return cpuCell(ph.self, ph.wall) }),
	)
	printColumns(w, "e2e: CPU of this process per function in each phase, seconds (share of wall time x cores), from a CPU profile (100 Hz) whose samples carry the stack's goroutine label `function`", header, rows)
	for _, ph := range p.phases {
		if ph.profErr != nil {
			fmt.Fprintf(w, "\n(%s: no profile: %v)\n", ph.name, ph.profErr)
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// withBenchLabel runs fn under the bench client's label.
func withBenchLabel(ctx context.Context, fn func(context.Context) error) error {
	var err error
	pprof.Do(ctx, pprof.Labels(stack.ProfileLabel, benchClientLabel), func(ctx context.Context) { err = fn(ctx) })
	return err
}

// pgSampler follows the children of PostgreSQL's postmasters (the
// bench's children named postgres) through a phase: each one's CPU at
// the start (0 for one born later) and at its last sample, and its kind.
type pgSampler struct {
	self  int
	procs map[int]*pgChild
	start map[int]procStat
}

type pgChild struct {
	kind        string
	first, last int64
}

func newPGSampler(start map[int]procStat, self int) *pgSampler {
	return &pgSampler{self: self, procs: map[int]*pgChild{}, start: start}
}

// sample notes the CPU of every postmaster's child in procs, a new one's
// kind from its title (readTitle of its pid).
func (g *pgSampler) sample(procs map[int]procStat, readTitle func(pid int) string) {
	for pid, s := range procs {
		pm, ok := procs[s.ppid]
		if !ok || pm.ppid != g.self || pm.comm != "postgres" {
			continue
		}
		c := g.procs[pid]
		if c == nil {
			c = &pgChild{kind: pgKind(readTitle(pid))}
			if was, ok := g.start[pid]; ok && was.ppid == s.ppid {
				c.first = was.utime + was.stime
			}
			g.procs[pid] = c
		}
		c.last = s.utime + s.stime
	}
}

// byKind is the sampled CPU of the postmasters' children by kind.
func (g *pgSampler) byKind() map[string]time.Duration {
	out := map[string]time.Duration{}
	for _, c := range g.procs {
		if d := c.last - c.first; d > 0 {
			out[c.kind] += time.Duration(d) * time.Second / userHZ
		}
	}
	return out
}

// readTitle is a process's title: its command line, arguments joined by
// spaces (PostgreSQL rewrites its children's to "postgres: <what>").
func readTitle(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// pgKind is the kind of a PostgreSQL child from its title: an auxiliary
// process by its name ("autovacuum worker", "checkpointer", ...), else a
// client backend ("postgres: user database host(port) activity").
func pgKind(title string) string {
	rest, ok := strings.CutPrefix(title, "postgres: ")
	if !ok {
		return "unknown processes"
	}
	for _, aux := range []string{"autovacuum worker", "autovacuum launcher", "checkpointer", "background writer", "walwriter",
		"walsender", "walreceiver", "wal summarizer", "archiver", "startup", "logical replication launcher",
		"logical replication worker", "logical replication apply worker", "parallel worker", "io worker", "walsummarizer",
		"stats collector", "logger", "slotsync worker"} {
		if strings.HasPrefix(rest, aux) {
			if aux == "autovacuum worker" || aux == "parallel worker" || aux == "io worker" {
				return aux + "s"
			}
			return aux
		}
	}
	return "client backends (the functions' connections)"
}
