// Command arrival is the arrival Lambda: S3 events of uploads (through the
// arrivals queue) are recorded and their diff jobs queued on diff-jobs.fifo,
// one message group per retailer.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/ingest/arrival/arrivalwiring"
	"github.com/retailcatalog/catalog/functions/platform/config"
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
	h, err := arrivalwiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
