// Package readwiring builds the storefront read function from its
// configuration: New, the one constructor the Lambda entry point calls,
// opens the adapters and hands them to Build, which the local stack calls
// with its own.
package readwiring

import (
	"context"
	"log/slog"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Deps are the adapters the read handler uses.
type Deps struct {
	Stores  *pgstore.Stores // with their read replicas attached
	Logger  *slog.Logger
	Metrics *metrics.Recorder // nil: none
}

// Build builds the storefront's handler from its adapters; GET /healthz
// checks every database reachable through its readers, at most every
// read.DefaultHealthTTL per environment; requests are access-logged as
// c.Storefront says (errors and slow ones always, a sample of the rest).
func Build(c *config.Config, d Deps) *read.Handler {
	h := read.New(d.Stores, d.Logger, d.Stores.ReadPing)
	h.Metrics = d.Metrics
	h.AccessLog = &read.AccessLog{Sample: c.Storefront.AccessLogSample, Slow: c.Storefront.SlowRequest}
	return h
}

// New builds the read Lambda's handler of API Gateway requests: the stores
// with their read replicas, and its usage meter. Each invocation flushes the handler's metrics at its end.
func New(ctx context.Context, c *config.Config) (func(context.Context, lambdaevents.APIGatewayV2HTTPRequest) (lambdaevents.APIGatewayV2HTTPResponse, error), error) {
	a := connect.New(c)
	log := c.Logger().With("function", "read")
	// Reads go to CATALOG_SHARD_READERS (and CATALOG_CONTROL_READER), with
	// the writers as fallback; pools connect on first use.
	stores, err := a.OpenReadStores(ctx, log)
	if err != nil {
		return nil, err
	}
	h := Build(c, Deps{Stores: stores, Logger: log, Metrics: c.Metrics("read")})
	// Reads are counted in memory and written every few seconds (DESIGN 10).
	meter := config.Meter(c, stores, "read", 1024, metering.StorefrontFlushEvery, log)
	serve := httpapi.LambdaHandler(metering.HTTP(meter, h))
	return func(ctx context.Context, req lambdaevents.APIGatewayV2HTTPRequest) (lambdaevents.APIGatewayV2HTTPResponse, error) {
		resp, err := serve(ctx, req)
		h.FlushMetrics(ctx) // at most once a minute: an environment runs nothing between invocations
		return resp, err
	}, nil
}
