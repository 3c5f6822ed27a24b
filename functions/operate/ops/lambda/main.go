// Command ops is the operations Lambda (DESIGN 9): the admin routes (why,
// reconciliation, collection) behind API Gateway, the reconcile-jobs queue
// (reconciliation's and collection's jobs), and the scheduled tasks (the
// stuck-generation sweeper, the daily reconciliation and collection).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/operate/ops/opswiring"
	"github.com/retailcatalog/catalog/functions/platform/config"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "ops:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	h, err := opswiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
