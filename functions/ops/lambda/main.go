// Command ops is the operations Lambda: the admin routes of DESIGN 9
// (why) behind API Gateway.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/httpapi"
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
	h := ops.New(cfg.Ops(), stores, blobs, sqsqueue.NewInspector(client), log)
	h.Metrics = cfg.Metrics("ops")
	lambda.Start(httpapi.LambdaHandler(h))
	return nil
}
