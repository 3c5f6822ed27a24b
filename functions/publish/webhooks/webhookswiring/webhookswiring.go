// Package webhookswiring builds the webhooks consumer from its
// configuration: New, the one constructor the Lambda entry point calls,
// opens the adapters and hands them to Build, which the local stack calls
// with its own.
package webhookswiring

import (
	"context"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/adapters/lambdainvoke"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/publish/webhooks"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Config is the webhooks consumer's configuration.
func Config(c *config.Config, box *webhook.SecretBox) webhooks.Config {
	return webhooks.Config{QueueURL: c.WebhooksQueueURL, Retry: c.Retry(), Policy: c.WebhookPolicy(), Secrets: box, Timeout: c.WebhookTimeout}
}

// Deps are the adapters the webhooks consumer uses.
type Deps struct {
	Stores     *pgstore.Stores
	Secrets    *webhook.SecretBox // opens the webhooks' secrets
	Visibility retry.Visibility   // the failed deliveries' retry
	Poster     webhooks.Poster    // nil: the deliveries are made in process
	Logger     *slog.Logger
	Metrics    *metrics.Recorder // nil: none
}

// Build builds the webhooks consumer from its configuration and adapters.
func Build(c *config.Config, d Deps) *webhooks.Handler {
	wc := Config(c, d.Secrets)
	wc.Poster = d.Poster
	h := webhooks.New(wc, d.Stores, d.Visibility, d.Logger)
	h.Metrics = d.Metrics
	return h
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
	h := Build(c, Deps{Stores: stores, Secrets: box, Visibility: vis, Poster: poster, Logger: c.Logger(), Metrics: c.Metrics("webhooks")})
	// The analytics and webhooks consumers meter as "consumers" (DESIGN 10).
	meter := config.Meter(c, stores, "consumers", 512, 0, c.Logger())
	return metering.Lambda(meter, h.HandleSQS), nil
}
