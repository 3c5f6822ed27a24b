// Package metering records what every function uses, per retailer per UTC
// day, for the cost report (DESIGN 10).
//
// Two kinds of counters:
//
//   - Counted with the work, in the transaction that does it: uploads, bytes
//     and rows received, rows changed by kind (the diff's state change),
//     chunks and database rows written (each chunk's apply transaction, so a
//     duplicate delivery counts nothing). pgstore's shard methods do that;
//     no function code is involved.
//   - Counted in memory by a Meter and added to the control database in
//     batches: Lambda invocations and GB-seconds (the handler's measured
//     duration, rounded up to the millisecond, times the function's memory,
//     as Lambda bills), storefront reads and their bytes, other API
//     requests, S3, SQS and SNS requests.
//
// Metering a function is one line at its entry point and one in its
// handler:
//
//	lambda.Start(metering.Lambda(meter, handler.HandleSQS)) // or metering.HTTP(meter, h)
//	metering.For(ctx, retailerID)                           // where the handler knows its retailer
//
// with meter built once from the configuration (config.Meter). Adapters
// count their requests with Count (s3blob, sqsqueue). An invocation's usage
// goes to the retailers it named with For, split by how often each was
// named; an invocation that names none (health checks, admin routes) is not
// metered.
//
// How exact: a Meter with FlushEvery 0 writes at the end of every
// invocation; with FlushEvery d it writes at the end of the first invocation
// at least d after its last write (and every d, and on Close, in a
// long-running process). An execution environment that AWS stops therefore
// loses at most what it counted since its last write: at most d of
// invocations (ReadsBound says so in the report). A failed write keeps the
// counts for the next one.
package metering

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// StorefrontFlushEvery is how long the storefront's functions keep counts
// in memory; the other functions write at the end of every invocation.
const StorefrontFlushEvery = 5 * time.Second

// ReadsNote says how exact the storefront's counts are, for the report.
func ReadsNote() string {
	return fmt.Sprintf("Storefront reads are counted in memory by each execution environment of the read function and written at least every %s of use, at the end of a request: an environment that AWS stops loses at most its last %s of reads (the local stack also writes them every %s and at shutdown). The other counters are written in the transaction of their work (uploads, rows, chunks) or at the end of each invocation.",
		StorefrontFlushEvery, StorefrontFlushEvery, StorefrontFlushEvery)
}

// Store keeps usage. pgstore.Stores (the control database) implements it.
type Store interface {
	// AddUsage adds each record's counters to its retailer-day.
	AddUsage(ctx context.Context, records []usage.DayUsage) error
}

// Options configure a Meter.
type Options struct {
	// Function names the function ("read", "upload", "diff",
	// "apply-small", ...); usage.StorefrontFunctions says which are the
	// storefront's.
	Function string
	// MemoryMB is the function's configured memory
	// (AWS_LAMBDA_FUNCTION_MEMORY_SIZE on Lambda).
	MemoryMB int
	// FlushEvery bounds how long counts stay in memory; 0 writes at the end
	// of every invocation.
	FlushEvery time.Duration
	// RetentionDays is how long the objects the function writes to S3 are
	// kept (chunk objects, indexes), for S3 storage: bytes x days.
	RetentionDays int
	Log           *slog.Logger
	// Now is the clock [time.Now].
	Now func() time.Time
}

// Meter counts one function's usage in memory and writes it to a Store.
type Meter struct {
	o     Options
	store Store

	mu        sync.Mutex
	pending   map[key]*usage.Usage
	lastFlush time.Time
	flushMu   sync.Mutex // one write at a time
}

type key struct{ day, retailer string }

// New builds a meter. A nil store makes a meter that counts nothing.
func New(store Store, o Options) *Meter {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.MemoryMB <= 0 {
		o.MemoryMB = 128
	}
	return &Meter{o: o, store: store, pending: map[key]*usage.Usage{}, lastFlush: o.Now()}
}

// Function is the function the meter counts for.
func (m *Meter) Function() string { return m.o.Function }

// ReadsBound says how exact the meter's counts are, for the report.
func (m *Meter) ReadsBound() string {
	if m.o.FlushEvery <= 0 {
		return fmt.Sprintf("%s: written at the end of every invocation", m.o.Function)
	}
	return fmt.Sprintf("%s: counted in memory per execution environment and written at least every %s of use; an environment that stops loses at most its last %s of counts",
		m.o.Function, m.o.FlushEvery, m.o.FlushEvery)
}

// Add counts u for retailerID on today's UTC day (in memory until the next
// write).
func (m *Meter) Add(retailerID string, u usage.Usage) {
	if m == nil || m.store == nil || retailerID == "" {
		return
	}
	k := key{m.o.Now().UTC().Format(usage.DateLayout), retailerID}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.pending[k]
	if cur == nil {
		cur = &usage.Usage{}
		m.pending[k] = cur
	}
	cur.Add(u)
}

// Flush writes what is pending. On failure the counts stay pending.
func (m *Meter) Flush(ctx context.Context) error {
	if m == nil || m.store == nil {
		return nil
	}
	m.flushMu.Lock()
	defer m.flushMu.Unlock()
	m.mu.Lock()
	batch := m.pending
	m.pending = map[key]*usage.Usage{}
	m.lastFlush = m.o.Now()
	m.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	records := make([]usage.DayUsage, 0, len(batch))
	for k, u := range batch {
		records = append(records, usage.DayUsage{Date: k.day, RetailerID: k.retailer, Usage: *u})
	}
	sort.Slice(records, func(i, j int) bool {
		if records[i].Date != records[j].Date {
			return records[i].Date < records[j].Date
		}
		return records[i].RetailerID < records[j].RetailerID
	})
	if err := m.store.AddUsage(ctx, records); err != nil {
		m.mu.Lock()
		for k, u := range batch {
			if cur := m.pending[k]; cur != nil {
				cur.Add(*u)
			} else {
				m.pending[k] = u
			}
		}
		m.mu.Unlock()
		return fmt.Errorf("metering %s: %w", m.o.Function, err)
	}
	return nil
}

// flushIfDue writes at the end of an invocation when FlushEvery has passed.
func (m *Meter) flushIfDue(ctx context.Context) {
	m.mu.Lock()
	due := len(m.pending) > 0 && m.o.Now().Sub(m.lastFlush) >= m.o.FlushEvery
	m.mu.Unlock()
	if !due {
		return
	}
	// The caller's context may be ending with its invocation: the write
	// gets a few seconds of its own.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := m.Flush(fctx); err != nil {
		m.o.Log.WarnContext(ctx, "usage not written yet; kept for the next write", "err", err)
	}
}

// Run writes every FlushEvery (every second when it is 0) until ctx ends,
// then once more: for long-running processes (the local stack).
func (m *Meter) Run(ctx context.Context) {
	if m == nil || m.store == nil {
		return
	}
	every := m.o.FlushEvery
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := m.Flush(fctx); err != nil {
				m.o.Log.Error("usage lost at shutdown", "err", err)
			}
			cancel()
			return
		case <-t.C:
			if err := m.Flush(ctx); err != nil && ctx.Err() == nil {
				m.o.Log.Warn("usage not written yet; kept for the next write", "err", err)
			}
		}
	}
}

// invocation is what one invocation counts until it ends.
type invocation struct {
	mu      sync.Mutex
	weights map[string]int
	order   []string
	usage   usage.Usage
	stored  int64 // bytes written to S3
	reads   int64 // storefront reads the request served (0: one)
}

type ctxKey struct{}

func invocationOf(ctx context.Context) *invocation {
	inv, _ := ctx.Value(ctxKey{}).(*invocation)
	return inv
}

// For names the retailer the running invocation works for; an invocation
// serving several (a batch) calls it once per item. Outside a metered
// invocation it does nothing.
func For(ctx context.Context, retailerID string) {
	inv := invocationOf(ctx)
	if inv == nil || retailerID == "" {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.weights[retailerID] == 0 {
		inv.order = append(inv.order, retailerID)
	}
	inv.weights[retailerID]++
}

// Reads says how many storefront reads the running request served: a
// batch-get is one read per product id it answered (DESIGN 5); a request
// that does not call it is one read. Outside a metered invocation it does
// nothing.
func Reads(ctx context.Context, n int) {
	inv := invocationOf(ctx)
	if inv == nil || n < 0 {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.reads = int64(n)
}

// Count adds usage to the running invocation (S3, SQS, SNS requests), to be
// split among its retailers. Outside a metered invocation it does nothing.
func Count(ctx context.Context, u usage.Usage) {
	inv := invocationOf(ctx)
	if inv == nil {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.usage.Add(u)
}

// Stored counts bytes the running invocation wrote to S3; the meter turns
// them into byte-days with its RetentionDays.
func Stored(ctx context.Context, bytes int64) {
	inv := invocationOf(ctx)
	if inv == nil {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.stored += bytes
}

// S3Request counts one S3 request: class A (PUT, COPY, POST, LIST) or B
// (GET, HEAD and the rest).
func S3Request(ctx context.Context, classA bool) {
	if classA {
		Count(ctx, usage.Usage{S3ClassA: 1})
	} else {
		Count(ctx, usage.Usage{S3ClassB: 1})
	}
}

// SQSRequest counts one SQS request on the queue at url (or ARN): FIFO when
// its name ends in .fifo.
func SQSRequest(ctx context.Context, queue string) {
	if strings.HasSuffix(queue, ".fifo") {
		Count(ctx, usage.Usage{SQSFIFO: 1})
	} else {
		Count(ctx, usage.Usage{SQSStandard: 1})
	}
}

// begin starts an invocation.
func (m *Meter) begin(ctx context.Context) (context.Context, *invocation) {
	inv := &invocation{weights: map[string]int{}}
	return context.WithValue(ctx, ctxKey{}, inv), inv
}

// end attributes a finished invocation of duration d, plus extra, to the
// retailers it named, and writes when due.
func (m *Meter) end(ctx context.Context, inv *invocation, d time.Duration, extra usage.Usage) {
	inv.mu.Lock()
	order, weights := inv.order, inv.weights
	u := inv.usage
	stored := inv.stored
	inv.mu.Unlock()
	if len(order) > 0 {
		u.Add(extra)
		u.S3ByteDays += stored * int64(m.o.RetentionDays)
		mbms := usage.BilledMBms(d, m.o.MemoryMB)
		w := make([]int64, len(order))
		heaviest := 0
		for i, id := range order {
			w[i] = int64(weights[id])
			if w[i] > w[heaviest] {
				heaviest = i
			}
		}
		mbmsParts := splitInt(mbms, w)
		for i, share := range Split(u, w) {
			share.AddFunction(m.o.Function, usage.FunctionUsage{MBms: mbmsParts[i], Invocations: btoi(i == heaviest)})
			m.Add(order[i], share)
		}
	}
	m.flushIfDue(ctx)
}

func btoi(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// Split divides every counter of u among weights, each in proportion, the
// parts adding up to the whole (largest remainders).
func Split(u usage.Usage, weights []int64) []usage.Usage {
	if len(weights) == 1 {
		// One part (every storefront request names one retailer) is the
		// whole, without a division a counter.
		whole := u
		whole.Functions = nil
		return []usage.Usage{whole}
	}
	out := make([]usage.Usage, len(weights))
	for _, f := range usage.Counters {
		parts := splitInt(*f(&u), weights)
		for i := range out {
			*f(&out[i]) = parts[i]
		}
	}
	return out
}

// splitInt divides n in proportion to weights, the parts adding up to n:
// each part rounded down, the rest one by one to the largest remainders.
func splitInt(n int64, weights []int64) []int64 {
	out := make([]int64, len(weights))
	var total int64
	for _, w := range weights {
		total += w
	}
	if total <= 0 || n == 0 || len(weights) == 1 {
		if len(out) > 0 {
			out[0] = n
		}
		return out
	}
	type rem struct {
		i int
		r float64
	}
	var given int64
	rems := make([]rem, len(weights))
	for i, w := range weights {
		exact := float64(n) * float64(w) / float64(total)
		out[i] = int64(math.Floor(exact))
		given += out[i]
		rems[i] = rem{i, exact - float64(out[i])}
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < n; k = (k + 1) % len(rems) {
		out[rems[k].i]++
		given++
	}
	return out
}

// Lambda wraps an event handler (SQS-triggered functions): each call is one
// invocation. SQS events also count their messages' receive and delete
// requests (two a message).
func Lambda[E, R any](m *Meter, h func(context.Context, E) (R, error)) func(context.Context, E) (R, error) {
	return func(ctx context.Context, ev E) (R, error) {
		if m == nil || m.store == nil {
			return h(ctx, ev)
		}
		ctx, inv := m.begin(ctx)
		start := m.o.Now()
		r, err := h(ctx, ev)
		var extra usage.Usage
		if sqsEv, ok := any(ev).(lambdaevents.SQSEvent); ok {
			for _, rec := range sqsEv.Records {
				if strings.HasSuffix(rec.EventSourceARN, ".fifo") {
					extra.SQSFIFO += 2
				} else {
					extra.SQSStandard += 2
				}
			}
		}
		m.end(ctx, inv, m.o.Now().Sub(start), extra)
		return r, err
	}
}

// Scheduled wraps a scheduled handler (the relay's sweeper): each call is
// one invocation.
func Scheduled(m *Meter, h func(context.Context) error) func(context.Context) error {
	wrapped := Lambda(m, func(ctx context.Context, _ struct{}) (struct{}, error) { return struct{}{}, h(ctx) })
	return func(ctx context.Context) error {
		_, err := wrapped(ctx, struct{}{})
		return err
	}
}

// HTTP wraps an API function's handler: each request is one invocation,
// one API Gateway request: a storefront read (with the bytes of its
// answer) for the storefront's functions, an API request for the others.
func HTTP(m *Meter, h http.Handler) http.Handler {
	if m == nil || m.store == nil {
		return h
	}
	storefront := usage.StorefrontFunctions[m.o.Function]
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, inv := m.begin(r.Context())
		start := m.o.Now()
		cw := &countingWriter{ResponseWriter: w}
		h.ServeHTTP(cw, r.WithContext(ctx))
		extra := usage.Usage{APIRequests: 1}
		if storefront {
			inv.mu.Lock()
			reads := inv.reads
			inv.mu.Unlock()
			extra = usage.Usage{Reads: max(reads, 1), ReadBytes: cw.n}
		}
		m.end(ctx, inv, m.o.Now().Sub(start), extra)
	})
}

// countingWriter counts the bytes of a response body.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
