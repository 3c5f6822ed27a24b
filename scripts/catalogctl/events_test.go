package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
)

func TestParseSince(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-30T06:00:00Z":      time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC),
		"2026-11-30T07:00:00+01:00": time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC),
		"2026-11-30":                time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"90m":                       now.Add(-90 * time.Minute),
		"2d":                        now.Add(-48 * time.Hour),
	} {
		got, err := parseSince(in, now)
		require.NoError(t, err, in)
		require.True(t, want.Equal(got), "%s: %s, want %s", in, got, want)
	}
	for _, bad := range []string{"yesterday", "-1h", "0s", "2x", "d", "30/11/2026"} {
		_, err := parseSince(bad, now)
		require.Error(t, err, bad)
	}
}

func TestDescribeDeadLetter(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"id":"r1:3:applied","type":"catalog.snapshot.applied","retailer_id":"r1","generation":3}`: "catalog.snapshot.applied event r1:3:applied (retailer r1, generation 3)",
		`{"retailer_id":"r1","generation":3,"seq":0,"total":2,"key":"chunks/r1/3/0"}`:               "chunk 0 of 2 (retailer r1, generation 3)",
		`{"Records":[{"s3":{"object":{"key":"snapshots/r1/3/upload"}}}]}`:                           "S3 event: snapshots/r1/3/upload",
		`"not json"`: "not json",
		`{"x":1}`:    `{"x":1}`,
	} {
		require.Equal(t, want, describeDeadLetter(json.RawMessage(body)), body)
	}
}

// dlq list shows every dead-letter queue, then one queue's messages; dlq
// redrive moves them back (the consumer takes them), and again moves
// nothing; replay writes a retailer's events again, and again writes
// nothing while they wait.
func TestDLQAndReplayAgainstTheStack(t *testing.T) {
	t.Parallel()
	st, admin := startStack(t)
	vars := onboard(t, admin, "e1")
	up := runTool(t, vars, "upload", "--retailer", "e1", writeFile(t, "c.csv", []byte("product_id,price\nsku-1,10\nsku-2,20\n")))
	require.Equal(t, 0, up.code, up.stderr)

	r := runTool(t, admin, "dlq", "list")
	require.Equal(t, 0, r.code, r.stderr)
	require.Regexp(t, `(?m)^webhooks +\S+webhooks-dlq +0$`, r.stdout)
	require.Regexp(t, `(?m)^apply-small +\S+apply-small-dlq.fifo +0$`, r.stdout)

	env := message.Envelope{ID: message.EventID(message.TypeSnapshotApplied, "e1", 1, 0), Type: message.TypeSnapshotApplied,
		Time: time.Now().UTC(), RetailerID: "e1", Generation: 1, Status: &message.SnapshotStatus{RetailerID: "e1", Generation: 1, State: "applied"}}
	body, err := json.Marshal(env)
	require.NoError(t, err)
	_, err = st.SQS.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: &st.WebhooksQueue.DLQURL, MessageBody: aws.String(string(body))})
	require.NoError(t, err)
	r = runTool(t, admin, "dlq", "list", "webhooks")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "webhooks: 1 messages in ")
	require.Contains(t, r.stdout, "catalog.snapshot.applied event e1:1:applied (retailer e1, generation 1)")
	r = runTool(t, admin, "dlq", "list", "webhooks", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, `"id": "e1:1:applied"`)

	r = runTool(t, admin, "dlq", "redrive", "webhooks")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "moved 1 messages back to webhooks; 0 left in its dead-letter queue\n", r.stdout)
	r = runTool(t, admin, "dlq", "redrive", "webhooks")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "moved 0 messages back to webhooks; 0 left in its dead-letter queue\n", r.stdout)

	// The upload's own events leave through the fast path after its commit;
	// a replay while they still wait writes nothing again.
	require.Eventually(t, func() bool {
		empty, err := st.OutboxEmpty(context.Background())
		return err == nil && empty
	}, 2*time.Minute, 50*time.Millisecond, "the upload's events leave the outbox")
	r = runTool(t, admin, "replay", "--retailer", "e1", "--since", "1h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 chunks' change events and 1 upload outcomes written to the outbox again")
	r = runTool(t, admin, "replay", "--retailer", "e1", "--since", "1h")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "0 chunks' change events and 0 upload outcomes", "the first replay's events still wait (the sweeper takes them after 30 s)")

	for args, want := range map[string][]string{
		"unknown queue":    {"dlq", "list", "nope"},
		"no queue":         {"dlq", "redrive"},
		"unknown action":   {"dlq", "purge", "webhooks"},
		"no since":         {"replay", "--retailer", "e1"},
		"bad since":        {"replay", "--retailer", "e1", "--since", "yesterday"},
		"unknown retailer": {"replay", "--retailer", "nobody", "--since", "1h"},
	} {
		r := runTool(t, admin, want...)
		require.Equal(t, 1, r.code, "%s: %s", args, r.stdout)
		require.NotEmpty(t, r.stderr, args)
	}
	r = runTool(t, vars, "dlq", "list")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no admin token")
}
