// Command arrival is the arrival Lambda: S3 events of uploads (through the
// arrivals queue) are recorded and their diff jobs queued on diff-jobs.fifo,
// one message group per retailer.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/arrival"
	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/metering"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "arrival:", err)
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
	sender, err := cfg.Sender(ctx)
	if err != nil {
		return err
	}
	h := arrival.New(cfg.Arrival(), stores, sender, cfg.Logger())
	h.Metrics = cfg.Metrics("arrival")
	meter, err := config.Meter(os.Getenv, stores, "arrival", 256, 0, cfg.Logger())
	if err != nil {
		return err
	}
	lambda.Start(metering.Lambda(meter, h.HandleSQS))
	return nil
}
