package webhooks_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/publish/webhooks"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// A slow receiver holds no database connection (I12, DESIGN 8): while
// deliveries wait on it (here until the test lets it answer), no session
// of the shard is in a transaction and no connection of the consumer's
// pools is taken. Two deliveries of one event at once both reach the
// receiver (at least once: nothing locks the event while it is POSTed);
// once answered, each event is recorded and a duplicate sends nothing.
func TestSlowReceiverHoldsNoConnection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	arrived := make(chan string, 10)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Header.Get(webhook.HeaderEventID)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		f.recv.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // before the server's and the fixture's: a failed test ends its deliveries first
	ctx := context.Background()
	hook, err := f.store.Webhook(ctx, "r1")
	require.NoError(t, err)
	hook.URL = slow.URL + "/hook"
	require.NoError(t, f.store.SetWebhook(ctx, hook))
	msgs := []lambdaevents.SQSMessage{
		sqsMessage(t, "r1", 1, "applied", "1"), sqsMessage(t, "r1", 2, "rejected", "1"), sqsMessage(t, "r1", 3, "held", "1"),
		sqsMessage(t, "r1", 3, "held", "2"), // the same event, delivered twice at once
	}
	done := make(chan []string, 1)
	go func() { done <- f.handle(msgs...) }()
	got := map[string]int{}
	for range msgs {
		select {
		case id := <-arrived:
			got[id]++
		case <-time.After(5 * time.Second): // under the POST's 10 s
			t.Fatalf("only %v reached the receiver", got)
		}
	}
	require.Equal(t, map[string]int{"r1:1:applied": 1, "r1:2:rejected": 1, "r1:3:held": 2}, got,
		"every delivery is at the receiver at once, the duplicate too")
	require.Empty(t, pgstoretest.OpenTransactions(t, f.store.Shards[0].Pool()), "no transaction open on the shard while the receiver is slow")
	require.Zero(t, f.store.Shards[0].Pool().Stat().AcquiredConns(), "no connection of the shard's pool held")
	require.Zero(t, f.store.Control.Pool().Stat().AcquiredConns(), "no connection of the control pool held")
	releaseOnce()
	require.Empty(t, <-done)
	require.Empty(t, f.handle(sqsMessage(t, "r1", 1, "applied", "3"), sqsMessage(t, "r1", 3, "held", "3")),
		"recorded: duplicates are acknowledged")
	require.Len(t, f.recv.deliveries(), 4, "and send nothing more")
}

// failingRecords fails RecordVersions while fail is set.
type failingRecords struct {
	webhooks.Store
	fail atomic.Bool
}

func (s *failingRecords) RecordVersions(ctx context.Context, consumer, retailerID string, keys []string, gens []int64) error {
	if s.fail.Load() {
		return errors.New("shard unavailable")
	}
	return s.Store.RecordVersions(ctx, consumer, retailerID, keys, gens)
}

// A delivery whose record fails after the receiver took it is retried and
// delivered again, under the same event id (at least once); recorded then,
// it is not sent a third time.
func TestUnrecordedDeliveryIsSentAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	store := &failingRecords{Store: f.store}
	store.fail.Store(true)
	h := webhooks.New(webhooks.Config{QueueURL: "webhooks", Retry: retry.Schedule{Base: time.Second},
		Policy: webhook.Policy{AllowLoopbackHTTP: true}, Secrets: f.box}, store, f.vis, slog.New(slog.DiscardHandler))
	m := sqsMessage(t, "r1", 4, "applied", "1")
	resp, err := h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{m}})
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1, "delivered, not recorded: retried")
	store.fail.Store(false)
	resp, err = h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{sqsMessage(t, "r1", 4, "applied", "2")}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	resp, err = h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{sqsMessage(t, "r1", 4, "applied", "3")}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	got := f.recv.deliveries()
	require.Len(t, got, 2, "sent again after the failed record, then not again")
	for _, d := range got {
		require.Equal(t, "r1:4:applied", d.id)
		require.True(t, d.valid)
	}
}
