package metering

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// memStore keeps what is written; fail makes the next writes fail.
type memStore struct {
	mu     sync.Mutex
	writes int
	fail   bool
	usage  map[string]usage.Usage // by retailer
}

func (s *memStore) AddUsage(ctx context.Context, records []usage.DayUsage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return errors.New("database down")
	}
	s.writes++
	if s.usage == nil {
		s.usage = map[string]usage.Usage{}
	}
	for _, r := range records {
		u := s.usage[r.RetailerID]
		u.Add(r.Usage)
		s.usage[r.RetailerID] = u
	}
	return nil
}

func (s *memStore) get(id string) usage.Usage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.usage[id]
}

// clock is a fake clock that handlers advance.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newMeter(function string, every time.Duration) (*Meter, *memStore, *clock) {
	st, c := &memStore{}, &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	return New(st, Options{Function: function, MemoryMB: 1024, FlushEvery: every, RetentionDays: 7, Now: c.Now}), st, c
}

func TestSplitAddsUpToTheWhole(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		n := rng.Int64N(1_000_000)
		w := make([]int64, 1+rng.IntN(6))
		var total int64
		for i := range w {
			w[i] = rng.Int64N(10)
			total += w[i]
		}
		parts := splitInt(n, w)
		var sum int64
		for i, p := range parts {
			sum += p
			if total > 0 {
				exact := float64(n) * float64(w[i]) / float64(total)
				if float64(p) < exact-1 || float64(p) > exact+1 {
					t.Fatalf("split %d by %v: part %d = %d, exact %v", n, w, i, p, exact)
				}
			}
		}
		if sum != n {
			t.Fatalf("split %d by %v = %v adds up to %d", n, w, parts, sum)
		}
	}
}

// A batch of three messages for two retailers: the invocation's billed
// time, its S3 requests and the messages' SQS requests are split 2:1, the
// invocation goes to the retailer with more messages.
func TestLambdaSplitsAnInvocationAmongItsRetailers(t *testing.T) {
	t.Parallel()
	m, st, c := newMeter("apply-small", 0)
	h := Lambda(m, func(ctx context.Context, ev lambdaevents.SQSEvent) (string, error) {
		for _, r := range ev.Records {
			For(ctx, r.Body)
			S3Request(ctx, false)
		}
		Stored(ctx, 3000)
		c.Advance(29*time.Millisecond + 100*time.Microsecond) // billed as 30 ms
		return "ok", nil
	})
	ev := lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{
		{Body: "a", EventSourceARN: "arn:aws:sqs:us-east-1:1:apply-small.fifo"},
		{Body: "b", EventSourceARN: "arn:aws:sqs:us-east-1:1:apply-small.fifo"},
		{Body: "a", EventSourceARN: "arn:aws:sqs:us-east-1:1:apply-small.fifo"}}}
	if r, err := h(context.Background(), ev); r != "ok" || err != nil {
		t.Fatalf("handler result %q, %v", r, err)
	}
	a, b := st.get("a"), st.get("b")
	if a.Functions["apply-small"].MBms != 20*1024 || b.Functions["apply-small"].MBms != 10*1024 {
		t.Errorf("MB-ms %v and %v, want 30 ms x 1024 MB split 2:1", a.Functions, b.Functions)
	}
	if a.Functions["apply-small"].Invocations != 1 || b.Functions["apply-small"].Invocations != 0 {
		t.Errorf("invocations %v and %v, want the one invocation on a", a.Functions, b.Functions)
	}
	if a.SQSFIFO != 4 || b.SQSFIFO != 2 || a.S3ClassB != 2 || b.S3ClassB != 1 {
		t.Errorf("a %+v, b %+v: want 2 FIFO requests and 1 GET a message", a, b)
	}
	if a.S3ByteDays+b.S3ByteDays != 3000*7 {
		t.Errorf("byte-days %d + %d, want 3000 bytes x 7 days", a.S3ByteDays, b.S3ByteDays)
	}
}

func TestHTTPCountsReadsAndRequests(t *testing.T) {
	t.Parallel()
	for _, fn := range []string{"read", "upload"} {
		m, st, c := newMeter(fn, 0)
		h := HTTP(m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if id := r.URL.Query().Get("r"); id != "" {
				For(r.Context(), id)
			}
			c.Advance(2 * time.Millisecond)
			io.WriteString(w, "0123456789")
		}))
		for _, target := range []string{"/?r=x", "/?r=x", "/healthz"} {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
		}
		x := st.get("x")
		want := usage.Usage{Reads: 2, ReadBytes: 20}
		if fn == "upload" {
			want = usage.Usage{APIRequests: 2}
		}
		want.AddFunction(fn, usage.FunctionUsage{Invocations: 2, MBms: 2 * 2 * 1024})
		if x.Reads != want.Reads || x.ReadBytes != want.ReadBytes || x.APIRequests != want.APIRequests || x.Functions[fn] != want.Functions[fn] {
			t.Errorf("%s: metered %+v, want %+v", fn, x, want)
		}
		if len(st.usage) != 1 {
			t.Errorf("%s: usage of %d retailers; the unattributed /healthz must not be metered", fn, len(st.usage))
		}
	}
}

// With FlushEvery, counts wait in memory until the first invocation that
// ends at least that long after the last write; a failed write keeps them.
func TestFlushBound(t *testing.T) {
	t.Parallel()
	m, st, c := newMeter("read", 5*time.Second)
	h := HTTP(m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		For(r.Context(), "r1")
		c.Advance(time.Second)
	}))
	serve := func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) }
	for range 4 {
		serve()
	}
	if st.writes != 0 || st.get("r1").Reads != 0 {
		t.Fatalf("written after 4 s: %d writes", st.writes)
	}
	serve() // 5 s since the last write
	if st.writes != 1 || st.get("r1").Reads != 5 {
		t.Fatalf("after 5 s: %d writes, %d reads", st.writes, st.get("r1").Reads)
	}
	st.fail = true
	for range 6 {
		serve()
	}
	st.fail = false
	for range 5 {
		serve()
	}
	// Writes at 10 s (failed: kept) and 15 s; the 16th read waits.
	if got := st.get("r1").Reads; got != 15 {
		t.Errorf("%d reads written, want 15: a failed write must keep its counts", got)
	}
	if err := m.Flush(context.Background()); err != nil || st.get("r1").Reads != 16 {
		t.Errorf("after a flush: %d reads, %v", st.get("r1").Reads, err)
	}
	if m.ReadsBound() == "" {
		t.Error("no bound stated")
	}
}

func TestRunWritesUntilCancelledAndOnceMore(t *testing.T) {
	t.Parallel()
	st := &memStore{}
	m := New(st, Options{Function: "read", FlushEvery: time.Hour})
	m.Add("r1", usage.Usage{Reads: 3})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	cancel()
	<-done
	if st.get("r1").Reads != 3 {
		t.Errorf("reads written at shutdown: %d, want 3", st.get("r1").Reads)
	}
}

func TestNilMeterAndNoInvocation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	For(ctx, "x") // outside an invocation: nothing, no panic
	Count(ctx, usage.Usage{S3ClassA: 1})
	var m *Meter
	m.Add("x", usage.Usage{Reads: 1})
	if err := m.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	h := Lambda(m, func(ctx context.Context, s string) (string, error) { return s, nil })
	if r, _ := h(ctx, "y"); r != "y" {
		t.Error("a nil meter must pass calls through")
	}
}

// A storefront request that says it served n reads (a batch-get of n ids)
// is metered as n reads, one invocation; the others as one read each.
func TestHTTPCountsTheReadsARequestServed(t *testing.T) {
	t.Parallel()
	m, st, _ := newMeter("read", 0)
	h := HTTP(m, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		For(r.Context(), "x")
		if r.URL.Path == "/batch" {
			Reads(r.Context(), 20)
		}
	}))
	for _, target := range []string{"/batch", "/one"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", target, nil))
	}
	if x := st.get("x"); x.Reads != 21 || x.Functions["read"].Invocations != 2 {
		t.Errorf("metered %d reads in %d invocations, want 21 in 2", x.Reads, x.Functions["read"].Invocations)
	}
}
