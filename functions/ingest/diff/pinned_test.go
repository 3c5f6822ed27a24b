package diff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// replacingBlobs replaces the upload with other bytes right after the
// diff's first open of it (between pass 1 and pass 2).
type replacingBlobs struct {
	*fixture
	key   string
	with  []byte
	opens int
}

func (b *replacingBlobs) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	obj, err := b.blobs.Open(ctx, key, ifMatch)
	if key == b.key {
		if b.opens++; b.opens == 1 {
			require.NoError(b.t, b.blobs.Put(ctx, key, b.with))
		}
	}
	return obj, err
}

func (b *replacingBlobs) Put(ctx context.Context, key string, body []byte) error {
	return b.blobs.Put(ctx, key, body)
}

func (b *replacingBlobs) Create(ctx context.Context, key string) (blob.Writer, error) {
	return b.blobs.Create(ctx, key)
}

// The diff pins the version it first reads: an upload replaced between its
// two passes ends the generation rejected (upload_changed), with nothing
// sent, instead of a retry that can never succeed; a re-run, reading the
// pinned version only, rejects it too.
func TestUploadReplacedBetweenPasses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g := f.upload(csvOf(12, "1"))
	key := keys.Upload("r1", g)
	f.h = diff.New(diff.Config{ChunkRows: 5, InflightCap: 20, LargeThreshold: 1000, SmallQueueURL: "small", LargeQueueURL: "large"},
		f.store, &replacingBlobs{fixture: f, key: key, with: csvOf(12, "2")}, f.queue, slog.New(slog.DiscardHandler))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeUploadChanged, st.ErrorCode)
	require.Empty(t, f.take())
}

// An event announcing another version of an upload being applied is
// refused: nothing is read or sent again.
func TestEventOfAnotherVersionRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g := f.upload(csvOf(12, "1"))
	obj, err := f.blobs.Open(context.Background(), keys.Upload("r1", g), "")
	require.NoError(t, err)
	obj.Body.Close()
	job := message.DiffJob{RetailerID: "r1", Generation: g, Key: keys.Upload("r1", g), ETag: obj.ETag}
	require.NoError(t, f.h.Diff(context.Background(), job))
	require.Len(t, f.take(), 3)
	require.Equal(t, catalog.StateApplying, f.status(g).State)

	job.ETag = `"another"`
	require.NoError(t, f.h.Diff(context.Background(), job))
	require.Empty(t, f.take())
	require.Equal(t, catalog.StateApplying, f.status(g).State)
}

// backoffQueue records the visibility changes asked of it.
type backoffQueue struct {
	*inmem.Queue
	changed []time.Duration
}

func (q *backoffQueue) ChangeVisibility(_ context.Context, queueURL, receiptHandle string, timeout time.Duration) error {
	q.changed = append(q.changed, timeout)
	return nil
}

// A failed diff job comes back after a short back-off that doubles at each
// receive, not after diff-jobs.fifo's long visibility timeout (its retailer's
// later uploads wait behind it in the group).
func TestFailedJobBacksOff(t *testing.T) {
	t.Parallel()
	store := pgstoretest.New(t)
	require.NoError(t, store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	gen, err := store.ReserveGeneration(context.Background(), "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	q := &backoffQueue{Queue: inmem.NewQueue()}
	var logs bytes.Buffer
	// More attempts than the three receives: the back-off alone is looked at
	// here (TestDiffEndsAfterItsLastAttempt: what the last attempt does).
	h := diff.New(diff.Config{JobQueueURL: "jobs.fifo", RetryBackoff: time.Second, MaxAttempts: 10}, store, failingBlobs{}, q,
		slog.New(slog.NewJSONHandler(&logs, nil)))
	body := message.ObjectCreatedMessage("us-east-1", "b", keys.Upload("r1", gen), time.Now())
	for receives := 1; receives <= 3; receives++ {
		resp, err := h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{{
			MessageId: "m", ReceiptHandle: "rh", Body: body, Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(receives)}}}})
		require.NoError(t, err)
		require.Len(t, resp.BatchItemFailures, 1)
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, q.changed)
	// Each failure's line names the upload, so tracing it in the logs finds it.
	var line struct {
		Msg        string `json:"msg"`
		RetailerID string `json:"retailer_id"`
		Generation int64  `json:"generation"`
	}
	first, _, _ := bytes.Cut(logs.Bytes(), []byte("\n"))
	require.NoError(t, json.Unmarshal(first, &line), logs.String())
	require.Equal(t, "diff job failed", line.Msg)
	require.Equal(t, "r1", line.RetailerID)
	require.Equal(t, gen, line.Generation)
}

// failingBlobs fails every read, as a storage outage would.
type failingBlobs struct{}

func (failingBlobs) Open(context.Context, string, string) (blob.Object, error) {
	return blob.Object{}, errors.New("storage unavailable")
}
func (failingBlobs) Put(context.Context, string, []byte) error {
	return errors.New("storage unavailable")
}
func (failingBlobs) Create(context.Context, string) (blob.Writer, error) {
	return nil, errors.New("storage unavailable")
}

// jobsSent records the diff jobs a handler sends (an undo's).
type jobsSent struct{ gens []int64 }

func (j *jobsSent) SendDiffJob(_ context.Context, _ string, gen int64) error {
	j.gens = append(j.gens, gen)
	return nil
}

// I10: a diff that fails on each of its attempts ends its generation
// rejected (diff_failed, with the last failure) on the last one, instead of
// being retried for ever; a job that comes after that finds it final.
func TestDiffEndsAfterItsLastAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := pgstoretest.New(t)
	require.NoError(t, store.CreateRetailer(ctx, catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	gen, err := store.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	jobs := &jobsSent{}
	h := diff.New(diff.Config{MaxAttempts: 3}, store, failingBlobs{}, inmem.NewQueue(), slog.New(slog.NewJSONHandler(io.Discard, nil)))
	h.Jobs = jobs
	job := message.DiffJob{RetailerID: "r1", Generation: gen, Key: keys.Upload("r1", gen)}
	for attempt := 1; attempt <= 2; attempt++ {
		require.ErrorContains(t, h.Diff(ctx, job), fmt.Sprintf("diff attempt %d of 3", attempt))
		st, err := store.Generation(ctx, "r1", gen)
		require.NoError(t, err)
		require.Equal(t, catalog.StateDiffing, st.State)
	}
	require.NoError(t, h.Diff(ctx, job), "the last attempt ends the generation")
	st, err := store.Generation(ctx, "r1", gen)
	require.NoError(t, err)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeDiffFailed, st.ErrorCode)
	require.Contains(t, st.ErrorMessage, "the diff failed on each of its 3 attempts; the last failure:")
	require.Contains(t, st.ErrorMessage, "storage unavailable")
	require.Empty(t, jobs.gens, "it never took over: nothing to undo")
	require.NoError(t, h.Diff(ctx, job), "a late job finds it final")
}
