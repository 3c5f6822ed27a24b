// Command webhooks is the webhooks consumer Lambda: each upload's outcome
// (catalog.snapshot.* events, from its queue subscribed to the
// change-events topic) is POSTed, signed, to its retailer's webhook.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/publish/webhooks/webhookswiring"
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
	h, err := webhookswiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
