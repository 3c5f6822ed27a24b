package control

import (
	"context"
	"errors"
	"net/http"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// WebhookStore keeps retailers' webhooks. pgstore.Stores implements it.
type WebhookStore interface {
	// SetWebhook saves a retailer's webhook (its secret sealed), replacing the old one.
	SetWebhook(ctx context.Context, w catalog.Webhook) error
	// Webhook returns a retailer's webhook; catalog.ErrNotFound when it has none.
	Webhook(ctx context.Context, retailerID string) (catalog.Webhook, error)
	// DeleteWebhook removes a retailer's webhook (nothing when it has none).
	DeleteWebhook(ctx context.Context, retailerID string) error
}

// Webhooks is what the webhook routes need: where webhooks are kept, which
// URLs they may have, and the box their secrets are sealed in.
type Webhooks struct {
	Store   WebhookStore
	Policy  webhook.Policy
	Secrets *webhook.SecretBox
}

// EnableWebhooks serves the webhook routes of DESIGN 5:
// PUT, GET and DELETE /v1/retailers/{retailer_id}/webhook.
func (h *Handler) EnableWebhooks(wh Webhooks) {
	h.webhooks = wh
	for pattern, handle := range map[string]http.HandlerFunc{
		"PUT /v1/retailers/{retailer_id}/webhook":    h.putWebhook,
		"GET /v1/retailers/{retailer_id}/webhook":    h.getWebhook,
		"DELETE /v1/retailers/{retailer_id}/webhook": h.deleteWebhook,
	} {
		h.routes.Handle(pattern, handle)
	}
}

type webhookJSON struct {
	URL string `json:"url"`
}

// putWebhook saves a webhook: a URL the policy accepts (400
// invalid_webhook_url otherwise: https to public addresses; the local stack
// also http://127.0.0.1:<port>) and a secret of 16 to 256 bytes, sealed.
func (h *Handler) putWebhook(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req struct {
		URL    string `json:"url"`
		Secret string `json:"secret"`
	}
	if err := httpapi.DecodeJSON(r, 1<<14, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if _, err := h.webhooks.Policy.CheckURL(r.Context(), req.URL); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if err := webhook.CheckSecret(req.Secret); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	sealed, err := h.webhooks.Secrets.Seal(retailer.ID, []byte(req.Secret))
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if err := h.webhooks.Store.SetWebhook(r.Context(), catalog.Webhook{RetailerID: retailer.ID, URL: req.URL, SecretSealed: sealed}); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "webhook saved", "retailer_id", retailer.ID, "url", req.URL)
	httpapi.WriteJSON(w, http.StatusOK, webhookJSON{URL: req.URL})
}

// getWebhook shows a webhook's URL, never its secret.
func (h *Handler) getWebhook(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	hook, err := h.webhooks.Store.Webhook(r.Context(), retailer.ID)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, webhookJSON{URL: hook.URL})
}

// deleteWebhook removes a webhook: 204, also when there was none.
func (h *Handler) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if err := h.webhooks.Store.DeleteWebhook(r.Context(), retailer.ID); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "webhook removed", "retailer_id", retailer.ID)
	w.WriteHeader(http.StatusNoContent)
}
