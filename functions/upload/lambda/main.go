// Command upload is the upload Lambda: the admin and retailer routes behind API Gateway.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/costs"
	"github.com/retailcatalog/catalog/functions/httpapi"
	"github.com/retailcatalog/catalog/functions/metering"
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
	box, err := cfg.WebhookSecrets(ctx)
	if err != nil {
		return err
	}
	deployment, err := config.CostDeployment(os.Getenv)
	if err != nil {
		return err
	}
	meter, err := config.Meter(os.Getenv, stores, "upload", 512, 0, log)
	if err != nil {
		return err
	}
	uc := cfg.Upload()
	uc.Costs = &upload.CostsConfig{Usage: stores, Pricer: costs.DefaultPricer(), Deployment: deployment, ReadsNote: metering.ReadsNote(), Reports: blobs}
	h := upload.New(uc, stores, blobs, sender, log)
	h.Metrics = cfg.Metrics("upload")
	h.EnableWebhooks(upload.Webhooks{Store: stores, Policy: cfg.WebhookPolicy(), Secrets: box})
	lambda.Start(httpapi.LambdaHandler(metering.HTTP(meter, h)))
	return nil
}
