package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// request calls a route of the ops handler with a token ("" none) and
// returns the status, decoding the body into out when it is not nil.
func (f *fixture) request(method, path, token string, body any, out any) int {
	f.t.Helper()
	var buf bytes.Buffer
	if body != nil {
		require.NoError(f.t, json.NewEncoder(&buf).Encode(body))
	}
	req := httptest.NewRequest(method, path, &buf)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	if out != nil && w.Code < 300 {
		require.NoError(f.t, json.Unmarshal(w.Body.Bytes(), out), w.Body.String())
	}
	if w.Code >= 400 {
		var e struct {
			Error struct{ Code, Message string }
		}
		require.NoError(f.t, json.Unmarshal(w.Body.Bytes(), &e), "an error in the contract's shape: %s", w.Body.String())
		require.NotEmpty(f.t, e.Error.Code)
	}
	return w.Code
}

// dlq lists every queue's dead-letter depth; dlq/{queue} shows its
// messages, oldest first, without consuming them; redrive moves them back
// to the work queue in their groups, up to a limit, and says what is left;
// a redrive of an empty dead-letter queue moves nothing.
func TestDeadLetterQueuesListedAndRedriven(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.ops.Redriver = f.queue
	f.onboard("r1")
	require.NoError(t, f.queue.Send(ctx, queues.ApplySmallDLQ, `{"retailer_id":"r1","generation":3,"seq":0}`, "r1#0", "r1:3:0"))
	require.NoError(t, f.queue.Send(ctx, queues.ApplySmallDLQ, `{"retailer_id":"r1","generation":3,"seq":1}`, "r1#1", "r1:3:1"))
	require.NoError(t, f.queue.Send(ctx, queues.WebhooksDLQ, "not json", "", ""))

	var all ops.DeadLetterQueuesJSON
	require.Equal(t, http.StatusOK, f.request(http.MethodGet, "/v1/admin/dlq", adminToken, nil, &all))
	depths := map[string]int{}
	for _, q := range all.Queues {
		depths[q.Queue+" "+q.DLQ] = q.Depth
	}
	require.Equal(t, map[string]int{"analytics analytics-dlq": 0, "webhooks webhooks-dlq": 1, "arrivals arrivals-dlq": 0,
		"diff-jobs diff-jobs-dlq.fifo": 0, "apply-small apply-small-dlq.fifo": 2, "apply-large apply-large-dlq.fifo": 0,
		"reconcile-jobs reconcile-jobs-dlq": 0}, depths)

	var list ops.DeadLettersJSON
	require.Equal(t, http.StatusOK, f.request(http.MethodGet, "/v1/admin/dlq/apply-small?limit=1", adminToken, nil, &list))
	require.Equal(t, 2, list.Depth)
	require.Len(t, list.Messages, 1)
	require.Equal(t, "r1#0", list.Messages[0].GroupID)
	require.JSONEq(t, `{"retailer_id":"r1","generation":3,"seq":0}`, string(list.Messages[0].Body))
	require.NotNil(t, list.Messages[0].SentAt)
	require.Equal(t, http.StatusOK, f.request(http.MethodGet, "/v1/admin/dlq/webhooks", adminToken, nil, &list))
	require.Equal(t, `"not json"`, string(list.Messages[0].Body), "a body that is not JSON is shown as a string")
	require.Len(t, f.queue.Messages(queues.ApplySmallDLQ), 2, "listing consumes nothing")

	var moved ops.RedriveResponse
	require.Equal(t, http.StatusOK, f.request(http.MethodPost, "/v1/admin/dlq/apply-small/redrive", adminToken, map[string]int{"limit": 1}, &moved))
	require.Equal(t, ops.RedriveResponse{Queue: "apply-small", Moved: 1, Left: 1}, moved)
	require.Equal(t, http.StatusOK, f.request(http.MethodPost, "/v1/admin/dlq/apply-small/redrive", adminToken, nil, &moved))
	require.Equal(t, ops.RedriveResponse{Queue: "apply-small", Moved: 1, Left: 0}, moved)
	back := f.queue.Messages(queues.ApplySmall)
	require.Len(t, back, 2)
	require.Equal(t, []string{"r1#0", "r1#1"}, []string{back[0].GroupID, back[1].GroupID})
	require.Equal(t, http.StatusOK, f.request(http.MethodPost, "/v1/admin/dlq/apply-small/redrive", adminToken, nil, &moved))
	require.Equal(t, ops.RedriveResponse{Queue: "apply-small", Moved: 0, Left: 0}, moved, "nothing left: a second redrive is harmless")

	require.Equal(t, http.StatusNotFound, f.request(http.MethodGet, "/v1/admin/dlq/nope", adminToken, nil, nil))
	require.Equal(t, http.StatusNotFound, f.request(http.MethodPost, "/v1/admin/dlq/nope/redrive", adminToken, nil, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodGet, "/v1/admin/dlq/webhooks?limit=0", adminToken, nil, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodPost, "/v1/admin/dlq/webhooks/redrive", adminToken, map[string]int{"limit": 0}, nil))
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodPost, "/v1/admin/dlq/webhooks/redrive", adminToken, map[string]any{"max": 1}, nil))
	for _, path := range []string{"/v1/admin/dlq", "/v1/admin/dlq/webhooks"} {
		require.Equal(t, http.StatusUnauthorized, f.request(http.MethodGet, path, "", nil, nil))
		require.Equal(t, http.StatusForbidden, f.request(http.MethodGet, path, "token-r1", nil, nil))
	}
	require.Equal(t, http.StatusForbidden, f.request(http.MethodPost, "/v1/admin/dlq/webhooks/redrive", "token-r1", nil, nil))
	f.ops.Redriver = nil
	require.Equal(t, http.StatusServiceUnavailable, f.request(http.MethodPost, "/v1/admin/dlq/webhooks/redrive", adminToken, nil, nil))
	require.Len(t, f.queue.Messages(queues.WebhooksDLQ), 1)
}

// replay writes a retailer's events since a time back into its outbox (the
// relay publishes them under their first ids); while they wait, a second
// replay adds nothing; a time after every event replays nothing.
func TestReplayWritesEventsAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.onboard("r1")
	f.onboard("r2")
	since := time.Now().Add(-time.Minute).UTC()
	f.upload("r1", catalogCSV) // two chunks, then applied
	f.upload("r2", catalogCSV)
	published := func() int {
		n, err := f.store.DrainOutbox(ctx, 0, catalog.OutboxFilter{}, 100, func(_ context.Context, es []catalog.OutboxEntry) ([]bool, error) {
			done := make([]bool, len(es))
			for i := range done {
				done[i] = true
			}
			return done, nil
		})
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 6, published())

	var got ops.ReplayResponse
	require.Equal(t, http.StatusAccepted, f.request(http.MethodPost, "/v1/admin/retailers/r1/replay", adminToken,
		map[string]string{"since": since.Format(time.RFC3339Nano)}, &got))
	require.Equal(t, ops.ReplayResponse{RetailerID: "r1", Since: since, Changes: 2, Lifecycle: 1}, got)
	require.Equal(t, http.StatusAccepted, f.request(http.MethodPost, "/v1/admin/retailers/r1/replay", adminToken,
		map[string]string{"since": since.Format(time.RFC3339)}, &got))
	require.Zero(t, got.Changes+got.Lifecycle, "the replayed events still wait: not written twice")
	for _, e := range pgstoretest.Outbox(t, f.store) {
		require.Equal(t, "r1", e.RetailerID, "only r1's events")
	}
	require.Equal(t, 3, published())
	require.Equal(t, http.StatusAccepted, f.request(http.MethodPost, "/v1/admin/retailers/r1/replay", adminToken,
		map[string]string{"since": time.Now().Add(time.Hour).Format(time.RFC3339)}, &got))
	require.Zero(t, got.Changes+got.Lifecycle)

	for _, bad := range []map[string]string{{}, {"since": "yesterday"}, {"since": "2026-12-01"}} {
		require.Equal(t, http.StatusBadRequest, f.request(http.MethodPost, "/v1/admin/retailers/r1/replay", adminToken, bad, nil), "%v", bad)
	}
	require.Equal(t, http.StatusBadRequest, f.request(http.MethodPost, "/v1/admin/retailers/bad%20id/replay", adminToken, map[string]string{"since": since.Format(time.RFC3339)}, nil))
	require.Equal(t, http.StatusNotFound, f.request(http.MethodPost, "/v1/admin/retailers/nobody/replay", adminToken, map[string]string{"since": since.Format(time.RFC3339)}, nil))
	require.Equal(t, http.StatusUnauthorized, f.request(http.MethodPost, "/v1/admin/retailers/r1/replay", "", map[string]string{"since": since.Format(time.RFC3339)}, nil))
	require.Equal(t, http.StatusForbidden, f.request(http.MethodPost, "/v1/admin/retailers/r1/replay", "token-r1", map[string]string{"since": since.Format(time.RFC3339)}, nil))
}
