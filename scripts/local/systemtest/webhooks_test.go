package systemtest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/platform/connect"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

const hookSecret = "the-retailers-own-secret"

// hookReceiver is a retailer's webhook receiver on 127.0.0.1: it verifies
// each delivery's signature and answers 500 to the first failFirst
// deliveries of each event (then 204), or never (hang, until answer).
type hookReceiver struct {
	srv       *httptest.Server
	failFirst int
	hang      bool
	mu        sync.Mutex
	byID      map[string][]bool // event id -> each delivery: signature valid
	envs      map[string]message.Envelope
	release   chan struct{}
}

func newHookReceiver(t *testing.T, failFirst int, hang bool) *hookReceiver {
	rc := &hookReceiver{failFirst: failFirst, hang: hang, byID: map[string][]bool{}, envs: map[string]message.Envelope{}, release: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(webhook.HeaderEventID)
		var env message.Envelope
		valid := webhook.Verify([]byte(hookSecret), body, r.Header.Get(webhook.HeaderSignature)) &&
			r.Header.Get("Content-Type") == "application/json" && json.Unmarshal(body, &env) == nil && env.ID == id
		rc.mu.Lock()
		rc.byID[id] = append(rc.byID[id], valid)
		rc.envs[id] = env
		n, hang := len(rc.byID[id]), rc.hang
		rc.mu.Unlock()
		if hang {
			select {
			case <-rc.release:
			case <-r.Context().Done():
			}
			return
		}
		if n <= rc.failFirst {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(func() { close(rc.release); rc.srv.Close() })
	return rc
}

// answer makes a hanging receiver answer 204 from now on.
func (rc *hookReceiver) answer() {
	rc.mu.Lock()
	rc.hang = false
	rc.mu.Unlock()
}

func (rc *hookReceiver) snapshot() (map[string][]bool, map[string]message.Envelope) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	byID := map[string][]bool{}
	for k, v := range rc.byID {
		byID[k] = append([]bool(nil), v...)
	}
	envs := map[string]message.Envelope{}
	for k, v := range rc.envs {
		envs[k] = v
	}
	return byID, envs
}

func (e *env) setWebhook(retailer, url string) {
	e.T.Helper()
	require.NoError(e.T, e.API.Do(context.Background(), http.MethodPut, "/v1/retailers/"+retailer+"/webhook", e.Token(retailer),
		map[string]any{"url": url, "secret": hookSecret}, nil))
}

// Every upload's outcome reaches the retailer's webhook, signed, once per
// event; a receiver that fails three times gets it on the fourth, after the
// backoff; no generation's outcome is sent under two ids.
func TestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	rc := newHookReceiver(t, 3, false)
	requireStatus(t, e.API.Do(context.Background(), http.MethodPut, "/v1/retailers/r1/webhook", e.Token("r1"),
		map[string]any{"url": "http://10.0.0.1/hook", "secret": hookSecret}, nil), 400)
	requireStatus(t, e.API.Do(context.Background(), http.MethodPut, "/v1/retailers/r1/webhook", e.Token("r1"),
		map[string]any{"url": "http://169.254.169.254/latest/meta-data", "secret": hookSecret}, nil), 400)
	e.setWebhook("r1", rc.srv.URL+"/hooks/catalog")

	c := fixtures.Generate("p", 120)
	applied := e.Upload("r1", c.CSV(nil))
	require.Equal(t, "applied", applied.State)
	rejected := e.Upload("r1", []byte("product_id,title\nsame,1\nsame,2\n"))
	require.Equal(t, "rejected", rejected.State)
	held := e.Upload("r1", []byte("product_id,title\n"))
	require.Equal(t, "held", held.State)
	want := map[string]string{
		message.EventID(message.TypeSnapshotApplied, "r1", applied.Generation, 0):   "applied",
		message.EventID(message.TypeSnapshotRejected, "r1", rejected.Generation, 0): "rejected",
		message.EventID(message.TypeSnapshotHeld, "r1", held.Generation, 0):         "held",
	}
	start := time.Now()
	var byID map[string][]bool
	var envs map[string]message.Envelope
	require.Eventually(t, func() bool {
		byID, envs = rc.snapshot()
		for id := range want {
			if len(byID[id]) < 4 {
				return false
			}
		}
		return true
	}, 60*time.Second, 100*time.Millisecond, "each event delivered after three failures")
	require.GreaterOrEqual(t, time.Since(start), 5*time.Second, "1 s + 2 s + 4 s of backoff (CATALOG_BACKOFF_BASE=1s)")
	for id, state := range want {
		for _, valid := range byID[id] {
			require.True(t, valid, "every delivery of %s is signed with the retailer's secret", id)
		}
		require.Equal(t, state, envs[id].Status.State)
	}
	perGeneration := map[int64]map[string]bool{}
	for id, env := range envs {
		if perGeneration[env.Generation] == nil {
			perGeneration[env.Generation] = map[string]bool{}
		}
		perGeneration[env.Generation][id] = true
	}
	for gen, ids := range perGeneration {
		require.Len(t, ids, 1, "generation %d's outcome under one id", gen)
	}
	// Once delivered, nothing more comes (the outbox and queue drained).
	e.WaitOutboxEmpty(10 * time.Second)
	e.WaitDrained(e.Stack.WebhooksQueue)
	again, _ := rc.snapshot()
	for id := range want {
		require.Len(t, again[id], 4, "%s: delivered once, after three failures", id)
	}
}

// A receiver that never answers: each delivery times out, is retried on the
// schedule, and after the whole schedule (shortened here: 1 s doubling, a
// 3 s window) the event is parked in the webhooks DLQ. Once the receiver
// answers, an operator's redrive delivers it, once.
func TestWebhookNeverAnsweringEndsInDLQ(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10, WebhookRetryWindow: 3 * time.Second, WebhookTimeout: 300 * time.Millisecond})
	e.Onboard("r1")
	rc := newHookReceiver(t, 0, true)
	e.setWebhook("r1", rc.srv.URL+"/")
	s := e.Upload("r1", fixtures.Generate("p", 5).CSV(nil))
	require.Equal(t, "applied", s.State)
	id := message.EventID(message.TypeSnapshotApplied, "r1", s.Generation, 0)

	ctx := context.Background()
	admin := e.Stack.AdminToken
	var parked []string
	require.Eventually(t, func() bool {
		dl, err := e.API.DeadLetters(ctx, admin, "webhooks", 10) // peeked, not consumed
		require.NoError(t, err)
		parked = parked[:0]
		for _, m := range dl.Messages {
			var env message.Envelope
			require.NoError(t, json.Unmarshal(m.Body, &env))
			parked = append(parked, env.ID)
		}
		return len(parked) > 0
	}, 60*time.Second, 200*time.Millisecond, "the event parked in the DLQ")
	require.Equal(t, []string{id}, parked)
	byID, _ := rc.snapshot()
	require.Len(t, byID[id], 3, "three deliveries (1 s + 2 s of backoff cover the 3 s window), then the DLQ")

	rc.answer()
	moved, err := e.API.Redrive(ctx, admin, "webhooks", 0)
	require.NoError(t, err)
	require.Equal(t, 1, moved.Moved)
	require.Eventually(t, func() bool { byID, _ = rc.snapshot(); return len(byID[id]) == 4 }, 30*time.Second, 50*time.Millisecond,
		"delivered after the redrive")
	e.WaitDrained(e.Stack.WebhooksQueue)
	e.WaitDrained(stack.Queue{Name: "webhooks DLQ", URL: e.Stack.WebhooksQueue.DLQURL})
	moved, err = e.API.Redrive(ctx, admin, "webhooks", 0)
	require.NoError(t, err)
	require.Zero(t, moved.Moved, "nothing left to move")
	byID, _ = rc.snapshot()
	require.Len(t, byID[id], 4, "delivered once after the redrive")
	for _, valid := range byID[id] {
		require.True(t, valid)
	}
}

// On AWS's rules (https to public addresses only) the SSRF attempts are
// refused when saved: the metadata service, a private address, a name
// resolving to 127.0.0.1; and a webhook that breaks the rules (here one
// written to the table behind the API's back) is refused again at each
// delivery, never called, and ends in the DLQ after the schedule.
func TestWebhookSSRFRefusedOnAWSRules(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10, WebhookAWSRules: true, WebhookRetryWindow: 2 * time.Second})
	e.Onboard("r1")
	called := make(chan string, 10)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called <- r.URL.String() }))
	t.Cleanup(srv.Close)
	ctx := context.Background()
	_, port, err := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	require.NoError(t, err)
	local := "https://localhost:" + port + "/hook" // localhost resolves to 127.0.0.1
	for _, url := range []string{"http://169.254.169.254/", "https://169.254.169.254/latest/meta-data", "http://10.0.0.1/", "https://10.0.0.1/",
		local, srv.URL + "/hook", "http://127.0.0.1:" + port + "/"} {
		err := e.API.Do(ctx, http.MethodPut, "/v1/retailers/r1/webhook", e.Token("r1"), map[string]any{"url": url, "secret": hookSecret}, nil)
		requireStatus(t, err, 400)
		require.Contains(t, err.Error(), "invalid_webhook_url", url)
	}
	box, err := connect.New(&e.Stack.Config).WebhookSecrets(ctx)
	require.NoError(t, err)
	sealed, err := box.Seal("r1", []byte(hookSecret))
	require.NoError(t, err)
	require.NoError(t, e.Stack.Stores.SetWebhook(ctx, catalog.Webhook{RetailerID: "r1", URL: local, SecretSealed: sealed}))

	s := e.Upload("r1", fixtures.Generate("p", 5).CSV(nil))
	require.Equal(t, "applied", s.State)
	require.Eventually(t, func() bool {
		dl, err := e.API.DeadLetters(ctx, e.Stack.AdminToken, "webhooks", 10)
		require.NoError(t, err)
		return dl.Depth == 1
	}, 60*time.Second, 100*time.Millisecond, "the refused delivery parked in the DLQ after the schedule")
	select {
	case u := <-called:
		t.Fatalf("the receiver on 127.0.0.1 was called (%s)", u)
	default:
	}
}
