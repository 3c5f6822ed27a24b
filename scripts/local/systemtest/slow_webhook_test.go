package systemtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// tarpit is a webhook receiver that accepts every delivery and answers
// 204 only after delay: a slow receiver, as an attacker (or a struggling
// retailer) runs.
type tarpit struct {
	srv   *httptest.Server
	delay time.Duration

	mu       sync.Mutex
	inFlight int
	maxIn    int
	got      map[string]int // event id -> deliveries answered
}

func newTarpit(t *testing.T, delay time.Duration) *tarpit {
	tp := &tarpit{delay: delay, got: map[string]int{}}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tp.mu.Lock()
		tp.inFlight++
		tp.maxIn = max(tp.maxIn, tp.inFlight)
		tp.mu.Unlock()
		select {
		case <-time.After(tp.delay):
		case <-r.Context().Done():
		}
		tp.mu.Lock()
		tp.inFlight--
		if r.Context().Err() == nil {
			tp.got[r.Header.Get(webhook.HeaderEventID)]++
		}
		tp.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

func (tp *tarpit) load() (inFlight, maxIn int, got map[string]int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	got = map[string]int{}
	for k, v := range tp.got {
		got[k] = v
	}
	return tp.inFlight, tp.maxIn, got
}

// A slow webhook receiver holds no database connection (I12, DESIGN 8).
// Retailer r1's webhook is a tarpit (it accepts, and answers after 8 s);
// 20 lifecycle events of r1 reach it at once (its outcomes, re-published
// by a replay after the webhook was set), and 10 to 20 wait on it at once
// (the shard's pool has 14 connections). While they wait, no session of
// the shard sits idle in a transaction, and retailer r2's status, on the
// same shard, answers as fast as ever. Each event is delivered.
func TestSlowWebhookHoldsNoConnection(t *testing.T) {
	t.Parallel()
	const events20 = 20 // two batches of the webhooks consumer's
	e := newEnv(t, stack.Options{Shards: 1, ChunkRows: 10, HandlerTimeout: 20 * time.Second, ReservationsPerHour: events20 + 5,
		SweepEvery: 200 * time.Millisecond, SweepAge: 300 * time.Millisecond}) // the replay published by the sweeper
	ctx := context.Background()
	e.Onboard("r1")
	e.Onboard("r2")
	r2 := e.Upload("r2", fixtures.Generate("q", 20).CSV(nil))
	require.Equal(t, "applied", r2.State)

	// r1's outcomes, before it has a webhook: nothing delivered, nothing
	// recorded.
	start := time.Now()
	var gens []int64
	for range events20 {
		gen, err := e.API.Upload(ctx, e.Token("r1"), "r1", "csv", []byte("product_id,title\nsame,1\nsame,2\n"))
		require.NoError(t, err)
		gens = append(gens, gen)
	}
	want := map[string]bool{}
	for _, gen := range gens {
		s := e.Wait("r1", gen)
		want[message.EventID(message.SnapshotType(s.State), "r1", gen, 0)] = true
	}
	require.Len(t, want, events20)
	e.WaitOutboxEmpty(30 * time.Second)
	e.WaitDrained(e.Stack.WebhooksQueue)

	tp := newTarpit(t, 8*time.Second)
	e.setWebhook("r1", tp.srv.URL+"/hook")
	replayed, err := e.API.Replay(ctx, e.Stack.AdminToken, "r1", start.Add(-time.Second))
	require.NoError(t, err)
	require.Equal(t, events20, replayed.Lifecycle)
	// At least a batch of the consumer's (10) waits on it; nearly always
	// both of its batches (20), more than the shard's pool has
	// connections (the stack's 4 + 2*4 + 2 = 14).
	require.Eventually(t, func() bool { in, _, _ := tp.load(); return in >= 10 }, 15*time.Second, 10*time.Millisecond,
		"deliveries of r1 waiting on the tarpit")

	// While they wait: the shard's sessions and r2's status.
	shard := e.Stack.Stores.Shards[e.ShardOf("r1")].Pool()
	require.Equal(t, e.ShardOf("r1"), e.ShardOf("r2"))
	var statusTimes []time.Duration
	for i := 0; i < 12; i++ {
		in, _, _ := tp.load()
		if in == 0 {
			break
		}
		// Sessions idle in a transaction for more than a second: a
		// delivery's transaction held across its POST (the defect) is;
		// the pipeline's own never are.
		var idle []string
		rows, err := shard.Query(ctx, `SELECT state || ' for ' || (now() - state_change)::text || ': ' || left(query, 80)
			FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
			AND state LIKE 'idle in transaction%' AND now() - state_change > interval '1 second'`)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			idle = append(idle, s)
		}
		require.NoError(t, rows.Err())
		require.Empty(t, idle, "no session of the shard idle in a transaction while %d deliveries wait on the tarpit", in)

		t0 := time.Now()
		s := e.Status("r2", r2.Generation)
		statusTimes = append(statusTimes, time.Since(t0))
		require.Equal(t, "applied", s.State)
		time.Sleep(250 * time.Millisecond)
	}
	_, maxIn, _ := tp.load()
	require.GreaterOrEqual(t, len(statusTimes), 8, "sampled while the deliveries waited")
	sorted := slices.Clone(statusTimes)
	slices.Sort(sorted)
	t.Logf("r2's status while %d deliveries waited: median %s, slowest %s", maxIn, sorted[len(sorted)/2], sorted[len(sorted)-1])
	require.Less(t, sorted[len(sorted)/2], 100*time.Millisecond, "r2's status answers within 100 ms: %v", statusTimes)
	require.Less(t, sorted[len(sorted)-1], time.Second, "none waited for a connection (a held pool: seconds): %v", statusTimes)

	// Every event delivered (at least once).
	require.Eventually(t, func() bool {
		_, _, got := tp.load()
		for id := range want {
			if got[id] == 0 {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "every event delivered")
	e.WaitDrained(e.Stack.WebhooksQueue)
}
