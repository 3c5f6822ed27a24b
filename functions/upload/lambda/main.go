// Command upload is the upload Lambda: the admin and retailer routes behind API Gateway.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/httpapi"
	"github.com/retailcatalog/catalog/functions/upload"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "upload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log := cfg.Logger()
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
	h := upload.New(cfg.Upload(), stores, blobs, sender, log)
	h.Metrics = cfg.Metrics("upload")
	lambda.Start(httpapi.LambdaHandler(h))
	return nil
}
