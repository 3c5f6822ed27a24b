package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func init() { benches["e2e"] = benchE2E }

// benchE2E: on the local stack (PostgreSQL, the SQS emulator, the S3
// stand-in, the event-source pollers, the same handlers as Lambda), the time
// from the end of the PUT to `applied`, for a first 1M-row snapshot and then
// the next day's 4% change, split by stage, against `LC_ALL=C comm -3` of
// the same two files (sorted beforehand, untimed), run between ours; then
// the CPU of each process of the stack and of each function inside ours in
// each phase (PUT to applied, then the tail until the stack is quiet:
// stackprof.go).
func benchE2E(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("e2e", flag.ContinueOnError)
	rows := fs.Int("rows", 1_000_000, "products in the snapshot")
	seed := fs.Uint64("seed", 1, "seed of the generated data")
	runs := fs.Int("comm-runs", 3, "runs of the reference (the median is shown)")
	timeout := fs.Duration("timeout", 30*time.Minute, "bound of the whole run")
	delta := fs.Bool("delta", false, "instead: a full snapshot changing -delta-rows products vs a delta of as many (e2e_delta.go)")
	deltaRows := fs.Int("delta-rows", 1000, "with -delta: the products each one changes")
	profileDir := fs.String("profile-dir", "", "keep each phase's CPU profile of the stack's process here (<n>-<phase>.pprof, labelled by function)")
	tail := fs.Bool("tail", true, "after each upload is applied, wait until the stack is quiet (the consumers' tail), measured as a phase of its own, before going on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	prof := &stackProfiler{dir: *profileDir}
	if *profileDir != "" {
		if err := os.MkdirAll(*profileDir, 0o755); err != nil {
			return err
		}
	}
	if *delta {
		return benchE2EDelta(ctx, prof, *tail, *rows, *deltaRows, *seed)
	}
	work, cleanup, err := workDir("", "catalog-bench-e2e-")
	if err != nil {
		return err
	}
	defer cleanup()
	stages := newStageLog()
	st, err := stack.Start(ctx, stack.Options{NoFullPageWrites: true, DataDir: filepath.Join(work, "stack"), Addr: "127.0.0.1:0", Shards: 2,
		Progress: os.Stderr, Logger: slog.New(stages), HandlerTimeout: 60 * time.Second})
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

	fmt.Fprintf(os.Stderr, "e2e: generating %d-row snapshots\n", *rows)
	p := genPair(*rows, *seed)
	oldCSV, newCSV := snapshotCSV(p.old), snapshotCSV(p.new)

	// The reference: comm -3 of the two files, sorted (untimed) as comm needs.
	oldSorted, newSorted := filepath.Join(work, "old.sorted"), filepath.Join(work, "new.sorted")
	for _, f := range []struct {
		path string
		data []byte
	}{{oldSorted, oldCSV}, {newSorted, newCSV}} {
		cmd := exec.CommandContext(ctx, "sort", "-o", f.path)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		cmd.Stdin = bytes.NewReader(f.data)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("sort: %v: %s", err, out)
		}
	}
	var commM []measured
	runComm := func() error {
		out, err := os.Create(filepath.Join(work, "comm.out"))
		if err != nil {
			return err
		}
		defer out.Close()
		cmd := exec.CommandContext(ctx, "comm", "-3", oldSorted, newSorted)
		cmd.Env = append(os.Environ(), "LC_ALL=C")
		cmd.Stdout = out
		m, err := runMeasured(cmd)
		if err == nil {
			commM = append(commM, m)
		}
		return err
	}

	upload := func(phase string, data []byte) (tl timeline, err error) {
		err = prof.measure(phase, func() error {
			return withBenchLabel(ctx, func(ctx context.Context) error {
				tl, err = timedUpload(ctx, api, r.Token, stages, data, "")
				return err
			})
		})
		if err == nil && *tail {
			err = prof.settle(ctx, "its tail", st.Options.AnalyticsWindow+time.Second, 2*time.Minute)
		}
		return tl, err
	}
	if err := runComm(); err != nil {
		return err
	}
	first, err := upload("first load", oldCSV)
	if err != nil {
		return fmt.Errorf("first snapshot: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: first snapshot applied %s after its PUT (%d chunks)\n", first.total().Round(time.Millisecond), first.status.Chunks.Total)
	for i := 1; i < *runs; i++ {
		if err := runComm(); err != nil {
			return err
		}
	}
	change, err := upload("4% change", newCSV)
	if err != nil {
		return fmt.Errorf("change: %w", err)
	}
	fmt.Fprintf(os.Stderr, "e2e: change applied %s after its PUT (%d chunks)\n", change.total().Round(time.Millisecond), change.status.Chunks.Total)
	comm := median(commM).elapsed
	changes := change.status.Changes.Inserted + change.status.Changes.Updated + change.status.Changes.Deleted

	at := func(tl timeline, t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return fmt.Sprintf("%.2fs", t.Sub(tl.putEnd).Seconds())
	}
	table := [][]string{
		{"PUT of the file (MB/s; not counted below)", fmt.Sprintf("%s (%.0f MB/s)", first.putEnd.Sub(first.putStart).Round(time.Millisecond), rate(float64(len(oldCSV))/1e6, first.putEnd.Sub(first.putStart))),
			fmt.Sprintf("%s (%.0f MB/s)", change.putEnd.Sub(change.putStart).Round(time.Millisecond), rate(float64(len(newCSV))/1e6, change.putEnd.Sub(change.putStart)))},
		{"received (the arrival function), after the PUT", at(first, first.received), at(change, change.received)},
		{"diff planned: pass 1, sort, merge, index, chunk plan", at(first, first.planned), at(change, change.planned)},
		{"first chunk applied", at(first, first.firstApplied), at(change, change.firstApplied)},
		{"last chunk sent: pass 2 (overlaps the apply)", at(first, first.sent), at(change, change.sent)},
		{"last chunk applied", at(first, first.lastApplied), at(change, change.lastApplied)},
		{"applied, seen through the status route", at(first, first.applied), at(change, change.applied)},
		{"PUT to applied", first.total().Round(time.Millisecond).String(), change.total().Round(time.Millisecond).String()},
		{"reference: `comm -3` of the two files", comm.Round(time.Millisecond).String(), comm.Round(time.Millisecond).String()},
		{"ratio to comm -3", ratio(first.total().Seconds(), comm.Seconds()) + "x (target ≤ 20x)",
			ratio(change.total().Seconds(), comm.Seconds()) + "x (target ≤ 5x)"},
	}
	printColumns(os.Stdout, fmt.Sprintf("e2e: the local stack (%d shards, apply concurrency %d per queue, SQS emulator, S3 stand-in); first snapshot %d rows (%d chunks), then a 4%% change (%d rows, %d chunks); stages in seconds after the PUT ended; reference `LC_ALL=C comm -3` on the sorted files (median of %d, run between ours); %s",
		st.Options.Shards, st.Options.ApplyConcurrency, len(p.old), first.status.Chunks.Total, changes, change.status.Chunks.Total, len(commM), machine()),
		[]string{"stage", "first load", "4% change"}, table)
	ref := median(commM)
	prof.print(os.Stdout, &ref)
	return nil
}

// timeline is one upload's way from the PUT to applied.
// timedUpload reserves a slot (mode "" for a full snapshot), PUTs data
// and follows the generation to applied: the status route polled every
// 10 ms, the functions' log lines (stages) for the stages between. Any
// other final state is an error naming its code.
func timedUpload(ctx context.Context, api *apiclient.Client, token string, stages *stageLog, data []byte, mode string) (timeline, error) {
	var tl timeline
	slot, err := api.ReserveMode(ctx, token, benchRetailer.ID, "csv", mode)
	if err != nil {
		return tl, err
	}
	tl.gen = slot.Generation
	tl.putStart = time.Now()
	if err := api.Put(ctx, slot, data); err != nil {
		return tl, err
	}
	tl.putEnd = time.Now()
	for {
		s, err := api.Status(ctx, token, benchRetailer.ID, slot.Generation)
		if err != nil {
			return tl, err
		}
		if s.ReceivedAt != nil {
			tl.received = *s.ReceivedAt
		}
		if apiclient.Settled(s.State) {
			if s.State != "applied" {
				why := ""
				if s.Error != nil {
					why = ": " + s.Error.Code + ": " + s.Error.Message
				}
				return tl, fmt.Errorf("generation %d ended %s%s", slot.Generation, s.State, why)
			}
			tl.applied, tl.status = time.Now(), s
			tl.planned, tl.sent, tl.firstApplied, tl.lastApplied = stages.times(slot.Generation)
			return tl, nil
		}
		select {
		case <-ctx.Done():
			return tl, fmt.Errorf("generation %d still %s: %w", slot.Generation, s.State, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type timeline struct {
	gen                                      int64
	putStart, putEnd, received               time.Time
	planned, sent, firstApplied, lastApplied time.Time
	applied                                  time.Time
	status                                   apiclient.Status
}

func (tl timeline) total() time.Duration { return tl.applied.Sub(tl.putEnd) }

// stageLog is the stack's logger during the bench: it formats nothing and
// notes when the diff planned and finished sending each generation, and
// when its first and last chunks were applied.
type stageLog struct {
	echo  slog.Handler // BENCH_LOG set: every line to stderr too (with attrs)
	mu    *sync.Mutex
	at    map[stageKey][2]time.Time // first and last time of a message
	attrs []slog.Attr
}

type stageKey struct {
	msg string
	gen int64
}

func newStageLog() *stageLog {
	h := &stageLog{mu: &sync.Mutex{}, at: map[stageKey][2]time.Time{}}
	if os.Getenv("BENCH_LOG") != "" {
		h.echo = slog.NewJSONHandler(os.Stderr, nil)
	}
	return h
}

func (h *stageLog) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }

func (h *stageLog) Handle(ctx context.Context, r slog.Record) error {
	if h.echo != nil {
		h.echo.Handle(ctx, r)
	}
	switch r.Message {
	case "diff planned", "diff done", "chunk applied":
	default:
		return nil
	}
	now := time.Now()
	var gen int64
	find := func(a slog.Attr) bool {
		if a.Key == "generation" {
			gen = a.Value.Int64()
			return false
		}
		return true
	}
	for _, a := range h.attrs {
		find(a)
	}
	r.Attrs(find)
	h.mu.Lock()
	defer h.mu.Unlock()
	k := stageKey{r.Message, gen}
	t := h.at[k]
	if t[0].IsZero() {
		t[0] = now
	}
	t[1] = now
	h.at[k] = t
	return nil
}

func (h *stageLog) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), attrs...)
	if h.echo != nil {
		c.echo = h.echo.WithAttrs(attrs)
	}
	return &c
}

func (h *stageLog) WithGroup(string) slog.Handler { return h }

// times returns when gen's diff planned its chunks and sent the last one,
// and when its first and last chunks were applied.
func (h *stageLog) times(gen int64) (planned, sent, first, last time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	applied := h.at[stageKey{"chunk applied", gen}]
	return h.at[stageKey{"diff planned", gen}][0], h.at[stageKey{"diff done", gen}][1], applied[0], applied[1]
}
