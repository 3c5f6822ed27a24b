package apiclient

import (
	"context"
	"net/http"

	"github.com/retailcatalog/catalog/functions/operate/ops"
)

// Collect collects one retailer, or ("") every one (POST /v1/admin/gc),
// and returns what went.
func (c *Client) Collect(ctx context.Context, adminToken, retailerID string) (ops.GCResult, error) {
	body := map[string]string{}
	if retailerID != "" {
		body["retailer_id"] = retailerID
	}
	var out ops.GCResult
	err := c.Do(ctx, http.MethodPost, "/v1/admin/gc", adminToken, body, &out)
	return out, err
}
