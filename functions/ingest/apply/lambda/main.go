// Command apply is the apply Lambda (deployed twice: apply-small and
// apply-large), started by batches from a FIFO chunk queue.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/ingest/apply/applywiring"
	"github.com/retailcatalog/catalog/functions/platform/config"
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
	h, err := applywiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
