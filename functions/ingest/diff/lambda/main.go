// Command diff is the diff Lambda, started by S3 events through the diff-jobs queue.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/ingest/diff/diffwiring"
	"github.com/retailcatalog/catalog/functions/platform/config"
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
	h, err := diffwiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
