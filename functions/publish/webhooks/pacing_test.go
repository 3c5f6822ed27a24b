package webhooks_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/publish/webhooks"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.now = c.now.Add(d) }

// A receiver that never answers holds a batch until the delivery's timeout
// once; after that its retailer is paced (I12, no head of line): its other
// events are deferred without a POST, so the batches that hold them end at
// once and another retailer's deliveries go on; the next attempt waits for
// the retry schedule, and a receiver that answers in time again is sent
// every event at once.
func TestSlowReceiverIsPaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var tarpit atomic.Bool
	tarpit.Store(true)
	var posts atomic.Int32
	done := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		if tarpit.Load() {
			select { // never answers: the sender's timeout ends it
			case <-r.Context().Done():
			case <-done:
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(done) })
	ctx := context.Background()
	require.NoError(t, f.store.CreateRetailer(ctx, catalog.Retailer{ID: "tar", TokenHash: []byte("t3")}))
	sealed, err := f.box.Seal("tar", []byte(secret))
	require.NoError(t, err)
	require.NoError(t, f.store.SetWebhook(ctx, catalog.Webhook{RetailerID: "tar", URL: slow.URL + "/hook", SecretSealed: sealed}))
	clk := &clock{now: time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)}
	timeout := time.Second // long beside a loaded machine's scheduling delays (the bound below is half of it)
	f.h = webhooks.New(webhooks.Config{QueueURL: "webhooks", Retry: retry.Schedule{Base: time.Second},
		Policy: webhook.Policy{AllowLoopbackHTTP: true}, Secrets: f.box, Timeout: timeout, Now: clk.Now},
		f.store, f.vis, slog.New(slog.DiscardHandler))

	// The first event of the tarpit holds its batch for the timeout.
	start := time.Now()
	require.Len(t, f.handle(sqsMessage(t, "tar", 1, "applied", "1")), 1)
	require.GreaterOrEqual(t, time.Since(start), timeout)
	require.EqualValues(t, 1, posts.Load())

	// Its next events are deferred without a POST, for at least their own
	// schedule; r1's delivery in the same batch is made, and the batch
	// ends long before the timeout.
	start = time.Now()
	failed := f.handle(sqsMessage(t, "tar", 2, "applied", "1"), sqsMessage(t, "tar", 3, "applied", "2"), sqsMessage(t, "r1", 1, "applied", "1"))
	require.Less(t, time.Since(start), timeout/2, "a batch of deferred events and a fast receiver's ends at once")
	require.Len(t, failed, 2, "the tarpit's two events come back later")
	require.EqualValues(t, 1, posts.Load(), "no POST to the paced receiver")
	require.Len(t, f.recv.deliveries(), 1, "r1's event delivered")
	delays := f.vis.Delays()
	require.GreaterOrEqual(t, delays["rh-tar:2:applied-1"], time.Second-time.Millisecond, "deferred until the window ends")
	require.Equal(t, 2*time.Second, delays["rh-tar:3:applied-2"], "never less than the message's own schedule")

	// The window over, one attempt again (it fails: two strikes, a longer window).
	clk.Add(time.Second)
	require.Len(t, f.handle(sqsMessage(t, "tar", 2, "applied", "2")), 1)
	require.EqualValues(t, 2, posts.Load())
	clk.Add(time.Second)
	require.Len(t, f.handle(sqsMessage(t, "tar", 3, "applied", "3")), 1, "still within the 2 s window of the second strike")
	require.EqualValues(t, 2, posts.Load())

	// The receiver answers in time again: its events go out at once.
	tarpit.Store(false)
	clk.Add(time.Second)
	require.Empty(t, f.handle(sqsMessage(t, "tar", 3, "applied", "4")))
	require.Empty(t, f.handle(sqsMessage(t, "tar", 4, "applied", "1"), sqsMessage(t, "tar", 5, "applied", "1")))
	require.EqualValues(t, 5, posts.Load())
}
