// Command read is the storefront Lambda: product reads behind API Gateway,
// served by the shards' read replicas.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/serve/read/readwiring"
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
	h, err := readwiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
