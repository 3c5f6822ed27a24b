// Package relaywiring builds the relay's scheduled sweep from its
// configuration: New, the one constructor the Lambda entry point calls,
// opens the adapters and hands them to Build, which the local stack calls
// with its own. FastPath is the relay the diff and the apply publish
// through right after they commit.
package relaywiring

import (
	"context"
	"log/slog"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/publish/relay"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Config is the relay's configuration.
func Config(c *config.Config) relay.Config {
	return relay.Config{SweepAge: c.RelaySweepAge}
}

// Deps are the adapters the relay uses.
type Deps struct {
	Stores    *pgstore.Stores
	Blobs     relay.Blobs
	Publisher topic.Publisher // the change-events topic
	Logger    *slog.Logger
	Metrics   *metrics.Recorder // nil: none
}

// Build builds the relay from its configuration and adapters.
func Build(c *config.Config, d Deps) *relay.Relay {
	r := relay.New(Config(c), d.Stores, d.Blobs, d.Publisher, d.Logger)
	r.Metrics = d.Metrics
	return r
}

// FastPath is the relay a function that commits change or lifecycle events
// (the diff, the apply) publishes them through right after its commit; it
// records no metrics (the sweep does).
func FastPath(c *config.Config, d Deps) *relay.Relay {
	d.Metrics = nil
	return Build(c, d)
}

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
	r := Build(c, Deps{Stores: stores, Blobs: blobs, Publisher: pub, Logger: c.Logger(), Metrics: c.Metrics("relay")})
	return metering.Scheduled(meter, r.HandleSweep), nil
}
