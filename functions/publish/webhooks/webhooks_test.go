package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/publish/webhooks"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const secret = "0123456789abcdef-secret"

// receiver is a webhook receiver that checks signatures and answers with
// the statuses it is given, in turn (then 204).
type receiver struct {
	t        *testing.T
	mu       sync.Mutex
	statuses []int
	got      []delivery
}

type delivery struct {
	id, signature string
	body          []byte
	valid         bool
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	sig := r.Header.Get(webhook.HeaderSignature)
	rc.got = append(rc.got, delivery{id: r.Header.Get(webhook.HeaderEventID), signature: sig, body: body,
		valid: webhook.Verify([]byte(secret), body, sig) && r.Header.Get("Content-Type") == "application/json"})
	status := http.StatusNoContent
	if len(rc.statuses) > 0 {
		status, rc.statuses = rc.statuses[0], rc.statuses[1:]
	}
	w.WriteHeader(status)
}

func (rc *receiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// fixture is the webhooks consumer on databases of the test's own, with a
// receiver, retailers r1 (its webhook registered) and r2 (none).
type fixture struct {
	t     *testing.T
	store *pgstore.Stores
	vis   *inmem.Visibility
	recv  *receiver
	srv   *httptest.Server
	box   *webhook.SecretBox
	h     *webhooks.Handler
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, store: pgstoretest.New(t), vis: inmem.NewVisibility(), recv: &receiver{t: t}}
	f.srv = httptest.NewServer(f.recv)
	t.Cleanup(f.srv.Close)
	box, err := webhook.ParseKeys(webhook.NewKey())
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.store.CreateRetailer(ctx, catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	require.NoError(t, f.store.CreateRetailer(ctx, catalog.Retailer{ID: "r2", TokenHash: []byte("t2")}))
	sealed, err := box.Seal("r1", []byte(secret))
	require.NoError(t, err)
	require.NoError(t, f.store.SetWebhook(ctx, catalog.Webhook{RetailerID: "r1", URL: f.srv.URL + "/hook", SecretSealed: sealed}))
	f.box = box
	f.h = webhooks.New(webhooks.Config{QueueURL: "webhooks", Retry: retry.Schedule{Base: time.Second},
		Policy: webhook.Policy{AllowLoopbackHTTP: true}, Secrets: box}, f.store, f.vis, slog.New(slog.DiscardHandler))
	return f
}

func sqsMessage(t *testing.T, retailer string, gen int64, state string, receive string) lambdaevents.SQSMessage {
	typ := message.SnapshotType(state)
	st := message.SnapshotStatus{RetailerID: retailer, Generation: gen, State: state}
	env := message.Envelope{ID: message.EventID(typ, retailer, gen, 0), Type: typ, Time: time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC),
		RetailerID: retailer, Generation: gen, Status: &st}
	b, err := json.Marshal(env)
	require.NoError(t, err)
	return lambdaevents.SQSMessage{MessageId: env.ID + "/" + receive, ReceiptHandle: "rh-" + env.ID + "-" + receive, Body: string(b),
		Attributes: map[string]string{"ApproximateReceiveCount": receive}}
}

func (f *fixture) handle(msgs ...lambdaevents.SQSMessage) []string {
	f.t.Helper()
	resp, err := f.h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: msgs})
	require.NoError(f.t, err)
	var failed []string
	for _, it := range resp.BatchItemFailures {
		failed = append(failed, it.ItemIdentifier)
	}
	return failed
}

// A delivery: the event as published, signed, with its id; a retailer
// without a webhook gets none; a change event is not a webhook's.
func TestDeliversSignedEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	applied := sqsMessage(t, "r1", 7, "applied", "1")
	require.Empty(t, f.handle(applied, sqsMessage(t, "r2", 1, "held", "1")))
	got := f.recv.deliveries()
	require.Len(t, got, 1)
	require.True(t, got[0].valid, "signature verified by the receiver")
	require.Equal(t, "r1:7:applied", got[0].id)
	require.Equal(t, applied.Body, string(got[0].body), "the envelope, byte for byte")
}

// Three failures, then success: each failure delays the message by the
// schedule; once delivered, a duplicate or a replay sends nothing.
func TestRetriesThenDeliversOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.recv.statuses = []int{500, 503, 404}
	var lines metricstest.Capture
	f.h.Metrics = metrics.New(&lines, metrics.Options{Function: "webhooks"})
	var failed []lambdaevents.SQSMessage
	for n := 1; n <= 3; n++ {
		m := sqsMessage(t, "r1", 3, "rejected", string(rune('0'+n)))
		require.Equal(t, []string{m.MessageId}, f.handle(m))
		failed = append(failed, m)
	}
	delays := f.vis.Delays()
	require.Equal(t, time.Second, delays[failed[0].ReceiptHandle])
	require.Equal(t, 2*time.Second, delays[failed[1].ReceiptHandle])
	require.Equal(t, 4*time.Second, delays[failed[2].ReceiptHandle])
	require.Empty(t, f.handle(sqsMessage(t, "r1", 3, "rejected", "4")))
	require.Len(t, f.recv.deliveries(), 4)
	require.Empty(t, f.handle(sqsMessage(t, "r1", 3, "rejected", "5"), sqsMessage(t, "r1", 3, "rejected", "1")))
	require.Len(t, f.recv.deliveries(), 4, "delivered once: duplicates and replays send nothing")
	for _, d := range f.recv.deliveries() {
		require.Equal(t, "r1:3:rejected", d.id, "one id per event, every attempt")
	}
	require.NoError(t, lines.Validate())
	require.Equal(t, 1.0, lines.Sum(metrics.WebhookDeliveries))
	require.Equal(t, 3.0, lines.Sum(metrics.WebhookFailures, "Reason=status"))
}

// A URL that breaks the rules now (saved before a policy change, or
// resolving elsewhere) is not called: the delivery fails and is retried.
func TestRefusedURLAtSendTime(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	hook, err := f.store.Webhook(ctx, "r1")
	require.NoError(t, err)
	hook.URL = "http://169.254.169.254/latest/meta-data"
	require.NoError(t, f.store.SetWebhook(ctx, hook))
	var lines metricstest.Capture
	f.h.Metrics = metrics.New(&lines, metrics.Options{Function: "webhooks"})
	m := sqsMessage(t, "r1", 2, "held", "1")
	require.Equal(t, []string{m.MessageId}, f.handle(m))
	require.Empty(t, f.recv.deliveries())
	require.Equal(t, 1.0, lines.Sum(metrics.WebhookFailures, "Reason=url_refused"))
}
