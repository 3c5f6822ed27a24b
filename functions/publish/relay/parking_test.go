package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/publish/relay"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// I12 in the relay: one event that keeps failing never holds up the events
// after it, no database transaction stays open while the relay publishes,
// and an event that cannot be published is parked.

// rejectUploads writes n lifecycle events of a second retailer (n rejected
// uploads), registering it first.
func (f *fixture) rejectUploads(retailerID string, n int) {
	f.t.Helper()
	ctx := context.Background()
	require.NoError(f.t, f.store.CreateRetailer(ctx, catalog.Retailer{ID: retailerID, TokenHash: []byte(retailerID)}))
	for range n {
		gen, err := f.store.ReserveGeneration(ctx, retailerID, "csv", f.now.Add(time.Hour), 0)
		require.NoError(f.t, err)
		_, err = f.store.BeginDiff(ctx, retailerID, gen, "")
		require.NoError(f.t, err)
		_, err = f.store.Reject(ctx, retailerID, gen, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 1})
		require.NoError(f.t, err)
	}
}

// refuse makes the topic refuse every message of retailerID with err.
func (f *fixture) refuse(retailerID string, err error) {
	f.topic.Fail = func(m topic.Message) error {
		if m.Attributes[message.AttrRetailerID] == retailerID {
			return err
		}
		return nil
	}
}

// retailersOf lists the retailer of each event.
func retailersOf(envs []message.Envelope) []string {
	var out []string
	for _, e := range envs {
		out = append(out, e.RetailerID)
	}
	return out
}

// The sweeper goes on past events that fail: seven of another retailer,
// older than r1's and more than a claim (three) takes, fail on every
// publish, and r1's events still leave in the same sweep.
func TestSweeperGoesOnPastFailingEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.rejectUploads("poison", 7)
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`))
	f.refuse("poison", errors.New("sns throttled the message"))
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)

	st, err := f.relay.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, st.Published, "r1's change and applied events, behind seven failing ones")
	require.Equal(t, []string{"r1", "r1"}, retailersOf(f.published()))
	require.Len(t, pgstoretest.Outbox(t, f.store), 7, "the failing events stay, to be tried again")
}

// An event that fails is tried again after its backoff, doubling with each
// failure; the fifth parks it: kept, counted by the OutboxParked metric,
// never taken again (the sweeps after it take nothing), with its error.
func TestFailingEventParkedAfterFiveAttempts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var lines metricstest.Capture
	f.relay.Metrics = metrics.New(&lines, metrics.Options{Function: "relay"})
	f.rejectUploads("poison", 1)
	f.refuse("poison", errors.New("sns throttled the message"))
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)

	lease := func() time.Duration {
		t.Helper()
		var secs float64
		require.NoError(t, f.store.Shards[0].Pool().QueryRow(context.Background(),
			`SELECT extract(epoch FROM claimed_until - now()) FROM outbox`).Scan(&secs))
		return time.Duration(secs * float64(time.Second))
	}
	for attempt := 1; attempt < relay.MaxAttempts; attempt++ {
		st, err := f.relay.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, relay.Stats{Taken: 1, Failed: 1}, st, "attempt %d", attempt)
		left := pgstoretest.Outbox(t, f.store)
		require.Len(t, left, 1)
		require.Equal(t, attempt, left[0].Attempts)
		backoff := 30 * time.Second << (attempt - 1) // SweepAge, doubling
		require.InDelta(t, backoff.Seconds(), lease().Seconds(), 2, "attempt %d", attempt)
		st, err = f.relay.Sweep(context.Background())
		require.NoError(t, err)
		require.Zero(t, st.Taken, "within its backoff")
		pgstoretest.AgeOutbox(t, f.store, backoff)
	}
	st, err := f.relay.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, relay.Stats{Taken: 1, Parked: 1}, st, "the fifth failure parks it")
	pgstoretest.AgeOutbox(t, f.store, time.Hour)
	st, err = f.relay.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Taken, "a parked event is never taken")
	f.relay.Flush(context.Background(), "poison")
	require.Empty(t, f.published())

	parked, total, err := f.store.ParkedOutbox(context.Background(), "poison", 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, total)
	require.Equal(t, relay.MaxAttempts, parked[0].Attempts)
	require.Equal(t, "sns throttled the message", parked[0].LastError)
	var gauge []float64
	for _, l := range lines.Lines() {
		gauge = append(gauge, l[metrics.OutboxParked].(float64))
	}
	require.Equal(t, []float64{0, 0, 0, 0, 0, 0, 0, 0, 1, 1}, gauge, "a gauge after each sweep")
	require.NoError(t, lines.Validate())
}

// An event the topic refuses for what it is (topic.ErrRefused), and one
// whose envelope is over the 200 KiB bound, are parked at once with an
// error that says so; the other events of the pass are published.
func TestUnpublishableEventsParkedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.rejectUploads("invalid", 1)
	f.refuse("invalid", fmt.Errorf("sns refused the message: InvalidParameter: bad attribute: %w", topic.ErrRefused))
	g1 := f.start(1)
	f.applyChunk(g1, 0, upsert("a", `{"v":"1"}`))
	// A status written behind the store's back, over the envelope bound.
	_, err := f.store.Shards[0].Pool().Exec(ctx, `UPDATE outbox SET status = status || jsonb_build_object('error_code', 'x', 'error_message', repeat('x', $2))
		WHERE retailer_id = 'r1' AND generation = $1 AND status IS NOT NULL`, g1, message.MaxEnvelopeBytes)
	require.NoError(t, err)
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)

	st, err := f.relay.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.Stats{Taken: 3, Published: 1, Parked: 2}, st)
	got := f.published()
	require.Len(t, got, 1)
	require.Equal(t, message.TypeChanges, got[0].Type)
	parked, total, err := f.store.ParkedOutbox(ctx, "", 10)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	errs := map[string]string{}
	for _, p := range parked {
		require.Equal(t, 1, p.Attempts)
		errs[p.RetailerID] = p.LastError
	}
	require.Contains(t, errs["invalid"], "InvalidParameter")
	require.Contains(t, errs["r1"], "over the envelope bound of 204800 bytes")
}

// downTopic fails every publish call as a whole, as an unreachable topic does.
type downTopic struct{ calls int }

func (d *downTopic) Publish(context.Context, []topic.Message) ([]error, error) {
	d.calls++
	return nil, errors.New("dial tcp: connection refused")
}

// A topic that cannot be reached counts nothing against the events: they
// wait out one backoff and are taken again, and the pass stops after its
// first claim instead of trying every event of the outbox.
func TestUnreachableTopicCountsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	down := &downTopic{}
	rl := relay.New(relay.Config{DrainSize: 3}, f.store, f.blobs, down, slog.New(slog.DiscardHandler))
	f.rejectUploads("r2", 5)
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)
	for range 3 {
		st, err := rl.Sweep(context.Background())
		require.NoError(t, err)
		require.Equal(t, relay.Stats{Taken: 3, Failed: 3, Unavailable: 3}, st, "one claim, then it stops")
		for _, e := range pgstoretest.Outbox(t, f.store) {
			require.Zero(t, e.Attempts, "nothing counted")
		}
		pgstoretest.AgeOutbox(t, f.store, 30*time.Second)
	}
	require.Equal(t, 3, down.calls)
	health, err := f.store.OutboxHealth(context.Background(), 0)
	require.NoError(t, err)
	require.Zero(t, health.Parked)
}

// blockingTopic holds each publish until released, telling when one waits.
type blockingTopic struct {
	next    topic.Publisher
	waiting chan struct{}
	release chan struct{}
}

func (b *blockingTopic) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	b.waiting <- struct{}{}
	<-b.release
	return b.next.Publish(ctx, msgs)
}

// While the relay publishes (the topic holds the call), no connection to
// the shard is idle in a transaction, and no row of the outbox is locked:
// the claim has committed, and the settle comes after the publish.
func TestNoTransactionOpenWhilePublishing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`))
	hold := &blockingTopic{next: f.topic, waiting: make(chan struct{}), release: make(chan struct{})}
	rl := relay.New(relay.Config{}, f.store, f.blobs, hold, slog.New(slog.DiscardHandler))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rl.Flush(ctx, "r1")
	}()
	<-hold.waiting
	var inTx, locked int
	require.NoError(t, f.store.Shards[0].Pool().QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&inTx))
	require.NoError(t, f.store.Shards[0].Pool().QueryRow(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
		WHERE l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) AND c.relname = 'outbox'`).Scan(&locked))
	close(hold.release)
	wg.Wait()
	require.Zero(t, inTx, "a connection idle in a transaction while the relay publishes")
	require.Zero(t, locked, "outbox locks held while the relay publishes")
	require.Len(t, f.published(), 2)
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// crashingStore loses every settle, as a relay that dies between its
// publish and its settle does.
type crashingStore struct {
	relay.Store
	crash bool
}

func (c *crashingStore) SettleOutbox(ctx context.Context, shard int, token int64, s catalog.OutboxSettlement) (int, int, error) {
	if c.crash {
		return 0, 0, errors.New("the relay died before its settle")
	}
	return c.Store.SettleOutbox(ctx, shard, token, s)
}

// A relay that dies between its claim and its settle leaves its events
// leased: no other pass takes them until the lease has passed; then they
// are published again, under the same ids (at least once), and deleted.
func TestCrashBetweenClaimAndSettle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	store := &crashingStore{Store: f.store, crash: true}
	rl := relay.New(relay.Config{Lease: 10 * time.Second}, store, f.blobs, f.topic, slog.New(slog.DiscardHandler))
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`))
	_, err := rl.FlushRetailer(ctx, "r1")
	require.ErrorContains(t, err, "the relay died before its settle")
	first := f.published()
	require.Len(t, first, 2, "published, not settled")

	store.crash = false
	st, err := rl.FlushRetailer(ctx, "r1")
	require.NoError(t, err)
	require.Zero(t, st.Taken, "leased to the dead relay")
	pgstoretest.AgeOutbox(t, f.store, 30*time.Second) // past SweepAge and the lease
	st, err = rl.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Published)
	again := f.published()
	require.Equal(t, []string{first[0].ID, first[1].ID}, []string{again[0].ID, again[1].ID}, "the same events, the same ids")
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// A redriven event (an operator unparked it) is published by the next
// sweep, and the outbox empties.
func TestRedrivenEventPublished(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.rejectUploads("invalid", 2)
	f.refuse("invalid", fmt.Errorf("too large: %w", topic.ErrRefused))
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)
	st, err := f.relay.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Parked)

	f.topic.Fail = nil // the cause fixed
	n, left, err := f.store.UnparkOutbox(ctx, "invalid", 100)
	require.NoError(t, err)
	require.Equal(t, [2]int64{2, 0}, [2]int64{n, left})
	st, err = f.relay.Sweep(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, st.Published)
	require.Equal(t, []string{"invalid", "invalid"}, retailersOf(f.published()))
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// cancellingBlobs cancels the pass while the relay reads a chunk object,
// as the apply's deadline cancels its background flush.
type cancellingBlobs struct {
	relay.Blobs
	cancel context.CancelFunc
}

func (b cancellingBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	b.cancel()
	return nil, ctx.Err()
}

// A pass cancelled while it builds an event (the apply's flush at its
// deadline) counts nothing against the event: it is released for the
// sweeper, not brought nearer to parking.
func TestCancelledPassCountsNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`))
	_, err := f.store.Shards[0].Pool().Exec(context.Background(),
		`UPDATE outbox SET unchanged_ids = '{b}', changed = 1 WHERE event_type = 'catalog.changes'`) // a change object to write
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rl := relay.New(relay.Config{}, f.store, cancellingBlobs{Blobs: f.blobs, cancel: cancel}, f.topic, slog.New(slog.DiscardHandler))
	_, _ = rl.FlushRetailer(ctx, "r1")
	for _, e := range pgstoretest.Outbox(t, f.store) {
		require.Zero(t, e.Attempts, "%s: a cancelled pass counted against it", e.Type)
	}
}
