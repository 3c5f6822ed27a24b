// Command analytics is the analytics consumer Lambda: batches of change
// events from its queue (subscribed to the change-events topic) become
// Parquet files under analytics/changes/ for Athena.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/analytics"
	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/metering"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "analytics:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	stores, err := cfg.OpenStores(ctx)
	if err != nil {
		return err
	}
	blobs, err := cfg.Blobs(ctx)
	if err != nil {
		return err
	}
	vis, err := cfg.Visibility(ctx)
	if err != nil {
		return err
	}
	h := analytics.New(cfg.Analytics(), stores, blobs, vis, cfg.Logger())
	meter, err := config.Meter(os.Getenv, stores, "consumers", 512, 0, cfg.Logger())
	if err != nil {
		return err
	}
	lambda.Start(metering.Lambda(meter, h.HandleSQS))
	return nil
}
