package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// runJobs consumes the reconcile-jobs queue until it is empty, as the
// event source would.
func (f *fixture) runJobs() {
	f.t.Helper()
	for {
		msgs := f.queue.Take(queues.Reconcile)
		if len(msgs) == 0 {
			return
		}
		var ev lambdaevents.SQSEvent
		for i, m := range msgs {
			ev.Records = append(ev.Records, lambdaevents.SQSMessage{MessageId: fmt.Sprint(i), Body: m.Body,
				Attributes: map[string]string{"ApproximateReceiveCount": "1"}})
		}
		resp, err := f.ops.HandleSQS(context.Background(), ev)
		require.NoError(f.t, err)
		require.Empty(f.t, resp.BatchItemFailures)
	}
}

// reconcile runs a reconciliation through the routes and the queue, and returns its report.
func (f *fixture) reconcile(retailer string, repair bool) ops.ReconcileRunReport {
	f.t.Helper()
	body := fmt.Sprintf(`{"repair":%v}`, repair)
	if retailer != "" {
		body = fmt.Sprintf(`{"retailer_id":%q,"repair":%v}`, retailer, repair)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Equal(f.t, http.StatusAccepted, f.call(http.MethodPost, "/v1/admin/reconcile", body, &started))
	f.runJobs()
	var rep ops.ReconcileRunReport
	require.Equal(f.t, http.StatusOK, f.call(http.MethodGet, "/v1/admin/reconcile/"+started.RunID, "", &rep))
	require.Equal(f.t, started.RunID, rep.RunID)
	return rep
}

func (f *fixture) call(method, path, body string, out any) int {
	f.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	if out != nil && w.Code < 300 {
		require.NoError(f.t, json.Unmarshal(w.Body.Bytes(), out), w.Body.String())
	}
	return w.Code
}

// catalogOf is a retailer's live catalog as the storefront serves it, each
// product's attributes compacted (jsonb writes them with spaces).
func (f *fixture) catalogOf(retailer string) map[string]string {
	f.t.Helper()
	products, err := f.store.Products(context.Background(), retailer, "", 1000, 0, true)
	require.NoError(f.t, err)
	out := map[string]string{}
	for _, p := range products {
		var b bytes.Buffer
		require.NoError(f.t, json.Compact(&b, p.Attributes))
		out[p.ProductID] = b.String()
	}
	return out
}

// Rows changed, removed and added behind the pipeline's back are found;
// repair rewrites exactly those (fenced, with a change event) and a second
// run is clean.
func TestReconcileFindsAndRepairs(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", "product_id,price\na,1\nb,2\nc,3\nd,4\n")
	want := f.catalogOf("r1")
	rep := f.reconcile("r1", false)
	require.Equal(t, "done", rep.State)
	require.Equal(t, 1, rep.RetailersChecked)
	require.Empty(t, rep.Divergent)

	f.tamper("r1", "a", []byte(`{"price":"100"}`)) // changed
	f.tamper("r1", "b", nil)                       // removed
	f.tamper("r1", "zz", []byte(`{"price":"9"}`))  // added
	rep = f.reconcile("r1", false)
	require.Equal(t, []ops.ReconcileDivergence{{RetailerID: "r1", Generation: 1, Missing: 1, Extra: 1, Different: 1,
		Examples: []string{"a", "b", "zz"}}}, rep.Divergent)
	require.NotEqual(t, want, f.catalogOf("r1"), "a check repairs nothing")

	f.drainOutbox("r1")
	rep = f.reconcile("r1", true)
	require.Equal(t, []ops.ReconcileDivergence{{RetailerID: "r1", Generation: 1, Missing: 1, Extra: 1, Different: 1, Repaired: 3,
		Examples: []string{"a", "b", "zz"}}}, rep.Divergent)
	require.Equal(t, want, f.catalogOf("r1"))
	events := f.drainOutbox("r1")
	require.Len(t, events, 1, "one change event for the repair")
	require.Equal(t, "catalog.changes", events[0].Type)
	require.EqualValues(t, 3, events[0].Changed)
	require.Contains(t, events[0].ObjectKey, "chunks/r1/1/repair-")

	rep = f.reconcile("r1", false)
	require.Empty(t, rep.Divergent, "clean after the repair")
}

// A catalog that the pipeline alone wrote is clean, whatever happened to
// it: deletes (tombstones), a held upload, a superseded one, an update.
func TestReconcileCleanAfterThePipeline(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	var rows strings.Builder
	rows.WriteString("product_id,price\n")
	for i := range 120 {
		fmt.Fprintf(&rows, "p%03d,%d\n", i, i)
	}
	f.upload("r1", rows.String())
	f.upload("r1", "product_id,price\np000,1\np001,7\n") // a mass delete: held
	old := f.reserve("r1", time.Hour)
	f.upload("r1", strings.Replace(rows.String(), "p005,5\n", "", 1)) // a delete: a tombstone
	f.arrive("r1", old, "product_id,price\nx,1\n")
	f.diffed("r1", old) // older than the applied one: superseded
	f.onboard("r2")
	rep := f.reconcile("", false)
	require.Equal(t, "done", rep.State)
	require.Equal(t, 2, *rep.RetailersTotal)
	require.Equal(t, 2, rep.RetailersChecked, "r2 has no upload: an empty catalog, checked")
	require.Empty(t, rep.Divergent)
	require.Empty(t, rep.Skipped)
}

// A retailer whose newest generation is being applied is skipped: its
// catalog is in flux.
func TestReconcileSkipsWorkInProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, "product_id,price\na,5\nb,5\nc,5\n")
	f.diffed("r1", gen) // chunks wait
	rep := f.reconcile("r1", false)
	require.Equal(t, "done", rep.State)
	require.Zero(t, rep.RetailersChecked)
	require.Equal(t, []ops.ReconcileSkip{{RetailerID: "r1", Reason: "generation 2 is being applied: its catalog is in flux"}}, rep.Skipped)
	f.applyChunks()
	require.Equal(t, 1, f.reconcile("r1", false).RetailersChecked)
}

// A run of every retailer lists them page by page through the queue and
// finishes with the last result.
func TestReconcileEveryRetailer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 7 {
		id := fmt.Sprintf("r%d", i)
		f.onboard(id)
		f.upload(id, catalogCSV)
	}
	f.tamper("r3", "b", []byte(`{"price":"0"}`))
	rep := f.reconcile("", false)
	require.Equal(t, "done", rep.State)
	require.Equal(t, 7, *rep.RetailersTotal)
	require.Equal(t, 7, rep.RetailersChecked)
	require.Len(t, rep.Divergent, 1)
	require.Equal(t, "r3", rep.Divergent[0].RetailerID)
	require.Nil(t, rep.RetailerID)
}

func TestReconcileRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodPost, "/v1/admin/reconcile", `{"retailer_id":"nobody"}`, 404},
		{http.MethodPost, "/v1/admin/reconcile", `{"retailer_id":"bad id"}`, 400},
		{http.MethodPost, "/v1/admin/reconcile", `{"repair":"yes"}`, 400},
		{http.MethodPost, "/v1/admin/reconcile", `{"other":1}`, 400},
		{http.MethodPost, "/v1/admin/reconcile", ``, 202},
		{http.MethodGet, "/v1/admin/reconcile/rc-0123456789abcdef", ``, 404},
		{http.MethodGet, "/v1/admin/reconcile/nope", ``, 400},
	} {
		require.Equal(t, c.status, f.call(c.method, c.path, c.body, nil), "%s %s %s", c.method, c.path, c.body)
	}
	req := httptest.NewRequest(http.MethodPost, "/v1/admin/reconcile", nil)
	req.Header.Set("Authorization", "Bearer token-r1")
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	require.Equal(t, http.StatusForbidden, w.Code)
}

// A run's report says running until every retailer has a result.
func TestReconcileReportWhileRunning(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Equal(t, http.StatusAccepted, f.call(http.MethodPost, "/v1/admin/reconcile", `{}`, &started))
	var rep ops.ReconcileRunReport
	require.Equal(t, http.StatusOK, f.call(http.MethodGet, "/v1/admin/reconcile/"+started.RunID, "", &rep))
	require.Equal(t, "running", rep.State)
	require.Nil(t, rep.RetailersTotal, "not listed yet")
	require.Nil(t, rep.FinishedAt)
	f.runJobs()
	require.Equal(t, http.StatusOK, f.call(http.MethodGet, "/v1/admin/reconcile/"+started.RunID, "", &rep))
	require.Equal(t, "done", rep.State)
	require.NotNil(t, rep.FinishedAt)
}

// drainOutbox takes a retailer's pending change events.
func (f *fixture) drainOutbox(retailer string) []catalog.OutboxEntry {
	f.t.Helper()
	var out []catalog.OutboxEntry
	_, err := f.store.DrainOutbox(context.Background(), 0, catalog.OutboxFilter{RetailerID: retailer}, 1000,
		func(_ context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
			out = append(out, entries...)
			done := make([]bool, len(entries))
			for i := range done {
				done[i] = true
			}
			return done, nil
		})
	require.NoError(f.t, err)
	return out
}

// A retailer that cannot be checked (its index lost) is retried by the
// queue, then recorded failed after the third receive: the report says so
// (failed: true) and ReconcileFailures counts it.
func TestReconcileFailureIsReportedAndCounted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)
	var lines metricstest.Capture
	f.ops = ops.New(ops.Config{AdminToken: adminToken, Queues: queues}, f.store,
		&lostObjects{Blobs: f.blobs, gone: keys.Index("r1", 1)}, f.queue, slog.New(slog.DiscardHandler))
	f.ops.Metrics = metrics.New(&lines, metrics.Options{Function: "ops"})
	var started struct {
		RunID string `json:"run_id"`
	}
	require.Equal(t, http.StatusAccepted, f.call(http.MethodPost, "/v1/admin/reconcile", `{"retailer_id":"r1"}`, &started))
	msgs := f.queue.Take(queues.Reconcile)
	require.Len(t, msgs, 1)
	for receive := 1; receive <= 3; receive++ {
		resp, err := f.ops.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{{
			MessageId: "m", Body: msgs[0].Body, Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(receive)}}}})
		require.NoError(t, err)
		if receive < 3 {
			require.Len(t, resp.BatchItemFailures, 1, "receive %d: retried by the queue", receive)
		} else {
			require.Empty(t, resp.BatchItemFailures, "the third receive records the failure")
		}
	}
	var rep ops.ReconcileRunReport
	require.Equal(t, http.StatusOK, f.call(http.MethodGet, "/v1/admin/reconcile/"+started.RunID, "", &rep))
	require.Equal(t, "done", rep.State)
	require.Len(t, rep.Skipped, 1)
	require.True(t, rep.Skipped[0].Failed)
	require.Contains(t, rep.Skipped[0].Reason, "failed: open the index of generation 1")
	require.Equal(t, 1.0, lines.Sum(metrics.ReconcileFailures))
	require.NoError(t, lines.Validate())
}

// blockingIndexes holds every read of an index object until released, as a
// slow S3 would.
type blockingIndexes struct {
	ops.Blobs
	reading chan struct{} // a read waits (sent once per blocked read)
	release chan struct{}
}

func (b *blockingIndexes) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	obj, err := b.Blobs.Open(ctx, key, ifMatch)
	if err == nil && strings.HasPrefix(key, "indexes/") {
		obj.Body = &slowBody{ReadCloser: obj.Body, b: b}
	}
	return obj, err
}

type slowBody struct {
	io.ReadCloser
	b     *blockingIndexes
	reads int
}

func (s *slowBody) Read(p []byte) (int, error) {
	s.reads++
	if s.reads > 1 { // the first read (the header and the first entries) goes through
		s.b.reading <- struct{}{}
		<-s.b.release
	}
	return s.ReadCloser.Read(p[:min(len(p), 64)])
}

// I12: reconciliation reads the applied generation's index from S3 with no
// database transaction open: the walk goes batch by batch (a few index
// entries, then their rows in a transaction of its own), and finds exactly
// the divergences whatever batch they fall in, between batches too.
func TestReconcileReadsTheIndexOutsideTransactions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	var csv strings.Builder
	csv.WriteString("product_id,price\n")
	for i := range 20 {
		fmt.Fprintf(&csv, "p%02d,%d\n", i*2, i)
	}
	f.upload("r1", csv.String())
	f.tamper("r1", "p00", []byte(`{"price":"x"}`)) // changed, the first of a batch
	f.tamper("r1", "p07", []byte(`{"price":"9"}`)) // added, between entries
	f.tamper("r1", "p12", nil)                     // removed
	f.tamper("r1", "p99", []byte(`{"price":"9"}`)) // added, past the last entry
	b := &blockingIndexes{Blobs: f.blobs, reading: make(chan struct{}), release: make(chan struct{})}
	h := ops.New(ops.Config{AdminToken: adminToken, Queues: queues, ReconcileBatch: 3, ReconcileWorkers: 1},
		f.store, b, f.queue, slog.New(slog.DiscardHandler))
	type result struct {
		res catalog.ReconcileResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := h.ReconcileRetailer(context.Background(), "run-batches", "r1", false)
		done <- result{res, err}
	}()
	_, shard, err := f.store.ForRetailer(context.Background(), "r1")
	require.NoError(t, err)
	blocked := 0
	for {
		select {
		case r := <-done:
			require.NoError(t, r.err)
			require.Positive(t, blocked, "the index was read in several pieces")
			require.EqualValues(t, 20, r.res.Products)
			require.Equal(t, [3]int64{1, 2, 1}, [3]int64{r.res.Missing, r.res.Extra, r.res.Different})
			return
		case <-b.reading:
			blocked++
			var idle int
			require.NoError(t, shard.Pool().QueryRow(context.Background(),
				`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'`).Scan(&idle))
			require.Zero(t, idle, "a transaction was open while the index was being read from S3")
			b.release <- struct{}{}
		}
	}
}
