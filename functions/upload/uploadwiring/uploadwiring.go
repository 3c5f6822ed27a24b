// Package uploadwiring builds the upload function (the admin and retailer
// routes, the cost reports among them) from its configuration: the one
// constructor the Lambda entry point calls.
package uploadwiring

import (
	"context"
	"fmt"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/connect"
	"github.com/retailcatalog/catalog/functions/costs"
	"github.com/retailcatalog/catalog/functions/httpapi"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/upload"
)

// Config is the upload routes' configuration.
func Config(c *config.Config) upload.Config {
	return upload.Config{AdminToken: c.AdminToken, UploadTTL: c.UploadTTL, DiffQueueURL: c.DiffQueueURL, Region: c.Region,
		ReservationsPerHour: c.ReservationsPerHour}
}

// CostDeployment parses CATALOG_COST_DEPLOYMENT (c.Metering.CostDeployment),
// the sizes of the shared resources the cost report's fixed costs come from
// ("shards=..."; see costs.ParseDeployment; the stack sets it from its
// parameters).
func CostDeployment(c *config.Config) (costs.Deployment, error) {
	d, err := costs.ParseDeployment(c.Metering.CostDeployment)
	if err != nil {
		return d, fmt.Errorf("CATALOG_COST_DEPLOYMENT: %w", err)
	}
	return d, nil
}

// New builds the upload Lambda's handler of API Gateway requests: the
// stores, the bucket, the SQS sender and the webhook secrets' box it uses,
// the cost reports, and its usage meter.
func New(ctx context.Context, c *config.Config) (func(context.Context, lambdaevents.APIGatewayV2HTTPRequest) (lambdaevents.APIGatewayV2HTTPResponse, error), error) {
	a := connect.New(c)
	log := c.Logger()
	stores, err := a.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	blobs, err := a.Blobs(ctx)
	if err != nil {
		return nil, err
	}
	sender, err := a.Sender(ctx)
	if err != nil {
		return nil, err
	}
	box, err := a.WebhookSecrets(ctx)
	if err != nil {
		return nil, err
	}
	deployment, err := CostDeployment(c)
	if err != nil {
		return nil, err
	}
	meter := config.Meter(c, stores, "upload", 512, 0, log)
	uc := Config(c)
	if uc.AdminToken, err = a.AdminToken(ctx); err != nil {
		return nil, err
	}
	uc.Costs = &upload.CostsConfig{Usage: stores, Pricer: costs.DefaultPricer(), Deployment: deployment, ReadsNote: metering.ReadsNote(), Reports: blobs}
	h := upload.New(uc, stores, blobs, sender, log)
	h.Metrics = c.Metrics("upload")
	h.EnableWebhooks(upload.Webhooks{Store: stores, Policy: c.WebhookPolicy(), Secrets: box})
	return httpapi.LambdaHandler(metering.HTTP(meter, h)), nil
}
