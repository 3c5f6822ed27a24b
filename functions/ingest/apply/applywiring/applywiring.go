// Package applywiring builds the apply function (apply-small and
// apply-large run it) from its configuration: the one constructor the
// Lambda entry point calls.
package applywiring

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/relay"
)

// RefusedRetry is when the apply tries again a chunk the database refused
// (CATALOG_BACKOFF_BASE, doubling), on either apply queue.
func RefusedRetry(c *config.Config, v retry.Visibility) *apply.RefusedRetry {
	return &apply.RefusedRetry{Schedule: c.Retry(), Queue: v, QueueURLs: []string{c.ApplySmallQueueURL, c.ApplyLargeQueueURL}}
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
	log := c.Logger()
	h := apply.New(stores, blobs, log)
	h.MaxAttempts = c.ApplyAttempts
	h.Jobs = c.DiffJobs(sender) // an undo's diff job (I10)
	visibility, err := a.Visibility(ctx)
	if err != nil {
		return nil, err
	}
	h.Refused = RefusedRetry(c, visibility)
	h.Events = relay.New(relay.Config{}, stores, blobs, pub, log) // the fast path of change events
	h.Metrics = c.Metrics("apply")
	// apply-small and apply-large run this code: both meter as "apply".
	meter := config.Meter(c, stores, "apply", 1024, 0, log)
	return metering.Lambda(meter, h.HandleSQS), nil
}
