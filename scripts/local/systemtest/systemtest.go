// Package systemtest holds the tests of the whole system running on the
// local stack (scripts/local/stack): the invariants I1-I9, the HTTP API
// contract, the storefront's read path and the product directory, each in a
// file named after what it proves. This file is their toolkit: start a
// stack, onboard a retailer, upload a file, wait for a state, compare a
// catalog with a snapshot, hold back or fault what the diff sends.
//
// Tests share one PostgreSQL server and one SQS emulator (testenv); each
// stack gets databases and queues of its own, so tests run in parallel.
package systemtest

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// Env is one test's running stack and a client of its API.
type Env struct {
	T     *testing.T
	Stack *stack.Stack
	API   *apiclient.Client

	mu     sync.Mutex
	tokens map[string]string
}

// Logger is the stacks' logger: errors only, everything with CATALOG_TEST_LOG set.
func Logger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("CATALOG_TEST_LOG") != "" {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// Start starts a stack on the shared PostgreSQL server and SQS emulator, with
// short timeouts so that redeliveries come quickly; it stops with the test.
func Start(t *testing.T, o stack.Options) *Env {
	t.Helper()
	if o.PostgresURL == "" {
		o.PostgresURL = testenv.Postgres(t)
	}
	o.SQSEndpoint = testenv.SQS(t)
	o.Prefix = testenv.Name("t")
	o.DataDir = t.TempDir()
	o.Addr = "127.0.0.1:0"
	if o.Shards == 0 {
		o.Shards = 2
	}
	if o.HandlerTimeout == 0 {
		o.HandlerTimeout = 5 * time.Second
	}
	if o.DiffTimeout == 0 {
		o.DiffTimeout = o.HandlerTimeout
	}
	if o.DiffAttempts == 0 {
		// The tests' short timeouts on a loaded machine: a diff that runs
		// out of its few seconds gets more tries than the stack's 3 before
		// its generation ends diff_failed (the tests of that set their own).
		o.DiffAttempts = 6
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 6 * time.Second
	}
	if o.Logger == nil {
		o.Logger = Logger()
	}
	if o.AnalyticsWindow == 0 {
		o.AnalyticsWindow = 500 * time.Millisecond
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = time.Second
	}
	st, err := stack.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return &Env{T: t, Stack: st, API: apiclient.New(st.APIURL), tokens: map[string]string{}}
}

// For is an Env on the same stack for another test (a subtest running
// concurrently with others): its failures are t's; it knows the tokens of
// the retailers it onboards itself.
func (e *Env) For(t *testing.T) *Env {
	return &Env{T: t, Stack: e.Stack, API: e.API, tokens: map[string]string{}}
}

// Context is a context that ends after d or with the test.
func Context(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Onboard registers a retailer and keeps its token (Token).
func (e *Env) Onboard(id string) string {
	e.T.Helper()
	r, err := e.API.CreateRetailer(context.Background(), e.Stack.AdminToken, id)
	require.NoError(e.T, err)
	e.mu.Lock()
	e.tokens[id] = r.Token
	e.mu.Unlock()
	return r.Token
}

// Token is the token of a retailer onboarded by Onboard.
func (e *Env) Token(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tokens[id]
}

// Upload reserves a generation, uploads data and waits until it settles
// (applied, rejected, held or superseded).
func (e *Env) Upload(retailer string, data []byte) apiclient.Status {
	e.T.Helper()
	gen, err := e.API.Upload(Context(e.T, 2*time.Minute), e.Token(retailer), retailer, "", data)
	require.NoError(e.T, err)
	return e.Wait(retailer, gen)
}

// Wait waits until a generation settles and returns its status.
func (e *Env) Wait(retailer string, gen int64) apiclient.Status {
	e.T.Helper()
	s, err := e.API.WaitSettled(Context(e.T, 2*time.Minute), e.Token(retailer), retailer, gen, nil)
	require.NoError(e.T, err)
	return s
}

// WaitFor waits until the generation's status satisfies ok (polling the
// status route), and returns that status.
func (e *Env) WaitFor(retailer string, gen int64, what string, ok func(apiclient.Status) bool) apiclient.Status {
	e.T.Helper()
	var last apiclient.Status
	require.Eventually(e.T, func() bool {
		last = e.Status(retailer, gen)
		return ok(last)
	}, time.Minute, 20*time.Millisecond, "generation %d of %s: waiting for %s", gen, retailer, what)
	return last
}

// Status is a generation's status.
func (e *Env) Status(retailer string, gen int64) apiclient.Status {
	e.T.Helper()
	s, err := e.API.Status(context.Background(), e.Token(retailer), retailer, gen)
	require.NoError(e.T, err)
	return s
}

// Catalog reads a retailer's whole catalog through the storefront API.
func (e *Env) Catalog(retailer string) fixtures.Catalog {
	e.T.Helper()
	products, err := e.API.Catalog(context.Background(), retailer)
	require.NoError(e.T, err)
	raw := map[string][]byte{}
	for _, p := range products {
		raw[p.ProductID] = p.Attributes
	}
	c, err := fixtures.FromJSON(raw)
	require.NoError(e.T, err)
	return c
}

// RequireCatalog checks that a retailer's catalog equals a snapshot.
func (e *Env) RequireCatalog(retailer string, want fixtures.Catalog) {
	e.T.Helper()
	got := e.Catalog(retailer)
	if len(want) == 0 {
		require.Empty(e.T, got)
		return
	}
	require.Equal(e.T, want, got, "catalog of %s", retailer)
}

// ResendS3Event puts an object-created notification for an upload on
// diff-jobs, as S3 would (again).
func (e *Env) ResendS3Event(retailer string, gen int64) {
	e.T.Helper()
	require.NoError(e.T, e.Stack.ResendDiffJob(context.Background(), keys.Upload(retailer, gen)))
}

// ShardOf is the index of a retailer's shard.
func (e *Env) ShardOf(retailerID string) int {
	e.T.Helper()
	r, err := e.Stack.Stores.Retailer(context.Background(), retailerID)
	require.NoError(e.T, err)
	return r.Shard
}

// Shard is a retailer's shard, for tests that look at its tables.
func (e *Env) Shard(retailerID string) *pgstore.Shard {
	return e.Stack.Stores.Shards[e.ShardOf(retailerID)]
}

// WaitDrained waits until a queue of the stack holds no message, visible or
// in flight: every message sent to it so far has been handled and deleted.
func (e *Env) WaitDrained(q stack.Queue) {
	e.T.Helper()
	require.Eventually(e.T, func() bool {
		out, err := e.Stack.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &q.URL,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
				types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
		require.NoError(e.T, err)
		require.Len(e.T, out.Attributes, 3, "queue attributes of %s", q.Name)
		for _, v := range out.Attributes {
			if v != "0" {
				return false
			}
		}
		return true
	}, time.Minute, 20*time.Millisecond, "queue %s never drained", q.Name)
}

// HeldQueue is a queue.Sender (for stack.Options.WrapDiffQueue) that holds
// back the chunk messages Hold picks, as if the worker that sent them had
// stalled, and sends the rest to Next. Release sends what it holds.
type HeldQueue struct {
	Next queue.Sender
	Hold func(message.ChunkMessage) bool

	mu   sync.Mutex
	held []HeldMessage
}

// HeldMessage is a message a HeldQueue holds.
type HeldMessage struct {
	QueueURL, Body, GroupID, DedupID string
	Chunk                            message.ChunkMessage
}

// Wrap is the stack.Options.WrapDiffQueue that puts q in front of the queue.
func (q *HeldQueue) Wrap(next queue.Sender) queue.Sender {
	q.Next = next
	return q
}

// Send holds or sends a message.
func (q *HeldQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	var m message.ChunkMessage
	if err := json.Unmarshal([]byte(body), &m); err == nil && q.Hold != nil && q.Hold(m) {
		q.mu.Lock()
		q.held = append(q.held, HeldMessage{queueURL, body, groupID, dedupID, m})
		q.mu.Unlock()
		return nil
	}
	return q.Next.Send(ctx, queueURL, body, groupID, dedupID)
}

// Len is how many messages are held.
func (q *HeldQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.held)
}

// Take removes and returns the held messages, in the order sent.
func (q *HeldQueue) Take() []HeldMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.held
	q.held = nil
	return out
}

// Release sends the held messages on, in the order they were sent.
func (q *HeldQueue) Release(ctx context.Context) error {
	for _, m := range q.Take() {
		if err := q.Next.Send(ctx, m.QueueURL, m.Body, m.GroupID, m.DedupID); err != nil {
			return err
		}
	}
	return nil
}
