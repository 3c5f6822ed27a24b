// Command relay is the relay Lambda's sweeper: started every minute by
// EventBridge Scheduler, it publishes the change events that have waited
// in the shards' outboxes for more than 30 s (their fast path failed, or a
// replay wrote them) to the change-events topic.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/publish/relay/relaywiring"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := config.FromEnv(os.Getenv)
	if err != nil {
		return err
	}
	h, err := relaywiring.New(ctx, &cfg)
	if err != nil {
		return err
	}
	lambda.Start(h)
	return nil
}
