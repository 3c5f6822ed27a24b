package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// SetWebhook saves a retailer's webhook (the secret already sealed),
// replacing the one it had.
func (c *Control) SetWebhook(ctx context.Context, w catalog.Webhook) error {
	if _, err := c.pool.Exec(ctx, q("set_webhook"), w.RetailerID, w.URL, w.SecretSealed); err != nil {
		return fmt.Errorf("set webhook of %s: %w", w.RetailerID, err)
	}
	return nil
}

// Webhook returns a retailer's webhook; catalog.ErrNotFound when it has none.
func (c *Control) Webhook(ctx context.Context, retailerID string) (catalog.Webhook, error) {
	var w catalog.Webhook
	err := c.pool.QueryRow(ctx, q("get_webhook"), retailerID).Scan(&w.RetailerID, &w.URL, &w.SecretSealed, &w.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, catalog.Errorf(catalog.ErrNotFound, "webhook_not_found", "retailer %q has no webhook", retailerID)
	}
	if err != nil {
		return w, fmt.Errorf("get webhook of %s: %w", retailerID, err)
	}
	return w, nil
}

// DeleteWebhook removes a retailer's webhook (nothing when it has none).
func (c *Control) DeleteWebhook(ctx context.Context, retailerID string) error {
	if _, err := c.pool.Exec(ctx, q("delete_webhook"), retailerID); err != nil {
		return fmt.Errorf("delete webhook of %s: %w", retailerID, err)
	}
	return nil
}

// SetWebhook is Control.SetWebhook.
func (s *Stores) SetWebhook(ctx context.Context, w catalog.Webhook) error {
	return s.Control.SetWebhook(ctx, w)
}

// Webhook is Control.Webhook.
func (s *Stores) Webhook(ctx context.Context, retailerID string) (catalog.Webhook, error) {
	return s.Control.Webhook(ctx, retailerID)
}

// DeleteWebhook is Control.DeleteWebhook.
func (s *Stores) DeleteWebhook(ctx context.Context, retailerID string) error {
	return s.Control.DeleteWebhook(ctx, retailerID)
}
