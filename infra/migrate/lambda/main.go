// Command migrate is the CloudFormation custom resource (Custom::CatalogSchema)
// that applies the numbered migrations of sql/ to the control database and
// every shard, on the deploy that creates the stack and on every deploy that
// changes the migrations or the shard count. It runs in the VPC next to the
// functions and answers CloudFormation through the S3 gateway endpoint.
//
// Delete does nothing: the schema lives and dies with the clusters, which
// are snapshotted and deletion-protected.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/connect"
)

// physicalID names the one schema resource of a stack.
const physicalID = "catalog-schema"

// retryEvery is the pause between attempts: a cluster may still be resuming
// from a pause, or its master secret rotating for the first time.
const retryEvery = 10 * time.Second

// responseMargin is kept at the end of the invocation to answer
// CloudFormation: an unanswered custom resource hangs the stack for an hour.
const responseMargin = 20 * time.Second

func main() {
	lambda.Start(cfn.LambdaWrap(func(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
		return handle(ctx, ev, os.Getenv, migrate)
	}))
}

// migrateFunc applies the migrations described by the environment.
type migrateFunc func(ctx context.Context, getenv func(string) string) (shards int, err error)

func handle(ctx context.Context, ev cfn.Event, getenv func(string) string, run migrateFunc) (string, map[string]any, error) {
	if ev.RequestType == cfn.RequestDelete {
		id := ev.PhysicalResourceID
		if id == "" {
			id = physicalID
		}
		return id, nil, nil
	}
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-responseMargin))
		defer cancel()
	}
	var lastErr error
	for attempt := 1; ; attempt++ {
		shards, err := run(ctx, getenv)
		if err == nil {
			log.Printf("migrations applied to the control database and %d shards (attempt %d)", shards, attempt)
			return physicalID, map[string]any{"Shards": shards}, nil
		}
		lastErr = err
		log.Printf("attempt %d: %v", attempt, err)
		select {
		case <-ctx.Done():
			return physicalID, nil, fmt.Errorf("migrations not applied after %d attempts: %w", attempt, lastErr)
		case <-time.After(retryEvery):
		}
	}
}

// migrate opens the databases as the functions do (config.FromEnv, connect; secrets
// resolved afresh on every attempt) and applies the migrations.
func migrate(ctx context.Context, getenv func(string) string) (int, error) {
	cfg, err := config.FromEnv(getenv)
	if err != nil {
		return 0, err
	}
	stores, err := connect.New(&cfg).OpenStores(ctx)
	if err != nil {
		return 0, err
	}
	defer stores.Close()
	if err := stores.Migrate(ctx); err != nil {
		return 0, err
	}
	return len(stores.Shards), nil
}
