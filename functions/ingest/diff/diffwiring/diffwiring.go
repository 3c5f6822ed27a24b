// Package diffwiring builds the diff function from its configuration: the
// one constructor the Lambda entry point calls (the local stack builds the
// handler from Config too).
package diffwiring

import (
	"context"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/publish/relay"
)

// Config is the diff handler's configuration.
func Config(c *config.Config) diff.Config {
	return diff.Config{ChunkRows: c.ChunkRows, ChunkBytes: c.ChunkBytes, InflightCap: c.InflightCap, LargeThreshold: c.LargeThresholdRows,
		SmallQueueURL: c.ApplySmallQueueURL, LargeQueueURL: c.ApplyLargeQueueURL, MaxUploadBytes: c.MaxUploadBytes,
		MaxInflatedBytes: c.MaxInflatedBytes, MaxProducts: c.MaxProducts,
		SortMemoryBytes: c.SortMemoryBytes, SpillDir: c.SpillDir, JobQueueURL: c.DiffQueueURL, MaxAttempts: c.DiffAttempts}
}

// New builds the diff Lambda's handler of diff-jobs messages: the stores,
// the bucket, the SQS sender and the change-events publisher it uses, and
// its usage meter.
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
	sender, err := a.Sender(ctx)
	if err != nil {
		return nil, err
	}
	pub, err := a.Publisher(ctx)
	if err != nil {
		return nil, err
	}
	log := c.Logger()
	h := diff.New(Config(c), stores, blobs, sender, log)
	h.Events = relay.New(relay.Config{}, stores, blobs, pub, log) // the fast path of lifecycle events
	h.Metrics = c.Metrics("diff")
	h.Jobs = c.DiffJobs(sender) // an undo's diff job (I10)
	meter := config.Meter(c, stores, "diff", 3008, 0, log)
	return metering.Lambda(meter, h.HandleSQS), nil
}
