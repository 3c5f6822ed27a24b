package stack_test

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/queue"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's running stack and a client of its API.
type env struct {
	t      *testing.T
	st     *stack.Stack
	api    *apiclient.Client
	tokens map[string]string
	mu     sync.Mutex
}

func testLogger() *slog.Logger {
	level := slog.LevelError
	if os.Getenv("CATALOG_TEST_LOG") != "" {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// newEnv starts a stack on the shared PostgreSQL server and SQS emulator,
// with short timeouts so redeliveries come quickly.
func newEnv(t *testing.T, o stack.Options) *env {
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
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 6 * time.Second
	}
	if o.Logger == nil {
		o.Logger = testLogger()
	}
	st, err := stack.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return &env{t: t, st: st, api: apiclient.New(st.APIURL), tokens: map[string]string{}}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func (e *env) onboard(id string) string {
	e.t.Helper()
	r, err := e.api.CreateRetailer(context.Background(), e.st.AdminToken, id)
	require.NoError(e.t, err)
	e.mu.Lock()
	e.tokens[id] = r.Token
	e.mu.Unlock()
	return r.Token
}

func (e *env) token(id string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.tokens[id]
}

// upload reserves a generation, uploads data and waits until it settles.
func (e *env) upload(retailer string, data []byte) apiclient.Status {
	e.t.Helper()
	ctx := ctxFor(e.t, 2*time.Minute)
	gen, err := e.api.Upload(ctx, e.token(retailer), retailer, "", data)
	require.NoError(e.t, err)
	return e.wait(retailer, gen)
}

func (e *env) wait(retailer string, gen int64) apiclient.Status {
	e.t.Helper()
	s, err := e.api.WaitSettled(ctxFor(e.t, 2*time.Minute), e.token(retailer), retailer, gen, nil)
	require.NoError(e.t, err)
	return s
}

func (e *env) status(retailer string, gen int64) apiclient.Status {
	e.t.Helper()
	s, err := e.api.Status(context.Background(), e.token(retailer), retailer, gen)
	require.NoError(e.t, err)
	return s
}

// catalog reads a retailer's whole catalog through the storefront API.
func (e *env) catalog(retailer string) fixtures.Catalog {
	e.t.Helper()
	products, err := e.api.Catalog(context.Background(), retailer)
	require.NoError(e.t, err)
	raw := map[string][]byte{}
	for _, p := range products {
		raw[p.ProductID] = p.Attributes
	}
	c, err := fixtures.FromJSON(raw)
	require.NoError(e.t, err)
	return c
}

func (e *env) requireCatalog(retailer string, want fixtures.Catalog) {
	e.t.Helper()
	got := e.catalog(retailer)
	if len(want) == 0 {
		require.Empty(e.t, got)
		return
	}
	require.Equal(e.t, want, got, "catalog of %s", retailer)
}

// sendS3Event puts an object-created notification for an upload on diff-jobs,
// as S3 would (again).
func (e *env) sendS3Event(retailer string, gen int64) {
	e.t.Helper()
	require.NoError(e.t, e.st.ResendDiffJob(context.Background(), events.UploadKey(retailer, gen)))
}

// capturedQueue is a queue.Sender that holds back the messages for which hold
// says so (as if the worker that sent them stalled), and sends the rest.
type capturedQueue struct {
	next queue.Sender
	hold func(events.ChunkMessage) bool
	mu   sync.Mutex
	held []lambdaevents.SQSMessage
}

func (q *capturedQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	var m events.ChunkMessage
	if err := jsonParse(body, &m); err == nil && q.hold != nil && q.hold(m) {
		q.mu.Lock()
		q.held = append(q.held, lambdaevents.SQSMessage{MessageId: dedupID, Body: body})
		q.mu.Unlock()
		return nil
	}
	return q.next.Send(ctx, queueURL, body, groupID, dedupID)
}

func (q *capturedQueue) take() []lambdaevents.SQSMessage {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.held
	q.held = nil
	return out
}
