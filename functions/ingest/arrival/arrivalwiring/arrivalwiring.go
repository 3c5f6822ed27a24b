// Package arrivalwiring builds the arrival function from its
// configuration: New, the one constructor the Lambda entry point calls,
// opens the adapters and hands them to Build, which the local stack calls
// with its own.
package arrivalwiring

import (
	"context"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/arrival"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Config is the arrival handler's configuration.
func Config(c *config.Config) arrival.Config {
	return arrival.Config{DiffQueueURL: c.DiffQueueURL, Grace: c.UploadGrace}
}

// Deps are the adapters the arrival handler uses.
type Deps struct {
	Stores  *pgstore.Stores
	Sender  queue.Sender // the diff jobs
	Logger  *slog.Logger
	Metrics *metrics.Recorder // nil: none
}

// Build builds the arrival handler from its configuration and adapters.
func Build(c *config.Config, d Deps) *arrival.Handler {
	h := arrival.New(Config(c), d.Stores, d.Sender, d.Logger)
	h.Metrics = d.Metrics
	return h
}

// New builds the arrival Lambda's handler of arrivals messages: the stores
// and the SQS sender it uses, and its usage meter.
func New(ctx context.Context, c *config.Config) (func(context.Context, lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error), error) {
	a := connect.New(c)
	stores, err := a.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	sender, err := a.Sender(ctx)
	if err != nil {
		return nil, err
	}
	h := Build(c, Deps{Stores: stores, Sender: sender, Logger: c.Logger(), Metrics: c.Metrics("arrival")})
	meter := config.Meter(c, stores, "arrival", 256, 0, c.Logger())
	return metering.Lambda(meter, h.HandleSQS), nil
}
