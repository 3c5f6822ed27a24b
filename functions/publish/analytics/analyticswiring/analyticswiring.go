// Package analyticswiring builds the analytics consumer from its
// configuration: New, the one constructor the Lambda entry point calls,
// opens the adapters and hands them to Build, which the local stack calls
// with its own.
package analyticswiring

import (
	"context"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Config is the analytics consumer's configuration.
func Config(c *config.Config) analytics.Config {
	return analytics.Config{QueueURL: c.AnalyticsQueueURL, Retry: c.Retry()}
}

// Deps are the adapters the analytics consumer uses.
type Deps struct {
	Stores     *pgstore.Stores
	Blobs      analytics.Blobs
	Visibility retry.Visibility // the failed batches' retry
	Logger     *slog.Logger
}

// Build builds the analytics consumer from its configuration and adapters.
func Build(c *config.Config, d Deps) *analytics.Handler {
	return analytics.New(Config(c), d.Stores, d.Blobs, d.Visibility, d.Logger)
}

// New builds the analytics Lambda's handler of change events: the stores,
// the bucket and the SQS visibility it uses, and its usage meter.
func New(ctx context.Context, c *config.Config) (func(context.Context, lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error), error) {
	a := connect.New(c)
	stores, err := a.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	blobs, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	vis, err := a.Visibility(ctx)
	if err != nil {
		return nil, err
	}
	h := Build(c, Deps{Stores: stores, Blobs: blobs, Visibility: vis, Logger: c.Logger()})
	// The analytics and webhooks consumers meter as "consumers" (DESIGN 10).
	meter := config.Meter(c, stores, "consumers", 512, 0, c.Logger())
	return metering.Lambda(meter, h.HandleSQS), nil
}
