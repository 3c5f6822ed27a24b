package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const adminToken = "admin"

// Dead-letter queues of the in-memory queue: URLs like the real ones.
var queues = ops.Queues{
	Analytics: "inmem://analytics", AnalyticsDLQ: "inmem://analytics-dlq", Webhooks: "inmem://webhooks", WebhooksDLQ: "inmem://webhooks-dlq",
	ArrivalsDLQ: "inmem://arrivals-dlq", DiffJobs: "inmem://diff-jobs.fifo", DiffJobsDLQ: "inmem://diff-jobs-dlq.fifo",
	ApplySmall: "inmem://apply-small.fifo", ApplySmallDLQ: "inmem://apply-small-dlq.fifo",
	ApplyLarge: "inmem://apply-large.fifo", ApplyLargeDLQ: "inmem://apply-large-dlq.fifo",
	Reconcile: "inmem://reconcile-jobs", ReconcileDLQ: "inmem://reconcile-jobs-dlq",
}

// fixture is the pipeline's handlers and the ops handler on databases of
// the test's own and the in-memory blob store and queue, with a clock (the
// ops handler's) the test moves.
type fixture struct {
	t     *testing.T
	store *pgstore.Stores
	blobs *inmem.Blobs
	queue *inmem.Queue
	diff  *diff.Handler
	apply *apply.Handler
	ops   *ops.Handler
	now   time.Time
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, store: pgstoretest.New(t), blobs: inmem.NewBlobs(), queue: inmem.NewQueue(), now: time.Now()}
	log := slog.New(slog.DiscardHandler)
	f.diff = diff.New(diff.Config{ChunkRows: 2, SmallQueueURL: queues.ApplySmall, LargeQueueURL: queues.ApplyLarge},
		f.store, f.blobs, f.queue, log)
	f.apply = apply.New(f.store, f.blobs, log)
	f.ops = ops.New(ops.Config{AdminToken: adminToken, Queues: queues, Now: func() time.Time { return f.now }},
		f.store, f.blobs, f.queue, log)
	return f
}

// tamper changes a catalog row behind the pipeline's back, as a hand-made
// UPDATE, DELETE or INSERT on the shard would: nil attributes remove the
// row; otherwise the row gets them, keeping its generation and stored hash
// (a new row takes the retailer's applied generation and a hash of zeros).
func (f *fixture) tamper(retailerID, productID string, attributes []byte) {
	f.t.Helper()
	ctx := context.Background()
	_, shard, err := f.store.ForRetailer(ctx, retailerID)
	require.NoError(f.t, err)
	if attributes == nil {
		_, err = shard.Pool().Exec(ctx, `DELETE FROM products WHERE retailer_id = $1 AND product_id = $2`, retailerID, productID)
	} else {
		_, err = shard.Pool().Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
			SELECT $1, $2, $3, '\x00000000000000000000000000000000', applied_generation FROM retailer_state WHERE retailer_id = $1
			ON CONFLICT (retailer_id, product_id) DO UPDATE SET attributes = excluded.attributes, deleted = false, updated_at = now()`,
			retailerID, productID, string(attributes))
	}
	require.NoError(f.t, err)
}

func (f *fixture) onboard(id string) {
	f.t.Helper()
	require.NoError(f.t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: id, TokenHash: httpapi.HashToken("token-" + id)}))
}

// reserve reserves a generation whose slot expires in ttl.
func (f *fixture) reserve(id string, ttl time.Duration) int64 {
	f.t.Helper()
	gen, err := f.store.ReserveGeneration(context.Background(), id, "csv", time.Now().Add(ttl), 0)
	require.NoError(f.t, err)
	return gen
}

// arrive puts a generation's file and records its arrival, as S3 and the
// arrival function do.
func (f *fixture) arrive(id string, gen int64, data string) {
	f.t.Helper()
	ctx := context.Background()
	require.NoError(f.t, f.blobs.Put(ctx, keys.Upload(id, gen), []byte(data)))
	_, err := f.store.MarkArrived(ctx, id, gen, time.Now(), time.Hour)
	require.NoError(f.t, err)
}

// diffed runs the diff of an arrived generation; its chunk messages wait on the apply queues.
func (f *fixture) diffed(id string, gen int64) {
	f.t.Helper()
	require.NoError(f.t, f.diff.Diff(context.Background(), message.DiffJob{RetailerID: id, Generation: gen, Key: keys.Upload(id, gen)}))
}

// applyChunks applies the chunk messages waiting on the apply queues.
func (f *fixture) applyChunks() {
	f.t.Helper()
	for _, q := range []string{queues.ApplySmall, queues.ApplyLarge} {
		for _, m := range f.queue.Take(q) {
			var msg message.ChunkMessage
			require.NoError(f.t, json.Unmarshal([]byte(m.Body), &msg))
			require.NoError(f.t, f.apply.Apply(context.Background(), msg))
		}
	}
}

// upload takes a file all the way through.
func (f *fixture) upload(id, data string) int64 {
	f.t.Helper()
	gen := f.reserve(id, time.Hour)
	f.arrive(id, gen, data)
	f.diffed(id, gen)
	f.applyChunks()
	return gen
}

// why asks the route, as an operator would.
func (f *fixture) why(id, productID string) ops.Why {
	f.t.Helper()
	path := "/v1/admin/retailers/" + id + "/why"
	if productID != "" {
		path += "?product_id=" + productID
	}
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	require.Equal(f.t, http.StatusOK, w.Code, w.Body.String())
	var out ops.Why
	require.NoError(f.t, json.Unmarshal(w.Body.Bytes(), &out))
	return out
}

// requireVerdict checks the verdict and that the failing step says what it found.
func requireVerdict(t *testing.T, got ops.Why, verdict string, detailHas ...string) {
	t.Helper()
	require.Equal(t, verdict, got.Verdict, "%s", describe(got))
	all := describe(got)
	for _, s := range detailHas {
		require.Contains(t, all, s)
	}
	require.Equal(t, ops.CheckRetailer, got.Steps[0].Check)
}

func describe(w ops.Why) string {
	var b strings.Builder
	for _, s := range w.Steps {
		fmt.Fprintf(&b, "%s ok=%v: %s\n", s.Check, s.OK, s.Detail)
	}
	return b.String()
}

const catalogCSV = "product_id,price\na,1\nb,2\nc,3\n"

func TestWhyVerdicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)

	f.onboard("none")
	requireVerdict(t, f.why("none", ""), ops.VerdictNoUploads, "no generation was ever reserved")

	f.onboard("waits")
	f.upload("waits", catalogCSV)
	f.reserve("waits", time.Hour)
	requireVerdict(t, f.why("waits", ""), ops.VerdictAwaitingUpload, "no file yet", "newest upload that arrived is generation 1, applied")

	f.onboard("late")
	f.reserve("late", -time.Minute)
	requireVerdict(t, f.why("late", ""), ops.VerdictExpired, "the upload URL expired")

	f.onboard("bad")
	gen := f.reserve("bad", time.Hour)
	f.arrive("bad", gen, "product_id,price\na,1\na,2\n")
	f.diffed("bad", gen)
	requireVerdict(t, f.why("bad", ""), ops.VerdictRejected, "duplicate_product_id at line 3")

	f.onboard("empty")
	gen = f.reserve("empty", time.Hour)
	f.arrive("empty", gen, "product_id,price\n")
	f.diffed("empty", gen)
	requireVerdict(t, f.why("empty", ""), ops.VerdictHeld, "empty_snapshot", "catalogctl confirm empty 1")

	f.onboard("busy")
	f.upload("busy", catalogCSV)
	gen = f.reserve("busy", time.Hour)
	f.arrive("busy", gen, "product_id,price\na,9\nb,9\nc,9\n")
	f.diffed("busy", gen) // two chunks wait on the queue
	requireVerdict(t, f.why("busy", "a"), ops.VerdictInProgress, "0 of 2 chunks applied, 2 in flight")

	f.now = f.now.Add(11 * time.Minute) // nothing moved for longer than StallAfter
	requireVerdict(t, f.why("busy", ""), ops.VerdictStuck, "0 of 2 chunks applied", "over the 10m00s allowed")
	f.now = time.Now()

	// Superseded: the file went to an old slot after a newer reservation.
	f.onboard("old-url")
	old := f.reserve("old-url", time.Hour)
	f.reserve("old-url", time.Hour)
	require.NoError(t, f.blobs.Put(ctx, keys.Upload("old-url", old), []byte(catalogCSV)))
	requireVerdict(t, f.why("old-url", ""), ops.VerdictSuperseded, "uploaded to generation 1's URL")

	f.onboard("shop")
	f.upload("shop", catalogCSV)
	requireVerdict(t, f.why("shop", ""), ops.VerdictCurrent, "applied", "no read replicas")
	requireVerdict(t, f.why("shop", "b"), ops.VerdictCurrent, `equal to generation 1's snapshot`)
	requireVerdict(t, f.why("shop", "zz"), ops.VerdictNotInSnapshot, `"zz" is not in generation 1's snapshot`)
	f.upload("shop", "product_id,price\na,1\nc,3\n")
	requireVerdict(t, f.why("shop", "b"), ops.VerdictNotInSnapshot, "deleted (by generation 2")
}

// Work in a dead-letter queue is stuck at once: a diff job, or a chunk
// (only a chunk not applied since counts).
func TestWhyStuckInDeadLetterQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.onboard("r1")
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, catalogCSV)
	job := message.ObjectCreatedMessage("us-east-1", "b", keys.Upload("r1", gen), time.Now())
	require.NoError(t, f.queue.Send(ctx, queues.DiffJobsDLQ, job, "r1", "x"))
	requireVerdict(t, f.why("r1", ""), ops.VerdictStuck, "its diff job in diff-jobs-dlq.fifo since")

	f.onboard("r2")
	f.upload("r2", catalogCSV)
	gen = f.reserve("r2", time.Hour)
	f.arrive("r2", gen, "product_id,price\na,5\nb,5\nc,5\n")
	f.diffed("r2", gen)
	chunks := f.queue.Take(queues.ApplySmall)
	require.Len(t, chunks, 2)
	var first message.ChunkMessage
	require.NoError(t, json.Unmarshal([]byte(chunks[0].Body), &first))
	require.NoError(t, f.apply.Apply(ctx, first))
	require.NoError(t, f.queue.Send(ctx, queues.ApplySmallDLQ, chunks[0].Body, chunks[0].GroupID, chunks[0].DedupID)) // applied: ignored
	require.NoError(t, f.queue.Send(ctx, queues.ApplySmallDLQ, chunks[1].Body, chunks[1].GroupID, chunks[1].DedupID))
	requireVerdict(t, f.why("r2", ""), ops.VerdictStuck, "1 of 2 chunks applied, 0 in flight; 1 chunk in apply-small-dlq.fifo since")
}

// A catalog row that differs from the applied snapshot is a divergence
// (stuck, with the repair command), and a read replica behind the writer
// is replica lag.
func TestWhyDivergenceAndReplicaLag(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)
	lagging := &staleReplicas{Stores: f.store, stale: map[string]catalog.Product{}}
	f.ops = ops.New(ops.Config{AdminToken: adminToken, Queues: queues}, lagging, f.blobs, f.queue, slog.New(slog.DiscardHandler))
	p, err := f.store.Product(context.Background(), "r1", "a", true)
	require.NoError(t, err)
	f.upload("r1", "product_id,price\na,7\nb,2\nc,3\n")
	p.Generation = 1
	lagging.stale["a"] = p
	requireVerdict(t, f.why("r1", "a"), ops.VerdictReplicaLag, "the storefront serves generation 1", "the writer has generation 2")
	requireVerdict(t, f.why("r1", "b"), ops.VerdictCurrent, "the storefront serves the writer's generation 1")

	f.tamper("r1", "c", []byte(`{"price":"300"}`))
	requireVerdict(t, f.why("r1", "c"), ops.VerdictStuck, "differs from generation 2's snapshot", "reconcile --retailer r1 --repair")
}

// staleReplicas is a store whose storefront reads come from a replica that
// lags for the products in stale.
type staleReplicas struct {
	*pgstore.Stores
	stale map[string]catalog.Product
}

func (s *staleReplicas) Product(ctx context.Context, retailerID, productID string, fresh bool) (catalog.Product, error) {
	if p, ok := s.stale[productID]; ok && !fresh {
		return p, nil
	}
	return s.Stores.Product(ctx, retailerID, productID, fresh)
}

func (s *staleReplicas) ReplicaHealth(ctx context.Context, retailerID string) (catalog.ReplicaHealth, error) {
	return catalog.ReplicaHealth{Replicas: 1, MaxLag: 5 * time.Second}, nil
}

func TestWhyAuthAndInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	for _, c := range []struct {
		path, token string
		status      int
	}{
		{"/v1/admin/retailers/r1/why", "", 401},
		{"/v1/admin/retailers/r1/why", "wrong", 401},
		{"/v1/admin/retailers/r1/why", "token-r1", 403},
		{"/v1/admin/retailers/nobody/why", adminToken, 404},
		{"/v1/admin/retailers/bad%20id/why", adminToken, 400},
		{"/v1/admin/retailers/r1/why?product_id=", adminToken, 400},
		{"/v1/admin/retailers/r1/why", adminToken, 200},
	} {
		req := httptest.NewRequest(http.MethodGet, c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		f.ops.ServeHTTP(w, req)
		require.Equal(t, c.status, w.Code, "%s with %q: %s", c.path, c.token, w.Body)
	}
}

// A lost index (the applied snapshot's record) is a step that says so,
// not an internal error: the product cannot be compared, and every diff
// of the retailer fails on it.
func TestWhyMissingIndex(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)
	lost := &lostObjects{Blobs: f.blobs, gone: keys.Index("r1", 1)}
	f.ops = ops.New(ops.Config{AdminToken: adminToken, Queues: queues}, f.store, lost, f.queue, slog.New(slog.DiscardHandler))
	requireVerdict(t, f.why("r1", "a"), ops.VerdictStuck, "generation 1's index (indexes/r1/1", "is missing",
		"every diff of r1 fails on it")
	requireVerdict(t, f.why("r1", ""), ops.VerdictCurrent)
}

// lostObjects is a blob store that lost one object.
type lostObjects struct {
	*inmem.Blobs
	gone string
}

func (l *lostObjects) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	if key == l.gone {
		return blob.Object{}, fmt.Errorf("get %s: %w", key, blob.ErrNotFound)
	}
	return l.Blobs.Open(ctx, key, ifMatch)
}
