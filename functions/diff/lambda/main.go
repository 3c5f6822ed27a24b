// Command diff is the diff Lambda, started by S3 events through the diff-jobs queue.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/diff"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/relay"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "diff:", err)
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
	sender, err := cfg.Sender(ctx)
	if err != nil {
		return err
	}
	pub, err := cfg.Publisher(ctx)
	if err != nil {
		return err
	}
	log := cfg.Logger()
	h := diff.New(cfg.Diff(), stores, blobs, sender, log)
	h.Events = relay.New(relay.Config{}, stores, blobs, pub, log) // the fast path of lifecycle events
	h.Metrics = cfg.Metrics("diff")
	h.Jobs = cfg.DiffJobs(sender) // an undo's diff job (I10)
	meter, err := config.Meter(os.Getenv, stores, "diff", 3008, 0, log)
	if err != nil {
		return err
	}
	lambda.Start(metering.Lambda(meter, h.HandleSQS))
	return nil
}
