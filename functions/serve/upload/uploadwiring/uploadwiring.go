// Package uploadwiring builds the upload function (the admin and retailer
// routes, the cost reports among them) from its configuration: the one
// constructor the Lambda entry point calls (New opens the adapters and
// hands them to Build, which the local stack calls with its own).
package uploadwiring

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/adapters/s3blob"
	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
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

// Deps are the adapters the upload function's handlers use.
type Deps struct {
	Stores     *pgstore.Stores
	Blobs      *s3blob.Store      // presigned uploads, problems files and their links, reports' objects
	Sender     queue.Sender       // the diff jobs of confirmations
	Secrets    *webhook.SecretBox // seals the webhooks' secrets
	AdminToken string             // resolved (connect.Adapters.AdminToken)
	Logger     *slog.Logger
	Metrics    *metrics.Recorder // the upload routes' (nil: none)
}

// Build builds the upload function's two handlers, the upload routes and
// the control plane's (webhooks and cost reports enabled), from its
// configuration and adapters; Routes serves them together.
func Build(c *config.Config, d Deps) (*upload.Handler, *control.Handler, error) {
	deployment, err := CostDeployment(c)
	if err != nil {
		return nil, nil, err
	}
	uc := Config(c)
	uc.AdminToken = d.AdminToken
	h := upload.New(uc, d.Stores, d.Blobs, d.Sender, d.Logger)
	h.Metrics = d.Metrics
	h.Plans = d.Blobs
	cc := ControlConfig(c)
	cc.AdminToken = d.AdminToken
	cc.Costs = &control.CostsConfig{Usage: d.Stores, Pricer: costs.DefaultPricer(), Deployment: deployment, ReadsNote: metering.ReadsNote(), Reports: d.Blobs}
	ctl := control.New(cc, d.Stores, d.Blobs, d.Logger)
	ctl.EnableWebhooks(control.Webhooks{Store: d.Stores, Policy: c.WebhookPolicy(), Secrets: d.Secrets})
	return h, ctl, nil
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
	token, err := a.AdminToken(ctx)
	if err != nil {
		return nil, err
	}
	h, ctl, err := Build(c, Deps{Stores: stores, Blobs: blobs, Sender: sender, Secrets: box, AdminToken: token,
		Logger: log, Metrics: c.Metrics("upload")})
	if err != nil {
		return nil, err
	}
	meter := config.Meter(c, stores, "upload", 512, 0, log)
	return httpapi.LambdaHandler(metering.HTTP(meter, Routes(h, ctl))), nil
}
