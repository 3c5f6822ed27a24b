// Package diffwiring builds the diff function from its configuration: New,
// the one constructor the Lambda entry point calls, opens the adapters and
// hands them to Build, which the local stack calls with its own.
package diffwiring

import (
	"context"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/publish/relay/relaywiring"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Config is the diff handler's configuration.
func Config(c *config.Config) diff.Config {
	return diff.Config{ChunkRows: c.ChunkRows, ChunkBytes: c.ChunkBytes, InflightCap: c.InflightCap, LargeThreshold: c.LargeThresholdRows,
		SmallQueueURL: c.ApplySmallQueueURL, LargeQueueURL: c.ApplyLargeQueueURL, MaxUploadBytes: c.MaxUploadBytes,
		MaxRowBytes: c.MaxRowBytes, MaxInflatedBytes: c.MaxInflatedBytes, MaxProducts: c.MaxProducts,
		SortMemoryBytes: c.SortMemoryBytes, SpillDir: c.SpillDir, JobQueueURL: c.DiffQueueURL, MaxAttempts: c.DiffAttempts,
		RetryBackoff: c.DiffRetryBackoff}
}

// Deps are the adapters the diff handler uses.
type Deps struct {
	Stores *pgstore.Stores
	Blobs  diff.Blobs
	Sender queue.Sender // the chunk messages (and the diff job's back-off)
	Jobs   queue.Sender // an undo's diff job (I10); on Lambda the same sender
	// Events is the fast path of lifecycle events (relaywiring.FastPath);
	// nil leaves them to the relay's sweeper.
	Events  diff.Flusher
	Logger  *slog.Logger
	Metrics *metrics.Recorder // nil: none
}

// Build builds the diff handler from its configuration and adapters.
func Build(c *config.Config, d Deps) *diff.Handler {
	h := diff.New(Config(c), d.Stores, d.Blobs, d.Sender, d.Logger)
	h.Events = d.Events
	h.Metrics = d.Metrics
	h.Jobs = c.DiffJobs(d.Jobs)
	return h
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
	h := Build(c, Deps{Stores: stores, Blobs: blobs, Sender: sender, Jobs: sender,
		Events:  relaywiring.FastPath(c, relaywiring.Deps{Stores: stores, Blobs: blobs, Publisher: pub, Logger: log}),
		Logger:  log,
		Metrics: c.Metrics("diff")})
	meter := config.Meter(c, stores, "diff", 3008, 0, log)
	return metering.Lambda(meter, h.HandleSQS), nil
}
