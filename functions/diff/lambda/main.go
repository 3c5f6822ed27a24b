// Command diff is the diff Lambda, started by S3 events through the diff-jobs queue.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/diff"
	"github.com/retailcatalog/catalog/functions/s3blob"
	"github.com/retailcatalog/catalog/functions/sqsqueue"
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
	s3c, err := s3blob.NewClient(ctx, s3blob.Options{Region: cfg.Region})
	if err != nil {
		return err
	}
	sqsc, err := sqsqueue.NewClient(ctx, sqsqueue.Options{Region: cfg.Region})
	if err != nil {
		return err
	}
	h := diff.New(diff.Config{
		InflightCap: cfg.InflightCap, LargeThreshold: cfg.LargeThresholdRows,
		SmallQueueURL: cfg.ApplySmallQueueURL, LargeQueueURL: cfg.ApplyLargeQueueURL,
		MaxUploadBytes: cfg.MaxUploadBytes,
	}, stores, s3blob.New(s3c, cfg.Bucket), sqsqueue.NewSender(sqsc), cfg.Logger())
	lambda.Start(h.HandleSQS)
	return nil
}
