// Package applywiring builds the apply function (apply-small and
// apply-large run it) from its configuration: New, the one constructor the
// Lambda entry point calls, opens the adapters and hands them to Build,
// which the local stack calls with its own.
package applywiring

import (
	"context"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/publish/relay/relaywiring"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// RefusedRetry is when the apply tries again a chunk the database refused
// (CATALOG_BACKOFF_BASE, doubling), on either apply queue.
func RefusedRetry(c *config.Config, v retry.Visibility) *apply.RefusedRetry {
	return &apply.RefusedRetry{Schedule: c.Retry(), Queue: v, QueueURLs: []string{c.ApplySmallQueueURL, c.ApplyLargeQueueURL}}
}

// Deps are the adapters the apply handler uses.
type Deps struct {
	Stores     *pgstore.Stores
	Blobs      apply.Blobs
	Jobs       queue.Sender     // an undo's diff job (I10)
	Visibility retry.Visibility // the refused chunks' retry
	// Events is the fast path of change events (relaywiring.FastPath);
	// nil leaves them to the relay's sweeper.
	Events  apply.Flusher
	Logger  *slog.Logger
	Metrics *metrics.Recorder // nil: none
}

// Build builds the apply handler from its configuration and adapters.
func Build(c *config.Config, d Deps) *apply.Handler {
	h := apply.New(d.Stores, d.Blobs, d.Logger)
	h.MaxAttempts = c.ApplyAttempts
	h.Jobs = c.DiffJobs(d.Jobs)
	h.Refused = RefusedRetry(c, d.Visibility)
	h.Events = d.Events
	h.Metrics = d.Metrics
	return h
}

// New builds the apply Lambda's handler of chunk messages: the stores, the
// bucket, the change-events publisher, the SQS sender and visibility it
// uses, and its usage meter.
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
	pub, err := a.Publisher(ctx)
	if err != nil {
		return nil, err
	}
	sender, err := a.Sender(ctx)
	if err != nil {
		return nil, err
	}
	visibility, err := a.Visibility(ctx)
	if err != nil {
		return nil, err
	}
	log := c.Logger()
	h := Build(c, Deps{Stores: stores, Blobs: blobs, Jobs: sender, Visibility: visibility,
		Events:  relaywiring.FastPath(c, relaywiring.Deps{Stores: stores, Blobs: blobs, Publisher: pub, Logger: log}),
		Logger:  log,
		Metrics: c.Metrics("apply")})
	// apply-small and apply-large run this code: both meter as "apply".
	meter := config.Meter(c, stores, "apply", 1024, 0, log)
	return metering.Lambda(meter, h.HandleSQS), nil
}
