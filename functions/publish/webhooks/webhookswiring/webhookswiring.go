// Package webhookswiring builds the webhooks consumer from its
// configuration: the one constructor the Lambda entry point calls.
package webhookswiring

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/adapters/lambdainvoke"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/publish/webhooks"
)

// Config is the webhooks consumer's configuration.
func Config(c *config.Config, box *webhook.SecretBox) webhooks.Config {
	return webhooks.Config{QueueURL: c.WebhooksQueueURL, Retry: c.Retry(), Policy: c.WebhookPolicy(), Secrets: box}
}

// Poster is what makes the webhooks consumer's POSTs: the webhook-sender
// function when CATALOG_WEBHOOK_SENDER names one (AWS), else nil (in
// process).
func Poster(ctx context.Context, a *connect.Adapters) (webhooks.Poster, error) {
	if a.Config.WebhookSender == "" {
		return nil, nil
	}
	cfg, err := a.AWS(ctx)
	if err != nil {
		return nil, err
	}
	return lambdainvoke.NewPoster(lambdainvoke.NewClient(cfg, ""), a.Config.WebhookSender), nil
}

// New builds the webhooks Lambda's handler of change events: the stores,
// the webhook secrets' box, the SQS visibility and the poster it uses, and
// its usage meter.
func New(ctx context.Context, c *config.Config) (func(context.Context, lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error), error) {
	a := connect.New(c)
	stores, err := a.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	box, err := a.WebhookSecrets(ctx)
	if err != nil {
		return nil, err
	}
	vis, err := a.Visibility(ctx)
	if err != nil {
		return nil, err
	}
	poster, err := Poster(ctx, a)
	if err != nil {
		return nil, err
	}
	wc := Config(c, box)
	wc.Poster = poster // nil: in process
	h := webhooks.New(wc, stores, vis, c.Logger())
	h.Metrics = c.Metrics("webhooks")
	// The analytics and webhooks consumers meter as "consumers" (DESIGN 10).
	meter := config.Meter(c, stores, "consumers", 512, 0, c.Logger())
	return metering.Lambda(meter, h.HandleSQS), nil
}
