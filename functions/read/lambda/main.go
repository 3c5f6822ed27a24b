// Command read is the storefront Lambda: product reads behind API Gateway,
// served by the shards' read replicas.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/httpapi"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/read"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "read:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	read.TuneGC(os.Getenv("GOGC"))
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	log := cfg.Logger().With("function", "read")
	// Reads go to CATALOG_SHARD_READERS (and CATALOG_CONTROL_READER), with
	// the writers as fallback; pools connect on first use.
	stores, err := cfg.OpenReadStores(ctx, log)
	if err != nil {
		return err
	}
	// GET /healthz: every database reachable through its readers, checked
	// at most every read.DefaultHealthTTL per environment.
	h := read.New(stores, log, stores.ReadPing)
	h.Metrics = cfg.Metrics("read")
	// Reads are counted in memory and written every few seconds (DESIGN 10).
	meter, err := config.Meter(os.Getenv, stores, "read", 1024, metering.StorefrontFlushEvery, log)
	if err != nil {
		return err
	}
	serve := httpapi.LambdaHandler(metering.HTTP(meter, h))
	lambda.Start(func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		resp, err := serve(ctx, req)
		h.FlushMetrics(ctx) // at most once a minute: an environment runs nothing between invocations
		return resp, err
	})
	return nil
}
