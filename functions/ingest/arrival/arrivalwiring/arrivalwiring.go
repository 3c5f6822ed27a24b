// Package arrivalwiring builds the arrival function from its
// configuration: the one constructor the Lambda entry point calls.
package arrivalwiring

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/arrival"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
)

// Config is the arrival handler's configuration.
func Config(c *config.Config) arrival.Config {
	return arrival.Config{DiffQueueURL: c.DiffQueueURL, Grace: c.UploadGrace}
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
	h := arrival.New(Config(c), stores, sender, c.Logger())
	h.Metrics = c.Metrics("arrival")
	meter := config.Meter(c, stores, "arrival", 256, 0, c.Logger())
	return metering.Lambda(meter, h.HandleSQS), nil
}
