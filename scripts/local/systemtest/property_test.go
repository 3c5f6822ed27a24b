package systemtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// lockedRand is a rand shared by a schedule and its fault injectors.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) chance(percent int) bool { return l.IntN(100) < percent }

// faults limits injected crashes to two per key (a message or a chunk), so
// that nothing is pushed into a dead-letter queue by the test itself (five
// failed receives would do that, by design).
type faults struct {
	mu    sync.Mutex
	count map[string]int
}

func (f *faults) allow(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count == nil {
		f.count = map[string]int{}
	}
	f.count[key]++
	return f.count[key] <= 2
}

// Property settings: the stack's, so that one schedule costs little.
const (
	propertyReservationsPerHour = 12
	propertyMaxRowBytes         = 4096
)

// schedules maps a retailer id prefix ("s<seed>-") to its schedule, for
// the fault injectors shared by every schedule on the one stack.
type schedules struct{ m sync.Map }

func (s *schedules) of(retailerID string) *schedule {
	prefix, _, ok := strings.Cut(retailerID, "-")
	if !ok {
		return nil
	}
	v, _ := s.m.Load(prefix + "-")
	sc, _ := v.(*schedule)
	return sc
}

// chunkRetailer is the retailer of a chunk message body ("" when not one).
func chunkRetailer(body string) string {
	var m message.ChunkMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return ""
	}
	return m.RetailerID
}

// faultyQueue fails some chunk sends: the diff crashed after writing the
// chunk object.
type faultyQueue struct {
	next queue.Sender
	all  *schedules
}

// ChangeVisibility passes the diff's back-off of a failed job on (to the
// SQS sender), so that a crashed diff is retried after a second.
func (q *faultyQueue) ChangeVisibility(ctx context.Context, queueURL, receiptHandle string, timeout time.Duration) error {
	if b, ok := q.next.(diff.Backoff); ok {
		return b.ChangeVisibility(ctx, queueURL, receiptHandle, timeout)
	}
	return nil
}

func (q *faultyQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	retailerID := chunkRetailer(body)
	sc := q.all.of(retailerID)
	if sc != nil && sc.rng.chance(3) && sc.faults.allow("send "+dedupID[:strings.LastIndex(dedupID, ":")]) {
		return errors.New("injected crash before send")
	}
	err := q.next.Send(ctx, queueURL, body, groupID, dedupID)
	if err == nil && sc != nil && sc.rng.chance(15) {
		sc.keepZombie(retailerID, lambdaevents.SQSMessage{MessageId: "zombie " + dedupID, Body: body})
	}
	return err
}

// keepZombie keeps a copy of a chunk message sent (at most two a
// retailer): a worker that stalled with it, to deliver it again once newer
// generations were applied and collected (zombies).
func (sc *schedule) keepZombie(retailerID string, m lambdaevents.SQSMessage) {
	sc.zombiesMu.Lock()
	defer sc.zombiesMu.Unlock()
	if sc.zombies == nil {
		sc.zombies = map[string][]lambdaevents.SQSMessage{}
	}
	if len(sc.zombies[retailerID]) < 2 {
		sc.zombies[retailerID] = append(sc.zombies[retailerID], m)
	}
}

// wakeZombies delivers the retailer's zombie chunks to the apply function,
// once each, as their stalled workers would: whatever generation they are
// of, they write nothing older over anything newer (I1-I3: after a
// collection, the write floor refuses them).
func (r *retailerRun) wakeZombies(ctx context.Context) {
	sc := r.sc
	sc.zombiesMu.Lock()
	zombies := sc.zombies[r.id]
	delete(sc.zombies, r.id)
	sc.zombiesMu.Unlock()
	for _, z := range zombies {
		// A refusal (the retailer moving) is the message's failure: it is
		// not retried, as a zombie's worker gives up.
		_, _ = sc.e.Stack.Apply.HandleSQS(ctx, lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{z}})
		sc.woken.Add(1)
	}
}

// faultyApply crashes some apply invocations before they run and some
// after they committed, before their messages are deleted. A crashed
// batch comes back after a fifth of a second, not after the visibility
// timeout (as if the next poll came at once): the schedule stays short.
func faultyApply(all *schedules, st func() *stack.Stack) func(eventsource.Handler) eventsource.Handler {
	return func(next eventsource.Handler) eventsource.Handler {
		return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
			var sc *schedule
			if len(ev.Records) > 0 {
				sc = all.of(chunkRetailer(ev.Records[0].Body))
			}
			injected := func(percent int, what string) bool {
				if sc == nil || !sc.rng.chance(percent) || !sc.faults.allow(what+" "+ev.Records[0].MessageId) {
					return false
				}
				comeBackSoon(st(), ev)
				return true
			}
			if injected(5, "before") {
				return lambdaevents.SQSEventResponse{}, errors.New("injected crash before apply")
			}
			resp, err := next(ctx, ev)
			if err == nil && injected(10, "after") {
				return resp, errors.New("injected crash after commit, before delete")
			}
			return resp, err
		}
	}
}

// comeBackSoon makes a batch's messages visible again in 200 ms.
func comeBackSoon(st *stack.Stack, ev lambdaevents.SQSEvent) {
	for _, m := range ev.Records {
		name := m.EventSourceARN[strings.LastIndexByte(m.EventSourceARN, ':')+1:]
		for _, q := range []stack.Queue{st.SmallQueue, st.LargeQueue} {
			if q.Name == name {
				_, _ = st.SQS.ChangeMessageVisibility(context.Background(), &sqs.ChangeMessageVisibilityInput{
					QueueUrl: &q.URL, ReceiptHandle: &m.ReceiptHandle, VisibilityTimeout: 0})
			}
		}
	}
}

// TestPropertyLatestWins runs many random schedules at once on one stack.
// Each onboards its own retailers and, for each, uploads snapshots with
// changes, sometimes malformed (duplicate ids), sometimes with a row over
// the row limit, sometimes PUT a second time to the same URL with other
// content (later or racing the first), sometimes two uploads close
// together, duplicate S3 events, and at the end, sometimes, a flood of
// reservations up to the hourly limit; files the catalog cannot hold (a
// NUL, a number numeric cannot hold, a lone surrogate, a bad attribute
// name: I11) and files with a product the shard refuses on every try (I10);
// meanwhile chunk sends and applies crash on both sides of their commits,
// copies of chunk messages are delivered again late (zombies), collections
// run at random points, a quarter of the schedules move their first
// retailer to the other shard and sometimes back, crashing and failing the
// move's runner, with a reader beside each move (property_move_test.go),
// and a reader samples each retailer's storefront. Once everything
// settles, for every retailer: a second PUT got 412 and changed nothing, a
// flood got 429 at the limit, every generation is in a final state (none
// held) within its bound, every file the system could not accept is
// rejected with its code (or superseded unread, when a newer upload arrived
// before its diff began), a generation the shard refused is rejected
// apply_failed and undone by a rollback to the generation applied before
// it, the newest generation is applied and the catalog equals its content
// (I1: the newest upload, unless an undo superseded its slot), and no
// product the storefront served was ever anything but a value of one of
// the retailer's uploads; each move ended done, or failed with the retailer
// whole on its old shard, the reader beside it never got a 404 for a
// product of every snapshot nor an older generation, and every retailer's
// rows are on exactly the shard the control database names; every change
// event has left the outbox and the analytics files reconstruct every
// catalog.
//
// CATALOG_PROPERTY_SCHEDULES sets how many schedules run (default 100: a
// schedule now mixes deltas, rollbacks and dry runs and takes several
// times as long as when the default was 200; run thousands by hand;
// CATALOG_PROPERTY_SEEDS is read too), CATALOG_PROPERTY_PARALLEL how many
// at once (default 16), CATALOG_PROPERTY_SEED the first seed (a failure
// names the seed to replay alone with CATALOG_PROPERTY_SCHEDULES=1).
func TestPropertyLatestWins(t *testing.T) {
	t.Parallel()
	n := envInt("CATALOG_PROPERTY_SCHEDULES", envInt("CATALOG_PROPERTY_SEEDS", 100))
	parallel := envInt("CATALOG_PROPERTY_PARALLEL", 16)
	base := uint64(time.Now().UnixNano()) % 1e12
	if v := os.Getenv("CATALOG_PROPERTY_SEED"); v != "" {
		var err error
		base, err = strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "CATALOG_PROPERTY_SEED")
	}
	all := &schedules{}
	hooks := &moveHooks{}
	var e *env
	e = newEnv(t, stack.Options{
		ChunkRows: 8, HandlerTimeout: 15 * time.Second, VisibilityTimeout: 15 * time.Second,
		DiffConcurrency: 4, ApplyConcurrency: 4,
		SweepEvery: 500 * time.Millisecond, SweepAge: time.Second,
		// The stuck-generation sweeper on the test's clock (10 min in
		// production): work lost for good (a diff job whose every attempt
		// was cut short on a loaded machine goes to its DLQ with the
		// generation still diffing) is re-driven, then given up, within
		// finalWithin, as I10 says it is in production within its bound.
		StallAfter: 20 * time.Second, StuckSweepEvery: 2 * time.Second,
		ReservationsPerHour: propertyReservationsPerHour, MaxRowBytes: propertyMaxRowBytes,
		// Collection (DESIGN 14) may remove a tombstone as soon as the
		// retailer-level fence is past its generation: zombie chunks and
		// crashed applies meet the fence, not the row's tombstone.
		TombstoneAfter: time.Nanosecond,
		WrapDiffQueue:  func(next queue.Sender) queue.Sender { return &faultyQueue{next: next, all: all} },
		WrapApply:      faultyApply(all, func() *stack.Stack { return e.Stack }),
	})
	// Every shard refuses, for good, a product titled "poison" (as it
	// refuses a value it cannot hold): a chunk carrying one is refused on
	// every try, its generation ends apply_failed and is undone (I10).
	for _, sh := range e.Stack.Stores.Shards {
		_, err := sh.Pool().Exec(context.Background(),
			`ALTER TABLE products ADD CONSTRAINT refuse_poison CHECK (attributes->>'title' IS DISTINCT FROM 'poison') NOT VALID`)
		require.NoError(t, err)
	}
	e.Stack.Stores.Moves = propertyMoves // before any move: the runners read it
	e.Stack.Stores.Moves.Hook = hooks.hook
	start := time.Now()
	var mu sync.Mutex
	finals := map[string]fixtures.Catalog{} // retailer -> its catalog once settled
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	var done atomic.Int64
	for range min(parallel, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				t.Run(fmt.Sprint(seed), func(t *testing.T) {
					sc := &schedule{t: t, e: &env{e.For(t)}, seed: seed, rng: &lockedRand{r: rand.New(rand.NewPCG(seed, 99))}, hooks: hooks}
					all.m.Store(sc.prefix(), sc)
					defer all.m.Delete(sc.prefix())
					for id, c := range sc.run() {
						mu.Lock()
						finals[id] = c
						mu.Unlock()
					}
				})
				done.Add(1)
			}
		}()
	}
	for i := range n {
		seeds <- base + uint64(i)
	}
	close(seeds)
	wg.Wait()
	t.Logf("%d schedules (seeds %d-%d) in %s, %d at once", done.Load(), base, base+uint64(n)-1, time.Since(start).Round(time.Millisecond), parallel)
	if t.Failed() {
		return
	}
	e.WaitOutboxEmpty(3 * time.Minute)
	t.Logf("outboxes empty after %s", time.Since(start).Round(time.Millisecond))
	ids := make(chan string)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range ids {
				t.Run("analytics "+id, func(t *testing.T) { e.For(t).RequireAnalytics(id, finals[id], 3*time.Minute) })
			}
		}()
	}
	for id := range finals {
		ids <- id
	}
	close(ids)
	wg.Wait()
	t.Logf("and their change events out and analyzed in %s", time.Since(start).Round(time.Millisecond))
	// Reconciliation agrees: every catalog equals its newest applied snapshot.
	e.requireNoDivergence(fmt.Sprintf("after %d schedules", done.Load()))
	t.Logf("and every catalog reconciled clean in %s", time.Since(start).Round(time.Millisecond))
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return def
}

// schedule is one random sequence of a few retailers' uploads.
type schedule struct {
	t    *testing.T
	e    *env
	seed uint64
	rng  *lockedRand

	faults faults
	hooks  *moveHooks // the stack's move faults (property_move_test.go)

	zombiesMu sync.Mutex
	zombies   map[string][]lambdaevents.SQSMessage // retailer -> copies of chunk messages sent
	woken     atomic.Int64                         // zombies delivered
}

func (sc *schedule) prefix() string { return fmt.Sprintf("s%d-", sc.seed) }

// upload is what the schedule knows of one generation: its content when the
// system must accept it, or the rejection code it must end with.
type upload struct {
	gen      int64
	want     fixtures.Catalog // nil: must not be applied
	rejected string           // the code a bad file ends rejected with
	// sent is what the file holds when the shard refuses it half way
	// (rejected apply_failed): some of its rows may be served for a while.
	sent fixtures.Catalog
	// delta is a delta upload's rows; rollbackOf a rollback's source
	// (property_delta_test.go).
	delta      []deltaRow
	rollbackOf int64
}

// unstorable are files the catalog cannot hold (I11), each rejected at the
// diff with its code, before any chunk.
var unstorable = []struct {
	file, code string
}{
	{"product_id,title\np1,ok\np2,a\x00b\n", "unsupported_value"},
	{`{"product_id":"p1","t":"ok"}` + "\n" + `{"product_id":"p2","t":"a\u0000"}` + "\n", "unsupported_value"},
	{`{"product_id":"p1","t\u0000":"ok"}` + "\n", "unsupported_value"},
	{`{"product_id":"p1","w":1e200000}` + "\n", "unsupported_value"},
	{`{"product_id":"p1","t":"\ud800"}` + "\n", "unsupported_value"},
	{"product_id," + strings.Repeat("n", 1025) + "\np1,x\n", "invalid_attribute_name"},
	{"product_id,\"a\tb\"\np1,x\n", "invalid_attribute_name"},
	{"product_id,_delete\np1,true\n", "invalid_attribute_name"},
}

// retailerRun is one retailer's part of a schedule.
type retailerRun struct {
	sc      *schedule
	id      string
	token   string
	current fixtures.Catalog
	uploads []upload
	granted int // reservations made (the hourly limit counts them)
	// previews are the dry runs (DESIGN 13): their files are never
	// registered as known, so the storefront's sampling proves that
	// previews never change anything.
	previews []preview
	// stable are the products no snapshot of a moved retailer deletes
	// (nil for one that does not move): the reader beside its moves reads
	// them (property_move_test.go).
	stable []string

	// known are the values each product had in any file that may be
	// applied, in whole or in part (registered before its PUT): the only
	// values the storefront may ever serve.
	knownMu sync.Mutex
	known   map[string][]map[string]string
}

// preview is a dry run of a schedule: its generation and mode ("": full).
type preview struct {
	gen  int64
	mode string
}

// register records the values of a file that may be applied.
func (r *retailerRun) register(c fixtures.Catalog) {
	r.knownMu.Lock()
	defer r.knownMu.Unlock()
	if r.known == nil {
		r.known = map[string][]map[string]string{}
	}
	for id, attrs := range c {
		r.known[id] = append(r.known[id], attrs)
	}
}

// servable reports whether the storefront may serve attrs for id: the
// values of one of the retailer's files, never a mix of two for one product.
func (r *retailerRun) servable(id string, attrs map[string]string) bool {
	r.knownMu.Lock()
	defer r.knownMu.Unlock()
	for _, k := range r.known[id] {
		if reflect.DeepEqual(k, attrs) {
			return true
		}
	}
	return false
}

// sample reads the retailer's storefront every few hundred milliseconds
// until ctx ends, and reports every product it served that no file of the
// retailer ever held.
func (r *retailerRun) sample(ctx context.Context) []string {
	var bad []string
	for ctx.Err() == nil {
		products, err := r.sc.e.API.Catalog(ctx, r.id)
		if err == nil {
			for _, p := range products {
				var attrs map[string]string
				if json.Unmarshal(p.Attributes, &attrs) != nil || !r.servable(p.ProductID, attrs) {
					bad = append(bad, fmt.Sprintf("%s = %s (generation %d)", p.ProductID, p.Attributes, p.Generation))
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(300+r.sc.rng.IntN(300)) * time.Millisecond):
		}
	}
	return bad
}

// run plays the schedule and checks it; it returns each retailer's final
// catalog (for the analytics check at the end of all schedules).
func (sc *schedule) run() map[string]fixtures.Catalog {
	t := sc.t
	t.Logf("seed %d (replay alone: CATALOG_PROPERTY_SEED=%d CATALOG_PROPERTY_SCHEDULES=1 go run ./scripts/local test -run 'TestPropertyLatestWins' ./scripts/local/systemtest/)", sc.seed, sc.seed)
	ctx := systemtest.Context(t, 4*time.Minute)
	runs := make([]*retailerRun, 2)
	for i := range runs {
		id := sc.prefix() + string(rune('a'+i))
		runs[i] = &retailerRun{sc: sc, id: id, token: sc.e.Onboard(id), current: fixtures.Generate("p", 12+sc.rng.IntN(12))}
	}
	// Sometimes the first retailer moves between the shards while it plays
	// (property_move_test.go): its first snapshot is applied first, so that
	// its stable products are there before the first move.
	var moved *retailerRun
	var moves moveResult
	var moverWG sync.WaitGroup
	if sc.rng.chance(25) {
		moved = runs[0]
		moved.stable = moved.current.IDs()[:stableProducts]
		slot := moved.reserve(ctx)
		moved.register(moved.current)
		moved.put(ctx, slot, moved.encode(moved.current))
		moved.uploads = append(moved.uploads, upload{gen: slot.Generation, want: moved.current})
		s, err := sc.e.API.WaitSettled(ctx, moved.token, moved.id, slot.Generation, nil)
		require.NoError(t, err, "seed %d: first snapshot of %s", sc.seed, moved.id)
		require.Equal(t, "applied", s.State, "seed %d: first snapshot of %s: %+v", sc.seed, moved.id, s.Error)
		moverWG.Add(1)
		go func() {
			defer moverWG.Done()
			moves = moved.mover(ctx, sc.hooks)
		}()
	}
	var wg sync.WaitGroup
	sampling, stopSampling := context.WithCancel(ctx)
	sampled := make([][]string, len(runs))
	var samplers sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.play(ctx)
		}()
		samplers.Add(1)
		go func() {
			defer samplers.Done()
			sampled[i] = r.sample(sampling)
		}()
	}
	wg.Wait()
	moverWG.Wait() // every move ended: done, or failed with the retailer whole on its old shard
	if t.Failed() {
		stopSampling()
		samplers.Wait()
		return nil
	}
	if moved != nil {
		var ended []string
		for _, m := range moves.moves {
			ended = append(ended, fmt.Sprintf("%d->%d %s (%d rows)", m.FromShard, m.ToShard, m.State, m.RowsCopied))
		}
		t.Logf("seed %d: %s's moves beside its uploads: %v; %d storefront reads beside them", sc.seed, moved.id, ended, moves.reads)
		require.Empty(t, moves.bad, "seed %d: beside the moves of %s", sc.seed, moved.id)
	}
	for _, r := range runs { // the last zombies, after a collection sometimes
		if sc.rng.chance(50) {
			r.collect(ctx)
		}
		r.wakeZombies(ctx)
	}
	if n := sc.woken.Load(); n > 0 {
		t.Logf("seed %d: %d zombie chunks delivered", sc.seed, n)
	}
	out := map[string]fixtures.Catalog{}
	for _, r := range runs {
		out[r.id] = r.check(ctx)
		r.requireOnOneShard(ctx)
	}
	if moved != nil {
		t.Logf("seed %d: %s: %d generations arrived while it moved", sc.seed, moved.id, moved.arrivedDuring(ctx, moves.moves))
	}
	stopSampling()
	samplers.Wait()
	for i, r := range runs {
		require.Empty(t, sampled[i], "seed %d: the storefront served values of %s that none of its files held", sc.seed, r.id)
	}
	return out
}

func (r *retailerRun) mutate() fixtures.Catalog {
	rng := r.sc.rng
	n := r.current.Clone()
	ids := n.IDs()
	for k := rng.IntN(6); k > 0; k-- {
		n[ids[rng.IntN(len(ids))]]["price"] = fmt.Sprint(rng.IntN(5))
	}
	for k := rng.IntN(3); k > 0 && len(n) > 8; k-- {
		if id := ids[rng.IntN(len(ids))]; !r.isStable(id) {
			delete(n, id)
		}
	}
	for k := rng.IntN(3); k > 0; k-- {
		n[fmt.Sprintf("x-%d", rng.IntN(100))] = fixtures.Row(fmt.Sprint(rng.IntN(3)))
	}
	return n
}

// encode writes a catalog in a random format: CSV, JSON Lines, gzipped or not.
func (r *retailerRun) encode(c fixtures.Catalog) []byte {
	switch r.sc.rng.IntN(3) {
	case 0:
		return c.CSV(nil)
	case 1:
		return c.JSONL()
	}
	return fixtures.Gzip(c.JSONL())
}

func (r *retailerRun) reserve(ctx context.Context) apiclient.Slot {
	r.sc.t.Helper()
	var slot apiclient.Slot
	err := retryMoving(ctx, func() (err error) {
		slot, err = r.sc.e.API.Reserve(ctx, r.token, r.id, "")
		return err
	})
	require.NoError(r.sc.t, err, "seed %d: reserve for %s", r.sc.seed, r.id)
	r.granted++
	return slot
}

func (r *retailerRun) put(ctx context.Context, slot apiclient.Slot, data []byte) {
	r.sc.t.Helper()
	require.NoError(r.sc.t, r.sc.e.API.Put(ctx, slot, data), "seed %d: PUT generation %d of %s", r.sc.seed, slot.Generation, r.id)
}

// dryRun reserves a dry run and PUTs a changed catalog to it, or (one in
// three) a delta's dry run and a delta (property_delta_test.go), which
// must end previewed and never be applied.
func (r *retailerRun) dryRun(ctx context.Context) {
	r.sc.t.Helper()
	opts, file := apiclient.ReserveOptions{DryRun: true}, []byte(nil)
	if r.sc.rng.chance(33) {
		_, file = r.genDelta()
		opts.Mode = "delta"
	} else {
		file = r.encode(r.mutate())
	}
	var slot apiclient.Slot
	err := retryMoving(ctx, func() (err error) {
		slot, err = r.sc.e.API.ReserveWith(ctx, r.token, r.id, "", opts)
		return err
	})
	require.NoError(r.sc.t, err, "seed %d: reserve a dry run (%+v) for %s", r.sc.seed, opts, r.id)
	r.granted++
	r.put(ctx, slot, file)
	r.previews = append(r.previews, preview{gen: slot.Generation, mode: opts.Mode})
}

func (r *retailerRun) pause() {
	if r.stable != nil { // a moved retailer's uploads spread over its moves' seconds
		time.Sleep(time.Duration(r.sc.rng.IntN(1000)) * time.Millisecond)
		return
	}
	if r.sc.rng.chance(40) {
		time.Sleep(time.Duration(r.sc.rng.IntN(100)) * time.Millisecond)
	}
}

// play makes a few rounds of uploads, then the last one (after a flood of
// reservations, sometimes).
func (r *retailerRun) play(ctx context.Context) {
	t, rng := r.sc.t, r.sc.rng
	for range 1 + rng.IntN(3) {
		if rng.chance(20) { // a collection (DESIGN 14), racing what is in flight
			r.collect(ctx)
		}
		if rng.chance(20) { // stalled workers wake up
			r.wakeZombies(ctx)
		}
		if rng.chance(25) { // a delta, instead of a full snapshot
			r.playDelta(ctx)
			if rng.chance(20) { // a dry run right behind it: neither waits for the other
				r.dryRun(ctx)
			}
			r.pause()
			continue
		}
		if rng.chance(10) {
			r.playRollback(ctx)
		}
		slot := r.reserve(ctx)
		if rng.chance(15) { // a dry run between a slot and its upload: it stops nothing
			r.dryRun(ctx)
		}
		switch roll := rng.IntN(100); {
		case roll < 8: // what the catalog cannot hold
			u := unstorable[rng.IntN(len(unstorable))]
			r.put(ctx, slot, []byte(u.file))
			r.uploads = append(r.uploads, upload{gen: slot.Generation, rejected: u.code})
		case roll < 14: // a product the shard refuses on every try, half way
			bad := r.mutate()
			ids := bad.IDs()
			bad[ids[rng.IntN(len(ids))]]["title"] = "poison"
			r.register(bad) // its other chunks are written until it is undone
			r.put(ctx, slot, r.encode(bad))
			r.uploads = append(r.uploads, upload{gen: slot.Generation, rejected: "apply_failed", sent: bad})
			if rng.chance(60) {
				// Most often nothing newer comes before the shard has refused
				// it: it ends rejected, and its undo runs.
				_, err := r.sc.e.API.WaitSettled(ctx, r.token, r.id, slot.Generation, nil)
				require.NoError(t, err, "seed %d: generation %d of %s", r.sc.seed, slot.Generation, r.id)
			}
		case roll < 20: // malformed: a duplicate id
			r.put(ctx, slot, []byte("product_id,title\nsame,1\nother,2\nsame,3\n"))
			r.uploads = append(r.uploads, upload{gen: slot.Generation, rejected: "duplicate_product_id"})
		case roll < 28: // a row over the row limit
			bad := r.mutate()
			bad["huge"] = fixtures.Row(strings.Repeat("x", propertyMaxRowBytes+100))
			r.put(ctx, slot, bad.CSV(nil))
			r.uploads = append(r.uploads, upload{gen: slot.Generation, rejected: "row_too_large"})
		case roll < 50: // a second PUT of other content to the same URL
			a, b := r.mutate(), r.mutate()
			r.register(a)
			r.register(b)
			da, db := r.encode(a), r.encode(b)
			if rng.chance(50) {
				r.put(ctx, slot, da)
				r.pause()
				requireHTTPStatus(t, r.sc.e.API.Put(ctx, slot, db), http.StatusPreconditionFailed)
				r.current = a
			} else { // racing: exactly one wins
				errs := make([]error, 2)
				var wg sync.WaitGroup
				for i, d := range [][]byte{da, db} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						errs[i] = r.sc.e.API.Put(ctx, slot, d)
					}()
				}
				wg.Wait()
				switch {
				case errs[0] == nil && errs[1] != nil:
					requireHTTPStatus(t, errs[1], http.StatusPreconditionFailed)
					r.current = a
				case errs[1] == nil && errs[0] != nil:
					requireHTTPStatus(t, errs[0], http.StatusPreconditionFailed)
					r.current = b
				default:
					t.Fatalf("seed %d: two PUTs to one URL: %v, %v; want one 200 and one 412", r.sc.seed, errs[0], errs[1])
				}
			}
			r.uploads = append(r.uploads, upload{gen: slot.Generation, want: r.current})
		default:
			r.current = r.mutate()
			r.register(r.current)
			r.put(ctx, slot, r.encode(r.current))
			r.uploads = append(r.uploads, upload{gen: slot.Generation, want: r.current})
		}
		if rng.chance(20) {
			r.sc.e.ResendS3Event(r.id, slot.Generation)
		}
		r.pause()
	}
	var last apiclient.Slot
	if rng.chance(25) { // a flood of reservations up to the hourly limit
		for r.granted < propertyReservationsPerHour {
			last = r.reserve(ctx)
		}
		err := retryMoving(ctx, func() error {
			_, err := r.sc.e.API.Reserve(ctx, r.token, r.id, "")
			return err
		})
		requireHTTPStatus(t, err, http.StatusTooManyRequests)
	} else {
		if rng.chance(30) { // the newest is a delta
			r.playDelta(ctx)
			return
		}
		last = r.reserve(ctx)
	}
	r.current = r.mutate()
	r.register(r.current)
	r.put(ctx, last, r.encode(r.current))
	r.uploads = append(r.uploads, upload{gen: last.Generation, want: r.current})
}

// final are the states nothing happens to any more.
var final = []string{"applied", "superseded", "rejected", "expired", "previewed"}

// finalWithin bounds how long after its file arrived a generation is final
// (I10), as the schedule sees it (it looks once every schedule of its
// round has played, so the bound is loose: a generation stuck for ever
// breaks it).
const finalWithin = 3 * time.Minute

// check waits until every generation of the retailer is final, checks the
// outcome, and returns the catalog.
func (r *retailerRun) check(ctx context.Context) fixtures.Catalog {
	t, seed := r.sc.t, r.sc.seed
	var list []apiclient.Status
	for {
		var err error
		list, err = r.sc.e.API.List(ctx, r.token, r.id, 100)
		require.NoError(t, err, "seed %d", seed)
		settled := true
		for _, s := range list {
			settled = settled && slices.Contains(final, s.State)
		}
		if settled {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("seed %d: %s never settled: %v", seed, r.id, states(list))
		case <-time.After(150 * time.Millisecond):
		}
	}
	settledAt := time.Now()
	byGen := map[int64]apiclient.Status{}
	var undos []apiclient.Status // oldest first
	for _, s := range list {
		byGen[s.Generation] = s
		if s.ReceivedAt != nil {
			require.Less(t, settledAt.Sub(*s.ReceivedAt), finalWithin, "seed %d: %s generation %d final within its bound", seed, r.id, s.Generation)
		}
		if s.Undoes != nil {
			undos = append([]apiclient.Status{s}, undos...)
		}
	}
	require.Len(t, list, r.granted+len(undos), "seed %d: %s's generations: its reservations and the undos", seed, r.id)
	for _, u := range r.uploads {
		s := byGen[u.gen]
		if u.delta != nil || u.rollbackOf != 0 {
			continue // modelContents
		}
		if u.rejected != "" {
			// Rejected, or superseded unread by a newer upload that arrived
			// first (or, for one the shard refuses, superseded before it
			// reached the refused chunk).
			require.Contains(t, []string{"rejected", "superseded"}, s.State, "seed %d: %s generation %d", seed, r.id, u.gen)
			if s.State == "rejected" {
				require.Equal(t, u.rejected, s.Error.Code, "seed %d: %s generation %d: %s", seed, r.id, u.gen, s.Error.Message)
			}
			continue
		}
		require.Contains(t, []string{"applied", "superseded"}, s.State, "seed %d: %s generation %d: %+v", seed, r.id, u.gen, s.Error)
	}
	for _, p := range r.previews {
		s := byGen[p.gen]
		require.Equal(t, "previewed", s.State, "seed %d: %s dry run %d: %+v", seed, r.id, p.gen, s.Error)
		require.True(t, s.DryRun, "seed %d: %s dry run %d", seed, r.id, p.gen)
		if p.mode != "" {
			require.Equal(t, p.mode, s.Mode, "seed %d: %s dry run %d", seed, r.id, p.gen)
		}
	}
	// Each undo (I10) returns the catalog to the generation applied before
	// the one it undoes, which was rejected half way.
	for _, s := range undos {
		require.Equal(t, "rollback", s.Mode, "seed %d: %s generation %d", seed, r.id, s.Generation)
		require.Contains(t, []string{"applied", "superseded"}, s.State, "seed %d: %s undo %d", seed, r.id, s.Generation)
		require.Equal(t, "rejected", byGen[*s.Undoes].State, "seed %d: %s undo %d undoes %d", seed, r.id, s.Generation, *s.Undoes)
		require.NotNil(t, s.SourceGeneration)
		if src := *s.SourceGeneration; src != 0 {
			require.Equal(t, "applied", byGen[src].State, "seed %d: %s undo %d's source %d", seed, r.id, s.Generation, src)
		}
	}
	views := make([]statusView, 0, len(list))
	for _, s := range list {
		views = append(views, statusView{gen: s.Generation, state: s.State, mode: s.Mode, source: s.SourceGeneration})
	}
	content := r.modelContents(views)
	newest := list[0]
	require.Equal(t, "applied", newest.State, "seed %d: %s's newest generation %d: %v", seed, r.id, newest.Generation, states(list))
	if len(undos) == 0 {
		require.Equal(t, r.uploads[len(r.uploads)-1].gen, newest.Generation, "seed %d: %s", seed, r.id)
	}
	want, ok := content[newest.Generation]
	require.True(t, ok, "seed %d: %s's newest generation %d has no known content", seed, r.id, newest.Generation)
	got := r.sc.e.Catalog(r.id)
	if len(want) == 0 {
		require.Empty(t, got, "seed %d: catalog of %s", seed, r.id)
	} else {
		require.Equal(t, want, got, "seed %d: catalog of %s", seed, r.id)
	}
	return want
}

func states(list []apiclient.Status) []string {
	var out []string
	for _, s := range list {
		out = append(out, fmt.Sprintf("%d:%s", s.Generation, s.State))
	}
	return out
}
