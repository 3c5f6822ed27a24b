package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// TestParseProcStat reads pid, comm (with spaces and parentheses), ppid
// and the four CPU fields of a /proc/<pid>/stat line.
func TestParseProcStat(t *testing.T) {
	line := "4242 (postgres: a (b) c) S 17 4242 4242 0 -1 4194560 9000 0 0 0 123 45 67 8 20 0 1 0 3456 200000000 5000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0"
	s, err := parseProcStat(line)
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{pid: 4242, ppid: 17, comm: "postgres: a (b) c", utime: 123, stime: 45, cutime: 67, cstime: 8}
	if s != want {
		t.Fatalf("parsed %+v, want %+v", s, want)
	}
	for _, bad := range []string{"", "12 no comm", "12 (x) S 1 2 3"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("%q parsed without an error", bad)
		}
	}
}

// TestTreeTicksAndPhaseDelta: a process tree's CPU is its live members'
// own and reaped children's ticks, so a backend that exits during a phase
// (its CPU moving into the postmaster's cutime) is counted once, a backend
// started during it from zero, another process's tree not at all; and the
// phase's CPU per child of the bench is grouped by kind.
func TestTreeTicksAndPhaseDelta(t *testing.T) {
	const self, pm, node, other = 100, 200, 300, 999
	before := map[int]procStat{
		self:  {pid: self, ppid: 1, comm: "bench", utime: 1000, stime: 100},
		pm:    {pid: pm, ppid: self, comm: "postgres", utime: 10, stime: 5, cutime: 50, cstime: 10},
		201:   {pid: 201, ppid: pm, comm: "postgres", utime: 300, stime: 30}, // exits during the phase
		202:   {pid: 202, ppid: pm, comm: "postgres", utime: 100, stime: 0},
		node:  {pid: node, ppid: self, comm: "node", utime: 40, stime: 4},
		other: {pid: other, ppid: 1, comm: "stranger", utime: 5000},
	}
	if got, want := treeTicks(before, pm), int64(10+5+50+10+300+30+100); got != want {
		t.Fatalf("postmaster's tree before: %d ticks, want %d", got, want)
	}
	if got := treeTicks(before, 12345); got != 0 {
		t.Fatalf("a missing root's tree: %d ticks, want 0", got)
	}
	after := map[int]procStat{
		self: {pid: self, ppid: 1, comm: "bench", utime: 1500, stime: 150},
		// 201 reaped: its final 340+40 ticks are in the postmaster's cutime/cstime.
		pm:    {pid: pm, ppid: self, comm: "postgres", utime: 12, stime: 6, cutime: 50 + 340, cstime: 10 + 40},
		202:   {pid: 202, ppid: pm, comm: "postgres", utime: 150, stime: 10},
		203:   {pid: 203, ppid: pm, comm: "postgres", utime: 20, stime: 2}, // started during the phase
		node:  {pid: node, ppid: self, comm: "node", utime: 90, stime: 14},
		other: {pid: other, ppid: 1, comm: "stranger", utime: 9000},
	}
	children, whole := phaseDelta(before, after, self)
	tick := 10 * time.Millisecond
	// postmaster 3, backend 201 (340+40)-(300+30)=50, 202 60, 203 22.
	if got, want := children[childName("postgres")], (3+50+60+22)*tick; got != want {
		t.Errorf("PostgreSQL: %s, want %s", got, want)
	}
	if got, want := children[childName("node")], 60*tick; got != want {
		t.Errorf("node: %s, want %s", got, want)
	}
	if got, want := whole, (550+135+60)*tick; got != want {
		t.Errorf("the whole tree: %s, want %s", got, want)
	}
	if len(children) != 2 {
		t.Errorf("children %v, want PostgreSQL and node only", children)
	}

	// A child of the bench that ran during the phase and was reaped by it
	// (its CPU in the bench's cutime) counts as an exited child.
	before[400] = procStat{pid: 400, ppid: self, comm: "comm", utime: 7}
	after[self] = procStat{pid: self, ppid: 1, comm: "bench", utime: 1500, stime: 150, cutime: 30}
	children, _ = phaseDelta(before, after, self)
	if got, want := children["exited children"], 23*tick; got != want {
		t.Errorf("exited children: %s, want %s", got, want)
	}
}

// TestMachineBusyTicks sums /proc/stat's cpu line but idle and iowait.
func TestMachineBusyTicks(t *testing.T) {
	got, err := machineBusyTicks("cpu  100 2 30 5000 7 1 4 3 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(100 + 2 + 30 + 1 + 4 + 3); got != want {
		t.Fatalf("busy %d, want %d", got, want)
	}
	if _, err := machineBusyTicks("intr 1 2 3"); err == nil {
		t.Fatal("a stat without a cpu line parsed")
	}
}

// TestCPUByLabel sums a profile's cpu values by the function label, ""
// for unlabelled samples, ignoring the count column.
func TestCPUByLabel(t *testing.T) {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Value: []int64{1, 10e6}, Label: map[string][]string{stack.ProfileLabel: {"diff"}}},
			{Value: []int64{3, 30e6}, Label: map[string][]string{stack.ProfileLabel: {"diff"}, "other": {"x"}}},
			{Value: []int64{2, 20e6}, Label: map[string][]string{stack.ProfileLabel: {"apply"}}},
			{Value: []int64{5, 50e6}},
			{Value: []int64{1, 10e6}, Label: map[string][]string{"other": {"y"}}},
		},
	}
	got, err := cpuByLabel(p, stack.ProfileLabel)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{"diff": 40 * time.Millisecond, "apply": 20 * time.Millisecond, "": 60 * time.Millisecond}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: %s, want %s", k, got[k], v)
		}
	}
	if _, err := cpuByLabel(&profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}}, stack.ProfileLabel); err == nil {
		t.Error("a profile without cpu samples summed")
	}
}

// TestProfilerKeepsLabelledProfile: a measured phase of labelled work
// keeps its profile in the directory, parsed back by label (the samples'
// count is not asserted: it depends on the machine's speed, not on us).
func TestProfilerKeepsLabelledProfile(t *testing.T) {
	dir := t.TempDir()
	p := &stackProfiler{dir: dir}
	if err := p.measure("busy phase", func() error {
		return withBenchLabel(context.Background(), func(ctx context.Context) error {
			end := time.Now().Add(300 * time.Millisecond)
			for x := 0; time.Now().Before(end); x++ {
				_ = x * x
			}
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	ph := p.phases[0]
	if ph.profErr != nil {
		t.Fatal(ph.profErr)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "1-busy-phase.pprof"))
	if err != nil {
		t.Fatal(err)
	}
	prof, err := profile.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	byLabel, err := cpuByLabel(prof, stack.ProfileLabel)
	if err != nil {
		t.Fatal(err)
	}
	for l := range byLabel {
		if l != "" && l != benchClientLabel {
			t.Errorf("label %q in the profile, want only %q or none", l, benchClientLabel)
		}
	}
	var buf bytes.Buffer
	p.print(&buf, nil)
	if !bytes.Contains(buf.Bytes(), []byte("busy phase")) {
		t.Errorf("tables do not name the phase:\n%s", buf.String())
	}
}

// TestPGSampler: the postmaster's children are followed by kind (their
// titles) from their CPU at the phase's start, or from zero when born
// during it, to their last sample; another process's children are not.
func TestPGSampler(t *testing.T) {
	const self, pm = 100, 200
	start := map[int]procStat{
		pm:  {pid: pm, ppid: self, comm: "postgres"},
		201: {pid: 201, ppid: pm, comm: "postgres", utime: 100, stime: 10},
	}
	titles := map[int]string{
		201: "postgres: catalog catalog_shard_0 127.0.0.1(5000) idle",
		202: "postgres: autovacuum worker catalog_shard_1",
		203: "postgres: checkpointer",
	}
	g := newPGSampler(start, self)
	read := func(pid int) string { return titles[pid] }
	g.sample(map[int]procStat{
		pm:  {pid: pm, ppid: self, comm: "postgres"},
		201: {pid: 201, ppid: pm, comm: "postgres", utime: 150, stime: 20},
		202: {pid: 202, ppid: pm, comm: "postgres", utime: 30, stime: 3},
		300: {pid: 300, ppid: self, comm: "node"},
		301: {pid: 301, ppid: 300, comm: "node", utime: 999},
	}, read)
	// 202 exits; its last sample stands.
	g.sample(map[int]procStat{
		pm:  {pid: pm, ppid: self, comm: "postgres"},
		201: {pid: 201, ppid: pm, comm: "postgres", utime: 160, stime: 20},
		203: {pid: 203, ppid: pm, comm: "postgres", utime: 5},
	}, read)
	tick := 10 * time.Millisecond
	want := map[string]time.Duration{
		"client backends (the functions' connections)": 70 * tick,
		"autovacuum workers":                           33 * tick,
		"checkpointer":                                 5 * tick,
	}
	got := g.byKind()
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	if k := pgKind("postgres: parallel worker for PID 77"); k != "parallel workers" {
		t.Errorf("parallel worker's kind %q", k)
	}
	if k := pgKind("/usr/lib/postgresql/17/bin/postgres -D /x"); k != "unknown processes" {
		t.Errorf("the postmaster's own title's kind %q", k)
	}
}
