// Command relay is the relay Lambda's sweeper: started every minute by
// EventBridge Scheduler, it publishes the change events that have waited
// in the shards' outboxes for more than 30 s (their fast path failed, or a
// replay wrote them) to the change-events topic.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/relay"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
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
	pub, err := cfg.Publisher(ctx)
	if err != nil {
		return err
	}
	meter, err := config.Meter(os.Getenv, stores, "relay", 512, 0, cfg.Logger())
	if err != nil {
		return err
	}
	r := relay.New(relay.Config{}, stores, blobs, pub, cfg.Logger())
	r.Metrics = cfg.Metrics("relay")
	lambda.Start(metering.Scheduled(meter, r.HandleSweep))
	return nil
}
