// Command ops is the operations Lambda (DESIGN 9): the admin routes (why,
// reconciliation) behind API Gateway, the reconcile-jobs queue, and the
// scheduled tasks (the stuck-generation sweeper, the daily reconciliation).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/ops"
	"github.com/retailcatalog/catalog/functions/sqsqueue"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "ops:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log := cfg.Logger().With("function", "ops")
	// The storefront's replicas too: why compares what they serve with the writer.
	stores, err := cfg.OpenReadStores(ctx, log)
	if err != nil {
		return err
	}
	blobs, err := cfg.Blobs(ctx)
	if err != nil {
		return err
	}
	client, err := cfg.SQSClient(ctx)
	if err != nil {
		return err
	}
	queues := struct {
		*sqsqueue.Sender
		*sqsqueue.Inspector
	}{sqsqueue.NewSender(client), sqsqueue.NewInspector(client)}
	h := ops.New(cfg.Ops(), stores, blobs, queues, log)
	h.Metrics = cfg.Metrics("ops")
	h.Redriver = sqsqueue.NewRedriver(client)
	lambda.Start(h.Invoke)
	return nil
}
