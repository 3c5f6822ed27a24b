package systemtest

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
)

// Probe is a queue subscribed to the change-events topic with raw message
// delivery, as the consumers' queues are: what it receives is what a
// consumer receives.
type Probe struct {
	t   *testing.T
	sqs *sqs.Client
	url string
	mu  sync.Mutex
	got []message.Envelope
}

// Subscribe subscribes a new probe queue, named name, to the stack's topic.
func (e *Env) Subscribe(name string) *Probe {
	e.T.Helper()
	ctx := context.Background()
	q := e.Stack.Options.Prefix + name
	url, _, err := sqsemulator.EnsureQueue(ctx, e.Stack.SQS, q, 30*time.Second, 5)
	require.NoError(e.T, err)
	_, err = sqsemulator.Subscribe(ctx, e.Stack.SNS, e.Stack.TopicARN, q, nil)
	require.NoError(e.T, err)
	return &Probe{t: e.T, sqs: e.Stack.SQS, url: url}
}

// Receive takes what has arrived (deleting it from the queue; each message
// must be a valid envelope with its type attribute) and returns everything
// received so far.
func (p *Probe) Receive() []message.Envelope {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		out, err := p.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &p.url, MaxNumberOfMessages: 10, MessageAttributeNames: []string{"All"}})
		require.NoError(p.t, err)
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			var env message.Envelope
			require.NoError(p.t, json.Unmarshal([]byte(aws.ToString(m.Body)), &env))
			require.NoError(p.t, env.Validate())
			require.Equal(p.t, env.Type, aws.ToString(m.MessageAttributes[message.AttrType].StringValue))
			p.mu.Lock()
			p.got = append(p.got, env)
			p.mu.Unlock()
			_, err := p.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &p.url, ReceiptHandle: m.ReceiptHandle})
			require.NoError(p.t, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.got)
}

// WaitFor receives until ok holds of everything received, or fails after d.
func (p *Probe) WaitFor(d time.Duration, what string, ok func([]message.Envelope) bool) []message.Envelope {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for {
		got := p.Receive()
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("after %s, still waiting for %s; received %d events", d, what, len(got))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ByID groups events by id (an event published twice is there twice).
func ByID(envs []message.Envelope) map[string][]message.Envelope {
	out := map[string][]message.Envelope{}
	for _, e := range envs {
		out[e.ID] = append(out[e.ID], e)
	}
	return out
}

// WaitOutboxEmpty waits until every shard's outbox is empty: every change
// event has been published.
func (e *Env) WaitOutboxEmpty(d time.Duration) {
	e.T.Helper()
	require.Eventually(e.T, func() bool {
		empty, err := e.Stack.OutboxEmpty(context.Background())
		return err == nil && empty
	}, d, 50*time.Millisecond, "the outboxes empty")
}

// AnalyticsCatalog reconstructs a retailer's catalog from the analytics
// consumer's Parquet files (stack.Stack.AnalyticsCatalog).
func (e *Env) AnalyticsCatalog(retailer string) (fixtures.Catalog, error) {
	c, _, _, err := e.Stack.AnalyticsCatalog(context.Background(), retailer)
	return c, err
}

// RequireAnalytics waits until the analytics files of a retailer
// reconstruct want (its catalog), or fails after d.
func (e *Env) RequireAnalytics(retailer string, want fixtures.Catalog, d time.Duration) {
	e.T.Helper()
	if want == nil {
		want = fixtures.Catalog{}
	}
	var got fixtures.Catalog
	var err error
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if got, err = e.AnalyticsCatalog(retailer); err == nil && reflect.DeepEqual(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(e.T, err)
	require.Equal(e.T, want, got, "the analytics reconstruction of %s", retailer)
}
