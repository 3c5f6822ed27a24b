package main

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
)

func TestDeleteKeepsTheSchema(t *testing.T) {
	called := false
	run := func(context.Context, func(string) string) (int, error) { called = true; return 0, nil }
	id, _, err := handle(context.Background(), cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: "x"}, nil, run)
	if err != nil || id != "x" || called {
		t.Errorf("delete: id %q, err %v, migrated %v", id, err, called)
	}
}

func TestCreateMigrates(t *testing.T) {
	id, data, err := handle(context.Background(), cfn.Event{RequestType: cfn.RequestCreate}, nil,
		func(context.Context, func(string) string) (int, error) { return 3, nil })
	if err != nil || id != physicalID || data["Shards"] != 3 {
		t.Errorf("create: %q %v %v", id, data, err)
	}
}

func TestUpdateGivesUpBeforeTheDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), responseMargin+50*time.Millisecond)
	defer cancel()
	attempts := 0
	_, _, err := handle(ctx, cfn.Event{RequestType: cfn.RequestUpdate}, nil,
		func(context.Context, func(string) string) (int, error) {
			attempts++
			return 0, errors.New("no route to host")
		})
	if err == nil || attempts != 1 {
		t.Errorf("want one failed attempt reported before the deadline, got %d attempts, err %v", attempts, err)
	}
}

func TestMigrateNeedsDatabases(t *testing.T) {
	if _, err := migrate(context.Background(), func(string) string { return "" }); err == nil {
		t.Error("want an error without CATALOG_CONTROL_DB and CATALOG_SHARD_DBS")
	}
}
