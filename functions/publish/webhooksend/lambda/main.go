// Command webhooksend is the webhook-sender Lambda: it makes one signed
// webhook delivery (a webhook.Delivery, signed by the webhooks consumer)
// and answers how it went (a webhook.Result). It runs outside the VPC, on
// AWS's rules (https to public addresses only, every connection checked,
// no redirects, 10 s), with no database and no secret: whatever a URL
// resolves to, a delivery cannot reach into the VPC, and no NAT gateway is
// needed for the consumer's deliveries.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

func main() {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhooksend:", err)
		os.Exit(1)
	}
	sender := webhook.Sender{Policy: cfg.WebhookPolicy()}
	lambda.Start(func(ctx context.Context, d webhook.Delivery) (webhook.Result, error) {
		return sender.Send(ctx, d), nil
	})
}
