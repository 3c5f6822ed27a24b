package catalog

import "time"

// Webhook is a retailer's webhook: where its lifecycle events are POSTed,
// and the secret that signs them, sealed (webhook.SecretBox): the
// database never holds it in the clear.
type Webhook struct {
	RetailerID   string
	URL          string
	SecretSealed []byte
	UpdatedAt    time.Time
}
