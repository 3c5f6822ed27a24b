package apiclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/retailcatalog/catalog/functions/operate/ops"
)

// DeadLetterQueues lists every queue's dead-letter queue and its depth (GET /v1/admin/dlq).
func (c *Client) DeadLetterQueues(ctx context.Context, adminToken string) ([]ops.DeadLetterQueueJSON, error) {
	var out ops.DeadLetterQueuesJSON
	err := c.Do(ctx, http.MethodGet, "/v1/admin/dlq", adminToken, nil, &out)
	return out.Queues, err
}

// DeadLetters shows up to limit messages of a queue's dead-letter queue
// without consuming them (GET /v1/admin/dlq/{queue}).
func (c *Client) DeadLetters(ctx context.Context, adminToken, queue string, limit int) (ops.DeadLettersJSON, error) {
	var out ops.DeadLettersJSON
	err := c.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/admin/dlq/%s?limit=%d", url.PathEscape(queue), limit), adminToken, nil, &out)
	return out, err
}

// Redrive moves up to limit (0: every) dead letters of a queue back to it,
// for as long as one request may take (POST /v1/admin/dlq/{queue}/redrive).
func (c *Client) Redrive(ctx context.Context, adminToken, queue string, limit int) (ops.RedriveResponse, error) {
	body := map[string]any{}
	if limit > 0 {
		body["limit"] = limit
	}
	var out ops.RedriveResponse
	err := c.Do(ctx, http.MethodPost, "/v1/admin/dlq/"+url.PathEscape(queue)+"/redrive", adminToken, body, &out)
	return out, err
}

// Replay writes a retailer's change events since a time back into its
// outbox (POST /v1/admin/retailers/{id}/replay).
func (c *Client) Replay(ctx context.Context, adminToken, retailerID string, since time.Time) (ops.ReplayResponse, error) {
	var out ops.ReplayResponse
	err := c.Do(ctx, http.MethodPost, "/v1/admin/retailers/"+url.PathEscape(retailerID)+"/replay", adminToken,
		map[string]string{"since": since.UTC().Format(time.RFC3339Nano)}, &out)
	return out, err
}

// ParkedOutbox lists up to limit parked change events, of a retailer or
// ("") of every one (GET /v1/admin/outbox/parked).
func (c *Client) ParkedOutbox(ctx context.Context, adminToken, retailerID string, limit int) (ops.ParkedOutboxJSON, error) {
	q := url.Values{"limit": {fmt.Sprint(limit)}}
	if retailerID != "" {
		q.Set("retailer_id", retailerID)
	}
	var out ops.ParkedOutboxJSON
	err := c.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked?"+q.Encode(), adminToken, nil, &out)
	return out, err
}

// RedriveOutbox puts up to limit (0: every) parked change events, of a
// retailer or ("") of every one, back in their outboxes for the relay's
// sweeper (POST /v1/admin/outbox/redrive).
func (c *Client) RedriveOutbox(ctx context.Context, adminToken, retailerID string, limit int) (ops.RedriveResponse, error) {
	body := map[string]any{}
	if limit > 0 {
		body["limit"] = limit
	}
	if retailerID != "" {
		body["retailer_id"] = retailerID
	}
	var out ops.RedriveResponse
	err := c.Do(ctx, http.MethodPost, "/v1/admin/outbox/redrive", adminToken, body, &out)
	return out, err
}
