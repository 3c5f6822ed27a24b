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
	"github.com/retailcatalog/catalog/functions/s3blob"
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
	s3c, err := s3blob.NewClient(ctx, s3blob.Options{Region: cfg.Region})
	if err != nil {
		return err
	}
	lambda.Start(apply.New(stores, s3blob.New(s3c, cfg.Bucket), cfg.Logger()).HandleSQS)
	return nil
}
