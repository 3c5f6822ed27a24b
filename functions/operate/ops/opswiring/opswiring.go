// Package opswiring builds the operations function (DESIGN 9) from its
// configuration: the one constructor the Lambda entry point calls.
package opswiring

import (
	"context"
	"encoding/json"

	"github.com/retailcatalog/catalog/functions/adapters/sqsqueue"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
)

// Config is the ops function's configuration.
func Config(c *config.Config) ops.Config {
	return ops.Config{
		AdminToken: c.AdminToken, StallAfter: c.StuckAfter, MaxRedrives: c.StuckMaxRedrives,
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

// New builds the ops Lambda's handler of its every invocation (admin
// routes, reconcile-jobs, schedules): the stores with the storefront's
// replicas, the bucket and the SQS client it uses.
func New(ctx context.Context, c *config.Config) (func(context.Context, json.RawMessage) (any, error), error) {
	a := connect.New(c)
	log := c.Logger().With("function", "ops")
	// The storefront's replicas too: why compares what they serve with the writer.
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
	queues := struct {
		*sqsqueue.Sender
		*sqsqueue.Inspector
	}{sqsqueue.NewSender(client), sqsqueue.NewInspector(client)}
	oc := Config(c)
	if oc.AdminToken, err = a.AdminToken(ctx); err != nil {
		return nil, err
	}
	h := ops.New(oc, stores, blobs, queues, log)
	h.Metrics = c.Metrics("ops")
	h.Redriver = sqsqueue.NewRedriver(client)
	return h.Invoke, nil
}
