package inmem

import (
	"bytes"
	"context"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// SetWebhook saves a registered retailer's webhook, replacing its old one.
func (s *Store) SetWebhook(ctx context.Context, w catalog.Webhook) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.registered(w.RetailerID); err != nil {
		return err
	}
	if s.webhooks == nil {
		s.webhooks = map[string]catalog.Webhook{}
	}
	w.SecretSealed = bytes.Clone(w.SecretSealed)
	w.UpdatedAt = s.now()
	s.webhooks[w.RetailerID] = w
	return nil
}

// Webhook returns a retailer's webhook; catalog.ErrNotFound when it has none.
func (s *Store) Webhook(ctx context.Context, retailerID string) (catalog.Webhook, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.webhooks[retailerID]
	if !ok {
		return w, catalog.Errorf(catalog.ErrNotFound, "webhook_not_found", "retailer %q has no webhook", retailerID)
	}
	w.SecretSealed = bytes.Clone(w.SecretSealed)
	return w, nil
}

// DeleteWebhook removes a retailer's webhook.
func (s *Store) DeleteWebhook(ctx context.Context, retailerID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.webhooks, retailerID)
	return nil
}
