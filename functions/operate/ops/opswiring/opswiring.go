// Package opswiring builds the operations function (DESIGN 9) from its
// configuration: New, the one constructor the Lambda entry point calls,
// opens the adapters and hands them to Build, which the local stack calls
// with its own.
package opswiring

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/retailcatalog/catalog/functions/adapters/sqsqueue"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Config is the ops function's configuration.
func Config(c *config.Config) ops.Config {
	return ops.Config{
		AdminToken: c.AdminToken, StallAfter: c.StuckAfter, MaxRedrives: c.StuckMaxRedrives, TombstoneAfter: c.TombstoneAfter,
		LargeThreshold: c.LargeThresholdRows, InflightCap: c.InflightCap, Region: c.Region,
		Queues: ops.Queues{
			Analytics: c.AnalyticsQueueURL, AnalyticsDLQ: c.AnalyticsDLQURL, Webhooks: c.WebhooksQueueURL, WebhooksDLQ: c.WebhooksDLQURL,

			Arrivals: c.ArrivalsQueueURL, ArrivalsDLQ: c.ArrivalsDLQURL,
			DiffJobs: c.DiffQueueURL, DiffJobsDLQ: c.DiffDLQURL,
			ApplySmall: c.ApplySmallQueueURL, ApplySmallDLQ: c.ApplySmallDLQURL,
			ApplyLarge: c.ApplyLargeQueueURL, ApplyLargeDLQ: c.ApplyLargeDLQURL,
			Reconcile: c.ReconcileQueueURL, ReconcileDLQ: c.ReconcileDLQURL,
		},
	}
}

// Deps are the adapters the ops function uses.
type Deps struct {
	Stores     *pgstore.Stores // with the storefront's replicas: why compares what they serve with the writer
	Blobs      ops.Blobs
	SQS        *sqs.Client // sends, inspects and redrives the pipeline's queues
	AdminToken string      // resolved (connect.Adapters.AdminToken)
	Logger     *slog.Logger
	Metrics    *metrics.Recorder // nil: none
}

// Build builds the ops handler (admin routes, reconcile-jobs, schedules)
// from its configuration and adapters.
func Build(c *config.Config, d Deps) *ops.Handler {
	queues := struct {
		*sqsqueue.Sender
		*sqsqueue.Inspector
	}{sqsqueue.NewSender(d.SQS), sqsqueue.NewInspector(d.SQS)}
	oc := Config(c)
	oc.AdminToken = d.AdminToken
	h := ops.New(oc, d.Stores, d.Blobs, queues, d.Logger)
	h.Metrics = d.Metrics
	h.Redriver = sqsqueue.NewRedriver(d.SQS)
	h.Mover = d.Stores
	return h
}

// New builds the ops Lambda's handler of its every invocation (admin
// routes, reconcile-jobs, schedules): the stores with the storefront's
// replicas, the bucket and the SQS client it uses.
func New(ctx context.Context, c *config.Config) (func(context.Context, json.RawMessage) (any, error), error) {
	a := connect.New(c)
	log := c.Logger().With("function", "ops")
	stores, err := a.OpenReadStores(ctx, log)
	if err != nil {
		return nil, err
	}
	blobs, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	client, err := a.SQSClient(ctx)
	if err != nil {
		return nil, err
	}
	token, err := a.AdminToken(ctx)
	if err != nil {
		return nil, err
	}
	h := Build(c, Deps{Stores: stores, Blobs: blobs, SQS: client, AdminToken: token, Logger: log, Metrics: c.Metrics("ops")})
	return h.Invoke, nil
}
