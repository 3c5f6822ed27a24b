// Package uploadwiring builds the upload function (the admin and retailer
// routes, the cost reports among them) from its configuration: the one
// constructor the Lambda entry point calls.
package uploadwiring

import (
	"context"
	"fmt"
	"net/http"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/upload"
)

// ControlConfig is the control routes' configuration.
func ControlConfig(c *config.Config) control.Config {
	return control.Config{AdminToken: c.AdminToken, UploadTTL: c.UploadTTL}
}

// Routes serves the upload routes and the control plane's on one handler,
// as the upload function does (anything else: httpapi.NotFound).
func Routes(up *upload.Handler, ctl *control.Handler) http.Handler {
	mux := http.NewServeMux()
	for _, route := range up.Routes() {
		mux.Handle(route, up)
	}
	for _, route := range ctl.Routes() {
		mux.Handle(route, ctl)
	}
	mux.HandleFunc("/", httpapi.NotFound)
	return mux
}

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
	h := upload.New(uc, stores, blobs, sender, log)
	h.Metrics = c.Metrics("upload")
	cc := ControlConfig(c)
	cc.AdminToken = uc.AdminToken
	cc.Costs = &control.CostsConfig{Usage: stores, Pricer: costs.DefaultPricer(), Deployment: deployment, ReadsNote: metering.ReadsNote(), Reports: blobs}
	ctl := control.New(cc, stores, blobs, log)
	ctl.EnableWebhooks(control.Webhooks{Store: stores, Policy: c.WebhookPolicy(), Secrets: box})
	return httpapi.LambdaHandler(metering.HTTP(meter, Routes(h, ctl))), nil
}
