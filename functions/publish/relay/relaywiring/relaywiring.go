// Package relaywiring builds the relay's scheduled sweep from its
// configuration: the one constructor the Lambda entry point calls.
package relaywiring

import (
	"context"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/publish/relay"
)

// New builds the relay Lambda's scheduled sweep of the outbox: the stores,
// the bucket and the change-events publisher it uses, and its usage meter.
func New(ctx context.Context, c *config.Config) (func(context.Context) error, error) {
	a := connect.New(c)
	stores, err := a.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	blobs, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	pub, err := a.Publisher(ctx)
	if err != nil {
		return nil, err
	}
	meter := config.Meter(c, stores, "relay", 512, 0, c.Logger())
	r := relay.New(relay.Config{}, stores, blobs, pub, c.Logger())
	r.Metrics = c.Metrics("relay")
	return metering.Scheduled(meter, r.HandleSweep), nil
}
