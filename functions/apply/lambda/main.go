// Command apply is the apply Lambda (deployed twice: apply-small and
// apply-large), started by batches from a FIFO chunk queue.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/apply"
	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/relay"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "apply:", err)
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
	sender, err := cfg.Sender(ctx)
	if err != nil {
		return err
	}
	log := cfg.Logger()
	h := apply.New(stores, blobs, log)
	h.MaxAttempts = cfg.ApplyAttempts
	h.Jobs = cfg.DiffJobs(sender) // an undo's diff job (I10)
	visibility, err := cfg.Visibility(ctx)
	if err != nil {
		return err
	}
	h.Refused = cfg.RefusedRetry(visibility)
	h.Events = relay.New(relay.Config{}, stores, blobs, pub, log) // the fast path of change events
	h.Metrics = cfg.Metrics("apply")
	// apply-small and apply-large run this code: both meter as "apply".
	meter, err := config.Meter(os.Getenv, stores, "apply", 1024, 0, log)
	if err != nil {
		return err
	}
	lambda.Start(metering.Lambda(meter, h.HandleSQS))
	return nil
}
