package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/adapters/sqsqueue"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// why asks the why route of the stack as the admin.
func (e *env) why(retailer, productID string) ops.Why {
	e.T.Helper()
	w, err := e.API.Why(context.Background(), e.Stack.AdminToken, retailer, productID)
	require.NoError(e.T, err)
	return w
}

// requireWhy checks a verdict and that the steps say what was found.
func requireWhy(t *testing.T, w ops.Why, verdict string, says ...string) {
	t.Helper()
	text := whyText(w)
	require.Equal(t, verdict, w.Verdict, "%s", text)
	for _, s := range says {
		require.Contains(t, text, s)
	}
}

func whyText(w ops.Why) string {
	var b strings.Builder
	for _, s := range w.Steps {
		fmt.Fprintf(&b, "%-18s ok=%-5v %s\n", s.Check, s.OK, s.Detail)
	}
	return b.String()
}

// upload reserves and PUTs a file without waiting for it.
func (e *env) startUpload(retailer string, data []byte) int64 {
	e.T.Helper()
	gen, err := e.API.Upload(systemtest.Context(e.T, time.Minute), e.Token(retailer), retailer, "", data)
	require.NoError(e.T, err)
	return gen
}

// Every verdict of DESIGN 9 but stuck and replica lag (their own tests),
// on the local stack: each a retailer in the state the verdict names.
func TestWhyVerdicts(t *testing.T) {
	t.Parallel()
	held := &systemtest.HeldQueue{Hold: func(m message.ChunkMessage) bool { return m.RetailerID == "busy" && m.Generation == 2 }}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: held.Wrap})
	ctx := context.Background()
	cat := fixtures.Generate("p", 30)

	e.Onboard("none")
	requireWhy(t, e.why("none", ""), ops.VerdictNoUploads, "no generation was ever reserved")

	e.Onboard("waits")
	require.Equal(t, "applied", e.Upload("waits", cat.CSV(nil)).State)
	_, err := e.API.Reserve(ctx, e.Token("waits"), "waits", "")
	require.NoError(t, err)
	requireWhy(t, e.why("waits", ""), ops.VerdictAwaitingUpload, "no file yet; the upload URL is valid for",
		"the newest upload that arrived is generation 1, applied")

	e.Onboard("late")
	slot, err := e.API.Reserve(ctx, e.Token("late"), "late", "")
	require.NoError(t, err)
	_, err = e.Shard("late").Pool().Exec(ctx, `UPDATE generations SET upload_expires_at = now() - interval '2 minutes'
		WHERE retailer_id = 'late' AND generation = $1`, slot.Generation)
	require.NoError(t, err)
	requireWhy(t, e.why("late", ""), ops.VerdictExpired, "no file arrived; the upload URL expired 2m")

	e.Onboard("bad")
	require.Equal(t, "rejected", e.Upload("bad", []byte("product_id,title\nx,1\nx,2\n")).State)
	requireWhy(t, e.why("bad", ""), ops.VerdictRejected, "duplicate_product_id at line 3", "fix the file")

	e.Onboard("empty")
	require.Equal(t, "held", e.Upload("empty", []byte("product_id,title\n")).State)
	requireWhy(t, e.why("empty", ""), ops.VerdictHeld, "empty_snapshot", "catalogctl confirm empty 1")

	e.Onboard("busy")
	require.Equal(t, "applied", e.Upload("busy", cat.CSV(nil)).State)
	next := cat.Clone()
	for _, id := range next.IDs()[:15] {
		next[id]["price"] = "99"
	}
	gen := e.startUpload("busy", next.CSV(nil))
	e.WaitFor("busy", gen, "applying with its chunks held", func(s apiclient.Status) bool {
		return s.State == "applying" && held.Len() == 2
	})
	requireWhy(t, e.why("busy", next.IDs()[0]), ops.VerdictInProgress, "0 of 2 chunks applied, 2 in flight",
		"equal to generation 1's snapshot (the newest applied); generation 2, being applied, changes it")
	require.NoError(t, held.Release(ctx))
	require.Equal(t, "applied", e.Wait("busy", gen).State)
	requireWhy(t, e.why("busy", next.IDs()[0]), ops.VerdictCurrent, "all 2 chunks applied", "equal to generation 2's snapshot")

	// The file went to an old slot, which the next reservation had superseded.
	e.Onboard("old-url")
	old, err := e.API.Reserve(ctx, e.Token("old-url"), "old-url", "")
	require.NoError(t, err)
	_, err = e.API.Reserve(ctx, e.Token("old-url"), "old-url", "")
	require.NoError(t, err)
	require.NoError(t, e.API.Put(ctx, old, cat.CSV(nil)))
	requireWhy(t, e.why("old-url", ""), ops.VerdictSuperseded, "a file was uploaded to generation 1's URL")

	e.Onboard("shop")
	require.Equal(t, "applied", e.Upload("shop", cat.CSV(nil)).State)
	some := cat.IDs()[3]
	requireWhy(t, e.why("shop", some), ops.VerdictCurrent, "equal to generation 1's snapshot", "no read replicas")
	requireWhy(t, e.why("shop", "no-such-sku"), ops.VerdictNotInSnapshot, `"no-such-sku" is not in generation 1's snapshot`)
	// A row changed behind the pipeline's back: the catalog diverged.
	_, err = e.Shard("shop").Pool().Exec(ctx, `UPDATE products SET attributes = '{"title": "changed by hand"}'
		WHERE retailer_id = 'shop' AND product_id = $1`, some)
	require.NoError(t, err)
	requireWhy(t, e.why("shop", some), ops.VerdictStuck, "changed by hand", "differs from generation 1's snapshot",
		"reconcile --retailer shop --repair")
}

// stuck: a diff job and a chunk forced into their dead-letter queues, and
// a generation that stops moving for longer than StallAfter (2s here).
func TestWhyStuck(t *testing.T) {
	t.Parallel()
	failFor := func(retailer string, next eventsource.Handler) eventsource.Handler {
		return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
			for _, m := range ev.Records {
				if strings.Contains(m.Body, retailer) {
					return lambdaevents.SQSEventResponse{}, errors.New("injected failure for " + retailer)
				}
			}
			return next(ctx, ev)
		}
	}
	held := &systemtest.HeldQueue{Hold: func(m message.ChunkMessage) bool { return m.RetailerID == "slow" }}
	e := newEnv(t, stack.Options{
		// A diff budget of seconds, so that only the injected failures
		// dead-letter (1 s left a loaded machine's good diffs no time: cj's
		// diff job, not its chunk, went to the DLQ).
		MaxReceives: 1, StallAfter: 2 * time.Second, HandlerTimeout: 5 * time.Second, VisibilityTimeout: 6 * time.Second,
		WrapDiff:      func(next eventsource.Handler) eventsource.Handler { return failFor(`snapshots/dj/`, next) },
		WrapApply:     func(next eventsource.Handler) eventsource.Handler { return failFor(`"retailer_id":"cj"`, next) },
		WrapDiffQueue: held.Wrap,
	})
	cat := fixtures.Generate("p", 12)
	for _, r := range []string{"dj", "cj", "slow"} {
		e.Onboard(r)
		e.startUpload(r, cat.CSV(nil))
	}
	stuck := func(w ops.Why) bool { return w.Verdict == ops.VerdictStuck }
	inDLQ := func(w ops.Why) bool { return stuck(w) && strings.Contains(whyText(w), "-dlq.fifo since") }

	w := e.waitWhy("dj", "its diff job in the dead-letter queue", inDLQ)
	requireWhy(t, w, ops.VerdictStuck, "received", "its diff job in "+path.Base(e.Stack.DiffQueue.DLQURL)+" since")

	w = e.waitWhy("cj", "its chunk in the dead-letter queue", inDLQ)
	requireWhy(t, w, ops.VerdictStuck, "0 of 1 chunks applied, 0 in flight; 1 chunk in "+path.Base(e.Stack.SmallQueue.DLQURL)+" since")

	w = e.waitWhy("slow", "no progress for 2s", stuck)
	requireWhy(t, w, ops.VerdictStuck, "0 of 1 chunks applied, 1 in flight", "over the 2s allowed")

	// Nothing was consumed: the dead letters are still there for a redrive.
	inspector := sqsqueue.NewInspector(e.Stack.SQS)
	for _, q := range []stack.Queue{e.Stack.DiffQueue, e.Stack.SmallQueue} {
		depth, err := inspector.Depth(context.Background(), q.DLQURL)
		require.NoError(t, err)
		require.Equal(t, 1, depth, "%s after why looked", q.DLQURL)
	}
}

// replica_lag: the writer has the product's new generation, the replica
// that serves the storefront has not replayed it (replay paused).
func TestWhyReplicaLag(t *testing.T) {
	t.Parallel()
	e := newReplicaEnv(t, stack.Options{ReplicaMaxLag: time.Hour}) // the paused replica keeps serving
	ctx := context.Background()
	e.Onboard("r1")
	cat := fixtures.Generate("p", 20)
	require.Equal(t, "applied", e.Upload("r1", cat.CSV(nil)).State)
	e.syncReplicas()
	some := cat.IDs()[5]
	requireWhy(t, e.why("r1", some), ops.VerdictCurrent, "the storefront serves the writer's generation 1", "1 replicas, 0 lagging")

	conn, err := pgx.Connect(ctx, e.Stack.Options.ReplicaURLs[0])
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `SELECT pg_wal_replay_pause()`)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Exec(context.Background(), `SELECT pg_wal_replay_resume()`) })
	next := cat.Clone()
	next[some]["price"] = "1234"
	require.Equal(t, "applied", e.Upload("r1", next.CSV(nil)).State)
	requireWhy(t, e.why("r1", some), ops.VerdictReplicaLag, "the storefront serves generation 1", "the writer has generation 2",
		"equal to generation 2's snapshot")
}
