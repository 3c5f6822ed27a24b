// Command webhooks is the webhooks consumer Lambda: each upload's outcome
// (catalog.snapshot.* events, from its queue subscribed to the
// change-events topic) is POSTed, signed, to its retailer's webhook.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/webhooks"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "webhooks:", err)
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
	box, err := cfg.WebhookSecrets(ctx)
	if err != nil {
		return err
	}
	vis, err := cfg.Visibility(ctx)
	if err != nil {
		return err
	}
	poster, err := cfg.WebhookPoster(ctx)
	if err != nil {
		return err
	}
	wc := cfg.Webhooks(box)
	wc.Poster = poster // nil: in process
	h := webhooks.New(wc, stores, vis, cfg.Logger())
	h.Metrics = cfg.Metrics("webhooks")
	// The analytics and webhooks consumers meter as "consumers" (DESIGN 10).
	meter, err := config.Meter(os.Getenv, stores, "consumers", 512, 0, cfg.Logger())
	if err != nil {
		return err
	}
	lambda.Start(metering.Lambda(meter, h.HandleSQS))
	return nil
}
