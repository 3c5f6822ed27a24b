package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// refusingTopic refuses, for what they are, the messages of one retailer
// while refusing is set.
type refusingTopic struct {
	next     topic.Publisher
	retailer string
	refusing *atomic.Bool
}

func (p refusingTopic) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	if !p.refusing.Load() {
		return p.next.Publish(ctx, msgs)
	}
	errs := make([]error, len(msgs))
	var pass []topic.Message
	var at []int
	for i, m := range msgs {
		if m.Attributes[message.AttrRetailerID] == p.retailer {
			errs[i] = fmt.Errorf("sns refused the message: InvalidParameter: injected: %w", topic.ErrRefused)
			continue
		}
		pass = append(pass, m)
		at = append(at, i)
	}
	if len(pass) == 0 {
		return errs, nil
	}
	perrs, err := p.next.Publish(ctx, pass)
	if err != nil {
		return nil, err
	}
	for k, e := range perrs {
		errs[at[k]] = e
	}
	return errs, nil
}

// dlq list shows how many change events are parked; dlq list outbox shows
// them (retailer, generation, event, attempts, error); dlq redrive outbox
// puts them back and the sweeper publishes them.
func TestDLQOutboxAgainstTheStack(t *testing.T) {
	t.Parallel()
	var refusing atomic.Bool
	refusing.Store(true)
	st, err := stack.Start(context.Background(), stack.Options{
		PostgresURL: testenv.Postgres(t), SQSEndpoint: testenv.SQS(t), Prefix: testenv.Name("ctl"),
		DataDir: t.TempDir(), Addr: "127.0.0.1:0", Shards: 1, ChunkRows: 2000,
		HandlerTimeout: 5 * time.Second, VisibilityTimeout: 6 * time.Second,
		SweepEvery: 200 * time.Millisecond, SweepAge: 200 * time.Millisecond,
		WrapPublisher: func(next topic.Publisher) topic.Publisher {
			return refusingTopic{next: next, retailer: "e1", refusing: &refusing}
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	admin := map[string]string{apiVar: st.APIURL, adminTokenVar: st.AdminToken}
	vars := onboard(t, admin, "e1")
	up := runTool(t, vars, "upload", "--retailer", "e1", writeFile(t, "c.csv", []byte("product_id,price\nsku-1,10\nsku-2,20\n")))
	require.Equal(t, 0, up.code, up.stderr)
	require.Eventually(t, func() bool {
		_, n, err := st.Stores.ParkedOutbox(context.Background(), "e1", 10)
		return err == nil && n == 2
	}, 30*time.Second, 50*time.Millisecond, "the upload's change and applied events parked")

	r := runTool(t, admin, "dlq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^outbox +\(parked change events\) +2$`, r.stdout)
	r = runTool(t, admin, "dlq", "list", "outbox")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("dlq list outbox:\n%s", r.stdout)
	require.Contains(t, r.stdout, "outbox: 2 change events parked\n")
	require.Regexp(t, `(?m)^PARKED +RETAILER +GENERATION +EVENT +ATTEMPTS +LAST ERROR$`, r.stdout)
	require.Regexp(t, `(?m)^\S+Z +e1 +1 +catalog\.changes \(chunk 0\) +1 +sns refused the message: InvalidParameter: injected: refused by the topic$`, r.stdout)
	require.Regexp(t, `(?m)^\S+Z +e1 +1 +catalog\.snapshot\.applied +1 +sns refused`, r.stdout)
	r = runTool(t, admin, "dlq", "list", "outbox", "--retailer", "e1", "--limit", "1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"parked": 2`)
	require.Contains(t, r.stdout, `"event_id": "e1:1:changes:0"`)

	refusing.Store(false) // the cause fixed
	r = runTool(t, admin, "dlq", "redrive", "outbox", "--retailer", "e1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "put 2 parked change events back in the outbox; the relay's sweeper publishes them within a minute; 0 still parked\n", r.stdout)
	require.Eventually(t, func() bool {
		empty, err := st.OutboxEmpty(context.Background())
		return err == nil && empty
	}, 30*time.Second, 50*time.Millisecond, "the sweeper publishes the redriven events")
	r = runTool(t, admin, "dlq", "list", "outbox")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "outbox: 0 change events parked\n", r.stdout)

	for args, want := range map[string][]string{
		"retailer for a queue":   {"dlq", "list", "webhooks", "--retailer", "e1"},
		"retailer without queue": {"dlq", "list", "--retailer", "e1"},
		"unknown retailer":       {"dlq", "redrive", "outbox", "--retailer", "nobody"},
		"bad limit":              {"dlq", "list", "outbox", "--limit", "101"},
	} {
		r := runTool(t, admin, want...)
		require.Equal(t, 1, r.code, "%s: %s", args, r.stdout)
		require.NotEmpty(t, r.stderr, args)
	}
}
