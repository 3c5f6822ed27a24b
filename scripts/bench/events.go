package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/publish/relay"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func init() { benches["events"] = benchEvents }

// eventsOptions are the events bench's parameters (flags; the smoke test
// sets small ones).
type eventsOptions struct {
	rows, rounds, chunkRows int
	firstLoads              int // mirrored pairs of first loads
	seed                    uint64
	analyticsWindow         time.Duration
	settle                  time.Duration // the pause before every upload
	timeout                 time.Duration
	// postgresURL, sqsEndpoint, prefix: a running server and emulator to
	// share (tests) instead of the stack's own.
	postgresURL, sqsEndpoint, prefix string
	out                              io.Writer
}

// benchEvents: on the local stack (one shard), two retailers upload the
// same snapshots, turn about: "before" with the relay's fast path off (its
// events wait in the outbox), "after" with it on (published right after
// each chunk commits, to the topic, the analytics and webhooks consumers).
// The first load is measured in pairs of retailers (-first-loads), in
// mirrored order (before, after, after, before, ...), after an unmeasured
// warm-up load: the first load into an empty, just started shard is often
// faster than any later one (a small products index, cold connections and
// caches filling), so a single pair would charge that to whichever goes
// second; and one load of a side slowed by the machine's other work moves
// a ratio of two by more than the 5% measured, hence the medians too,
// and the median of the paired ratios (each "after" upload against the
// "before" upload of the same data next to it in time). The defaults (6
// pairs of first loads, 24 rounds of changes; about 5.5 minutes) are there
// because with fewer, one slow upload on 2 shared cores moved a ratio by
// 10% or more. It reports apply's rows/s before and after (the relay
// may cost at most 5%), the lag from a chunk's commit to the Parquet file holding
// its rows and from a generation's commit to its webhook (p50/p99), and
// the relay's throughput publishing the "before" backlog against bare
// PublishBatch calls of the same messages to the same topic.
func benchEvents(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events", flag.ContinueOnError)
	var o eventsOptions
	fs.IntVar(&o.rows, "rows", 200_000, "products in each snapshot")
	fs.IntVar(&o.rounds, "rounds", 25, "snapshots each retailer uploads (a first load, then changes of ~4%)")
	fs.IntVar(&o.firstLoads, "first-loads", 6, "pairs of first loads (one retailer each side a pair), in mirrored order")
	fs.IntVar(&o.chunkRows, "chunk-rows", 0, "rows per chunk (0: the stack's, catalog.MaxChunkRows; fewer: more events)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the generated data")
	fs.DurationVar(&o.analyticsWindow, "analytics-window", 5*time.Second, "how long the analytics consumer gathers a batch (the local stack's default)")
	fs.DurationVar(&o.settle, "settle", time.Second, "pause before every upload, so that each starts from the same quiet state")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.rows < 10 || o.rounds < 2 || o.chunkRows < 0 || o.firstLoads < 1 {
		return errors.New("events: --rows must be at least 10, --rounds at least 2, --first-loads at least 1, --chunk-rows 0 or more")
	}
	o.out = os.Stdout
	return runEventsBench(ctx, o)
}

// fastPathSwitch is the relay's fast path for the apply or the diff,
// taken only for the retailers that have it on; it adds up the time its
// flushes took (the apply's run in the background of its invocations,
// beside the next chunk's apply).
type fastPathSwitch struct {
	relay *relay.Relay
	on    *sync.Map // retailer id -> true
	spent atomic.Int64
}

func (s *fastPathSwitch) Flush(ctx context.Context, retailerID string) {
	if _, ok := s.on.Load(retailerID); ok {
		start := time.Now()
		s.relay.Flush(ctx, retailerID)
		s.spent.Add(int64(time.Since(start)))
	}
}

// applySpans records, per retailer and generation, when its first apply
// invocation started and its last one ended (the fast path included: the
// invocation waits for it before it returns), and, per invocation, how
// long it ran on after its last chunk's apply ended: its wait for the fast
// path, the part of it on the apply's critical path.
type applySpans struct {
	mu       sync.Mutex
	spans    map[string]*span     // "retailer/generation"
	chunkEnd map[string]time.Time // "retailer/generation/seq" -> when its apply ended
	// per arm (0: fast path off, 1: on): the invocations' time and their
	// time after their last chunk
	invocations, tails [2]time.Duration
	arm                func(retailer string) int
}

// observe is the apply's Observe hook: it notes when each chunk's apply ends.
func (a *applySpans) observe(m message.ChunkMessage, start bool) {
	if start {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.chunkEnd[fmt.Sprintf("%s/%d/%d", m.RetailerID, m.Generation, m.Seq)] = time.Now()
}

type span struct {
	start, end time.Time
	chunks     int // chunk messages whose invocation returned
}

func (a *applySpans) wrap(next eventsource.Handler) eventsource.Handler {
	return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		start := time.Now()
		resp, err := next(ctx, ev)
		end := time.Now()
		a.mu.Lock()
		defer a.mu.Unlock()
		var last time.Time // the end of the invocation's last chunk apply
		arm := -1
		for _, r := range ev.Records {
			var m message.ChunkMessage
			if json.Unmarshal([]byte(r.Body), &m) != nil {
				continue
			}
			arm = a.arm(m.RetailerID) // -1: not measured
			ck := fmt.Sprintf("%s/%d/%d", m.RetailerID, m.Generation, m.Seq)
			if t := a.chunkEnd[ck]; t.After(last) {
				last = t
			}
			delete(a.chunkEnd, ck)
			k := fmt.Sprintf("%s/%d", m.RetailerID, m.Generation)
			s := a.spans[k]
			if s == nil {
				s = &span{start: start, end: end}
				a.spans[k] = s
			}
			if start.Before(s.start) {
				s.start = start
			}
			if end.After(s.end) {
				s.end = end
			}
			s.chunks++
		}
		if arm >= 0 && !last.IsZero() {
			a.invocations[arm] += end.Sub(start)
			a.tails[arm] += end.Sub(last)
		}
		return resp, err
	}
}

// duration is how long a generation's chunks took to apply, once the
// invocations of all of them have returned (the status reads applied at
// the last commit, before its invocation's fast path).
func (a *applySpans) duration(retailer string, gen int64, chunks int) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.spans[fmt.Sprintf("%s/%d", retailer, gen)]; s != nil && s.chunks >= chunks {
		return s.end.Sub(s.start), true
	}
	return 0, false
}

// recordingPublisher notes the time (the commit) of each catalog.changes
// event it publishes, by retailer and generation, and keeps a copy of the
// messages while recording.
type recordingPublisher struct {
	next      topic.Publisher
	recording atomic.Bool
	mu        sync.Mutex
	msgs      []topic.Message
	changes   map[string]map[string]time.Time // "retailer/generation" -> event id -> time
}

func (p *recordingPublisher) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	errs, err := p.next.Publish(ctx, msgs)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recording.Load() {
		p.msgs = append(p.msgs, msgs...)
	}
	for i, m := range msgs {
		var env message.Envelope
		if err != nil || errs[i] != nil || json.Unmarshal([]byte(m.Body), &env) != nil || env.Type != message.TypeChanges {
			continue
		}
		k := fmt.Sprintf("%s/%d", env.RetailerID, env.Generation)
		if p.changes[k] == nil {
			p.changes[k] = map[string]time.Time{}
		}
		p.changes[k][env.ID] = env.Time.UTC()
	}
	return errs, err
}

// changeTimes are the times of the catalog.changes events of a generation
// published so far.
func (p *recordingPublisher) changeTimes(retailer string, gen int64) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ts []time.Time
	for _, t := range p.changes[fmt.Sprintf("%s/%d", retailer, gen)] {
		ts = append(ts, t)
	}
	return ts
}

// hookArrivals is a webhook receiver on 127.0.0.1 that notes when each
// event arrived, against the envelope's time (the commit).
type hookArrivals struct {
	mu   sync.Mutex
	lags map[string]time.Duration // event id -> arrival - event time
}

func (h *hookArrivals) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	var env message.Envelope
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&env); err == nil {
		h.mu.Lock()
		if _, ok := h.lags[env.ID]; !ok {
			h.lags[env.ID] = at.Sub(env.Time)
		}
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookArrivals) lag(id string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.lags[id]
	return d, ok
}

// fileWatch lists the analytics files under a prefix every 50 ms and notes when
// each change event's rows (by their applied_at: the event's time, its
// chunk's commit) first reached a file.
type fileWatch struct {
	mu      sync.Mutex
	err     error
	reached map[time.Time]time.Duration // event time -> first file seen - event time
}

func (f *fileWatch) run(ctx context.Context, st *stack.Stack, prefix string) {
	seen := map[string]bool{}
	poll := func() error {
		keys, err := st.Blobs.List(ctx, prefix)
		if err != nil {
			return err
		}
		now := time.Now()
		for _, k := range keys {
			if seen[k] {
				continue
			}
			seen[k] = true
			body, err := st.Blobs.Get(ctx, k)
			if err != nil {
				return err
			}
			rows, err := analytics.Decode(body)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			f.mu.Lock()
			for _, r := range rows {
				t := r.AppliedAt.UTC()
				if _, ok := f.reached[t]; !ok {
					f.reached[t] = now.Sub(t)
				}
			}
			f.mu.Unlock()
		}
		return nil
	}
	for ctx.Err() == nil {
		if err := poll(); err != nil && ctx.Err() == nil {
			f.mu.Lock()
			f.err = err
			f.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// lags are the lags of the events at times, once every one reached a file.
func (f *fileWatch) lags(times []time.Time) ([]time.Duration, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]time.Duration, 0, len(times))
	for _, t := range times {
		d, ok := f.reached[t]
		if !ok {
			return nil, false, f.err
		}
		out = append(out, d)
	}
	return out, true, f.err
}

func runEventsBench(ctx context.Context, o eventsOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	work, cleanup, err := workDir("", "catalog-bench-events-")
	if err != nil {
		return err
	}
	defer cleanup()
	const before, after = "bench-before", "bench-after" // the first pair, which goes on to the changes
	const warmup = "bench-warmup"                       // a first load before the measured ones, fast path off, not counted
	// The first loads' pairs, mirrored: before, after, after, before, ...
	befores, afters := []string{before}, []string{after}
	firstOrder := []string{warmup, before, after}
	for i := 2; i <= o.firstLoads; i++ {
		b, a := fmt.Sprintf("%s-%d", before, i), fmt.Sprintf("%s-%d", after, i)
		befores, afters = append(befores, b), append(afters, a)
		if i%2 == 0 {
			firstOrder = append(firstOrder, a, b)
		} else {
			firstOrder = append(firstOrder, b, a)
		}
	}
	isAfter := func(r string) bool { return slices.Contains(afters, r) }
	spans := &applySpans{spans: map[string]*span{}, chunkEnd: map[string]time.Time{}, arm: func(r string) int {
		switch {
		case r == warmup:
			return -1
		case isAfter(r):
			return 1
		}
		return 0
	}}
	rec := &recordingPublisher{changes: map[string]map[string]time.Time{}}
	st, err := stack.Start(ctx, stack.Options{NoFullPageWrites: true, DataDir: filepath.Join(work, "stack"), Addr: "127.0.0.1:0", Shards: 1,
		PostgresURL: o.postgresURL, SQSEndpoint: o.sqsEndpoint, Prefix: o.prefix,
		Progress: os.Stderr, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), HandlerTimeout: 60 * time.Second,
		ChunkRows: o.chunkRows, AnalyticsWindow: o.analyticsWindow,
		SweepEvery:   24 * time.Hour, // the "before" backlog waits for the measured relay run
		WrapApply:    spans.wrap,
		ApplyObserve: spans.observe,
		WrapPublisher: func(next topic.Publisher) topic.Publisher {
			rec.next = next
			return rec
		}})
	if err != nil {
		return err
	}
	defer st.Close()
	var fastOn sync.Map
	applyFast, diffFast := &fastPathSwitch{relay: st.Relay, on: &fastOn}, &fastPathSwitch{relay: st.Relay, on: &fastOn}
	st.Apply.Events, st.Diff.Events = applyFast, diffFast // before any upload

	hooks := &hookArrivals{lags: map[string]time.Duration{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hookSrv := &http.Server{Handler: hooks, ReadHeaderTimeout: 5 * time.Second}
	go hookSrv.Serve(ln)
	defer hookSrv.Close()

	api := apiclient.New(st.APIURL)
	api.HTTP.Timeout = 5 * time.Minute
	tokens := map[string]string{}
	for _, r := range firstOrder {
		ret, err := api.CreateRetailer(ctx, st.AdminToken, r)
		if err != nil {
			return err
		}
		tokens[r] = ret.Token
		if err := api.Do(ctx, http.MethodPut, "/v1/retailers/"+r+"/webhook", ret.Token,
			map[string]string{"url": "http://" + ln.Addr().String() + "/hook", "secret": "bench-webhook-secret-0123456789"}, nil); err != nil {
			return fmt.Errorf("webhook of %s: %w", r, err)
		}
	}
	for _, r := range afters {
		fastOn.Store(r, true)
	}

	loadStart := loadAverage()
	fmt.Fprintf(os.Stderr, "events: generating %d-row snapshots\n", o.rows)
	p := genPair(o.rows, o.seed)
	snapshots := [][]byte{snapshotCSV(p.old), snapshotCSV(p.new)}
	watch := &fileWatch{reached: map[time.Time]time.Duration{}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go watch.run(watchCtx, st, analytics.Prefix)
	// [first load, changes][off, on]
	var applyRows [2][2]float64
	var applyTime [2][2]time.Duration
	var loadRates [2][2][]float64  // each upload's rows/s
	rateOf := map[string]float64{} // "retailer/round" -> that upload's rows/s
	var fileLags, hookLags []time.Duration
	for round := range o.rounds {
		data := snapshots[round%2]
		order := []string{before, after}
		switch {
		case round == 0:
			order = firstOrder // each side first and last as often
		case round%2 == 1:
			order = []string{after, before} // neither side always goes first
		}
		for _, r := range order {
			i, kind := spans.arm(r), min(round, 1)
			// Every upload starts from the same quiet state: the consumers'
			// work on the one before has ended (the analytics consumer
			// commits after its file appears) and none follows another back
			// to back. Without it, an "after" upload always followed the
			// wait for its predecessor's files while a "before" one came
			// straight after another apply in half the rounds (those took
			// ~230 ms against ~310 ms in the others, fast path off both).
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(o.settle):
			}
			gen, err := api.Upload(ctx, tokens[r], r, "csv", data)
			if err != nil {
				return fmt.Errorf("%s: %w", r, err)
			}
			s, err := api.WaitApplied(ctx, tokens[r], r, gen, nil)
			if err != nil {
				return fmt.Errorf("%s generation %d: %w", r, gen, err)
			}
			changed := s.Changes.Inserted + s.Changes.Updated + s.Changes.Deleted
			var d time.Duration
			if err := waitFor(ctx, 5*time.Millisecond, func() (bool, error) {
				var ok bool
				d, ok = spans.duration(r, gen, s.Chunks.Total)
				return ok, nil
			}); err != nil {
				return fmt.Errorf("apply invocations of %s generation %d: %w", r, gen, err)
			}
			fmt.Fprintf(os.Stderr, "events: %s generation %d: %d rows applied in %s (%d chunks)\n", r, gen, changed, d.Round(time.Millisecond), s.Chunks.Total)
			if r == warmup {
				continue
			}
			applyRows[kind][i] += float64(changed)
			applyTime[kind][i] += d
			uploadRate := float64(changed) / d.Seconds()
			loadRates[kind][i] = append(loadRates[kind][i], uploadRate)
			rateOf[fmt.Sprintf("%s/%d", r, round)] = uploadRate
			if !isAfter(r) {
				continue
			}
			// An "after" retailer's events reach its webhook and its files
			// before the next upload starts.
			ids := []string{message.EventID(message.TypeSnapshotApplied, r, gen, 0)}
			if err := waitFor(ctx, 10*time.Millisecond, func() (bool, error) {
				_, ok := hooks.lag(ids[0])
				return ok, nil
			}); err != nil {
				return fmt.Errorf("webhook of %s generation %d: %w", r, gen, err)
			}
			lag, _ := hooks.lag(ids[0])
			hookLags = append(hookLags, lag)
			// Every chunk changed something: one catalog.changes event each.
			var times []time.Time
			if err := waitFor(ctx, 10*time.Millisecond, func() (bool, error) {
				times = rec.changeTimes(r, gen)
				return len(times) >= s.Chunks.Total, nil
			}); err != nil {
				return fmt.Errorf("change events of %s generation %d (%d of %d): %w", r, gen, len(times), s.Chunks.Total, err)
			}
			if err := waitFor(ctx, 10*time.Millisecond, func() (bool, error) {
				lags, ok, err := watch.lags(times)
				if ok {
					fileLags = append(fileLags, lags...)
				}
				return ok, err
			}); err != nil {
				return fmt.Errorf("analytics files of %s generation %d: %w", r, gen, err)
			}
		}
	}
	stopWatch()

	// The relay: the "before" retailers' backlog, published as the sweeper
	// would, against bare PublishBatch calls of the same messages.
	pending, _, err := st.Stores.OutboxStats(ctx, 0)
	if err != nil {
		return err
	}
	rec.recording.Store(true)
	start := time.Now()
	var stats relay.Stats
	for _, r := range befores {
		s, err := st.Relay.FlushRetailer(ctx, r)
		if err != nil {
			return fmt.Errorf("relay: %w", err)
		}
		stats.Add(s)
	}
	relayTime := time.Since(start)
	rec.recording.Store(false)
	if stats.Published == 0 || stats.Failed > 0 {
		return fmt.Errorf("relay published %d of %d events (%d failed)", stats.Published, pending, stats.Failed)
	}
	msgs := rec.msgs
	start = time.Now()
	for b := range slices.Chunk(msgs, topic.MaxBatch) {
		errs, err := rec.next.Publish(ctx, b)
		if err == nil {
			err = errors.Join(errs...)
		}
		if err != nil {
			return fmt.Errorf("reference publish: %w", err)
		}
	}
	publishTime := time.Since(start)
	fmt.Fprintf(os.Stderr, "events: relay published %d events in %s; PublishBatch of the same %d messages %s\n",
		stats.Published, relayTime.Round(time.Millisecond), len(msgs), publishTime.Round(time.Millisecond))

	applyRate := func(kind, i int) float64 { return applyRows[kind][i] / applyTime[kind][i].Seconds() }
	// Paired ratios: each "after" upload against the "before" upload of the
	// same data next to it in time (the first loads' i-th pair, each round
	// of changes), so that the machine's drift over the run cancels out.
	var firstPairs, changePairs []float64
	for i := range befores {
		firstPairs = append(firstPairs, rateOf[afters[i]+"/0"]/rateOf[befores[i]+"/0"])
	}
	for round := 1; round < o.rounds; round++ {
		changePairs = append(changePairs, rateOf[fmt.Sprintf("%s/%d", after, round)]/rateOf[fmt.Sprintf("%s/%d", before, round)])
	}
	flushShare := float64(applyFast.spent.Load()) / float64(spans.invocations[1])
	tailShare := func(arm int) float64 { return float64(spans.tails[arm]) / float64(spans.invocations[arm]) }
	relayRate, publishRate := rate(float64(stats.Published), relayTime), rate(float64(len(msgs)), publishTime)
	fp50, fp99 := percentile(fileLags, 50), percentile(fileLags, 99)
	hp50, hp99 := percentile(hookLags, 50), percentile(hookLags, 99)
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	table := []tableRow{
		{"first load: apply rows/s, relay fast path on (ref: off)", fmtRate(applyRate(0, 1), "rows/s"), fmtRate(applyRate(0, 0), "rows/s"),
			ratio(applyRate(0, 1), applyRate(0, 0)) + " (target ≥ 0.95)"},
		{fmt.Sprintf("first load: the median upload's rows/s (%d a side), fast path on (ref: off)", len(loadRates[0][1])),
			fmtRate(medianOf(loadRates[0][1]), "rows/s"), fmtRate(medianOf(loadRates[0][0]), "rows/s"),
			ratio(medianOf(loadRates[0][1]), medianOf(loadRates[0][0])) + " (target ≥ 0.95)"},
		{fmt.Sprintf("first load: the median of the %d pairs' ratios (each pair the same data, one after the other)", len(firstPairs)),
			"-", "-", fmt.Sprintf("%.2f (target ≥ 0.95)", medianOf(firstPairs))},
		{fmt.Sprintf("%d changes: apply rows/s, fast path on (ref: off)", o.rounds-1), fmtRate(applyRate(1, 1), "rows/s"), fmtRate(applyRate(1, 0), "rows/s"),
			ratio(applyRate(1, 1), applyRate(1, 0)) + " (target ≥ 0.95)"},
		{fmt.Sprintf("changes: the median upload's rows/s (%d a side), fast path on (ref: off)", len(loadRates[1][1])),
			fmtRate(medianOf(loadRates[1][1]), "rows/s"), fmtRate(medianOf(loadRates[1][0]), "rows/s"),
			ratio(medianOf(loadRates[1][1]), medianOf(loadRates[1][0])) + " (target ≥ 0.95)"},
		{fmt.Sprintf("changes: the median of the %d rounds' ratios (each round the same data, one after the other)", len(changePairs)),
			"-", "-", fmt.Sprintf("%.2f (target ≥ 0.95)", medianOf(changePairs))},
		{"fast path: its publishing time, in the background of the apply invocations (share of their time)", fmt.Sprintf("%.1f%%", 100*flushShare), "-", "-"},
		{"fast path: the apply invocations' wait after their last chunk (share of their time; ref: fast path off)",
			fmt.Sprintf("%.1f%%", 100*tailShare(1)), fmt.Sprintf("%.1f%%", 100*tailShare(0)), "-"},
		{fmt.Sprintf("relay throughput (%d events of the outbox)", stats.Published), fmtRate(relayRate, "events/s"),
			fmtRate(publishRate, "events/s") + " (PublishBatch alone)", ratio(relayRate, publishRate)},
		{fmt.Sprintf("commit to Parquet file, p50 (%d events)", len(fileLags)), ms(fp50), "30s (DESIGN 8)", ratio(fp50.Seconds(), 30) + " of the bound"},
		{"commit to Parquet file, p99", ms(fp99), "30s (DESIGN 8)", ratio(fp99.Seconds(), 30) + " of the bound"},
		{fmt.Sprintf("commit to webhook, p50 (%d events)", len(hookLags)), ms(hp50), "-", "-"},
		{"commit to webhook, p99", ms(hp99), "-", "-"},
	}
	chunkRows := o.chunkRows
	if chunkRows == 0 {
		chunkRows = catalog.MaxChunkRows
	}
	printTable(o.out, fmt.Sprintf("events: the local stack (1 shard, SNS/SQS emulator, analytics window %s), %d uploads of %d rows each by bench-before (fast path off) and bench-after (on) taking turns (%d-row chunks), %d first loads a side in mirrored order (before, after, after, before, ...) after a warm-up load, %s before every upload; load average at the start %s; %s",
		o.analyticsWindow, o.rounds, o.rows, chunkRows, o.firstLoads, o.settle, loadStart, machine()), table)
	return nil
}

// waitFor polls ok every d until it holds, fails or ctx ends.
func waitFor(ctx context.Context, d time.Duration, ok func() (bool, error)) error {
	for {
		done, err := ok()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

// medianOf is the median of xs (the mean of the middle two when even; 0
// when empty).
func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// percentile is the p-th percentile of ds (nearest rank; 0 when empty).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}
