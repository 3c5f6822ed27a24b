package diff_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fixture is a diff handler on databases of the test's own and the
// in-memory blob store and queue, with retailer r1 registered.
type fixture struct {
	t       *testing.T
	store   *pgstore.Stores
	blobs   *inmem.Blobs
	queue   *inmem.Queue
	h       *diff.Handler
	metrics *metricstest.Capture
}

func newFixture(t *testing.T, largeThreshold int) *fixture {
	return newFixtureWith(t, largeThreshold, nil)
}

// newFixtureWith is newFixture with its diff's Config changed by configure.
func newFixtureWith(t *testing.T, largeThreshold int, configure func(*diff.Config)) *fixture {
	f := &fixture{t: t, store: pgstoretest.New(t), blobs: inmem.NewBlobs(), queue: inmem.NewQueue(), metrics: &metricstest.Capture{}}
	cfg := diff.Config{ChunkRows: 5, InflightCap: 20, LargeThreshold: largeThreshold,
		SmallQueueURL: "small", LargeQueueURL: "large"}
	if configure != nil {
		configure(&cfg)
	}
	f.h = diff.New(cfg, f.store, f.blobs, f.queue, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.h.Metrics = metrics.New(f.metrics, metrics.Options{Function: "diff"})
	t.Cleanup(func() { require.NoError(t, f.metrics.Validate()) })
	require.NoError(t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	return f
}

// upload reserves the next generation and puts its file.
func (f *fixture) upload(data []byte) int64 {
	f.t.Helper()
	gen, err := f.store.ReserveGeneration(context.Background(), "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(f.t, err)
	require.NoError(f.t, f.blobs.Put(context.Background(), keys.Upload("r1", gen), data))
	return gen
}

func (f *fixture) diff(gen int64) {
	f.t.Helper()
	require.NoError(f.t, f.h.Diff(context.Background(), message.DiffJob{RetailerID: "r1", Generation: gen, Key: keys.Upload("r1", gen)}))
}

func (f *fixture) status(gen int64) catalog.GenerationStatus {
	f.t.Helper()
	st, err := f.store.Generation(context.Background(), "r1", gen)
	require.NoError(f.t, err)
	return st
}

// sent is one chunk message the diff sent.
type sent struct {
	queue, group, dedup string
	msg                 message.ChunkMessage
}

// take removes the chunk messages sent so far, in order.
func (f *fixture) take() []sent {
	f.t.Helper()
	var out []sent
	for _, q := range []string{"small", "large"} {
		for _, m := range f.queue.Take(q) {
			var msg message.ChunkMessage
			require.NoError(f.t, json.Unmarshal([]byte(m.Body), &msg))
			out = append(out, sent{m.QueueURL, m.GroupID, m.DedupID, msg})
		}
	}
	return out
}

// applyAll applies chunk messages with the apply handler on the same stand-ins.
func (f *fixture) applyAll(msgs []sent) {
	f.t.Helper()
	a := apply.New(f.store, f.blobs, slog.New(slog.DiscardHandler))
	for _, s := range msgs {
		require.NoError(f.t, a.Apply(context.Background(), s.msg))
	}
}

func (f *fixture) object(key string) []byte {
	f.t.Helper()
	b, err := f.blobs.Get(context.Background(), key)
	require.NoError(f.t, err)
	return b
}

func csvOf(n int, price string) []byte {
	var b strings.Builder
	b.WriteString("product_id,price\n")
	for i := n - 1; i >= 0; i-- { // unsorted on purpose
		fmt.Fprintf(&b, "p%03d,%s\n", i, price)
	}
	return []byte(b.String())
}

// Chunking: ops are cut into chunks of ChunkRows, upserts then deletes, each
// chunk object checksummed in its message, FIFO group {retailer}#{seq mod
// cap}, dedup id {retailer}:{gen}:{seq}; a re-run sends the same chunks.
func TestChunking(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.upload(csvOf(12, "1"))
	f.diff(g1)
	st := f.status(g1)
	require.Equal(t, 3, st.ChunksTotal)
	require.EqualValues(t, 12, st.Inserted)
	first := f.take()
	require.Len(t, first, 3)
	for seq, s := range first {
		require.Equal(t, "small", s.queue)
		require.Equal(t, fmt.Sprintf("r1#%d", seq), s.group)
		require.Equal(t, fmt.Sprintf("r1:1:%d", seq), s.dedup)
		require.Equal(t, seq, s.msg.Seq)
		require.Equal(t, 3, s.msg.Total)
		body := f.object(s.msg.Key)
		sum := sha256.Sum256(body)
		require.Equal(t, hex.EncodeToString(sum[:]), s.msg.SHA256)
		ops, err := message.ReadChunk(bytes.NewReader(body))
		require.NoError(t, err)
		require.Len(t, ops, s.msg.Rows)
	}
	require.Equal(t, []int{5, 5, 2}, []int{first[0].msg.Rows, first[1].msg.Rows, first[2].msg.Rows})
	f.applyAll(first)
	require.Equal(t, catalog.StateApplied, f.status(g1).State)

	// Generation 2 against baseline 1: 3 updates, 2 deletes -> one chunk, deletes last.
	next := strings.Replace(string(csvOf(12, "1")), "p011,1\n", "p011,2\n", 1)
	next = strings.Replace(next, "p005,1\n", "p005,2\n", 1)
	next = strings.Replace(next, "p000,1\n", "p000,2\n", 1)
	next = strings.Replace(next, "p007,1\n", "", 1)
	next = strings.Replace(next, "p008,1\n", "", 1)
	g2 := f.upload([]byte(next))
	f.diff(g2)
	st = f.status(g2)
	require.Equal(t, catalog.Counts{Updated: 3, Deleted: 2, Unchanged: 7, Products: 10},
		catalog.Counts{Inserted: st.Inserted, Updated: st.Updated, Deleted: st.Deleted, Unchanged: st.Unchanged, Products: st.Products})
	second := f.take()
	require.Len(t, second, 1)
	ops, err := message.ReadChunk(bytes.NewReader(f.object(second[0].msg.Key)))
	require.NoError(t, err)
	var kinds []string
	for _, op := range ops {
		kinds = append(kinds, op.Op+":"+op.ProductID)
	}
	require.Equal(t, []string{"upsert:p011", "upsert:p005", "upsert:p000", "delete:p007", "delete:p008"}, kinds,
		"upserts in file order, then deletes in id order")

	// A re-run (a redelivered diff job) writes byte-identical chunks and
	// sends the same messages.
	chunk := f.object(second[0].msg.Key)
	f.diff(g2)
	require.Equal(t, second, f.take())
	require.Equal(t, chunk, f.object(second[0].msg.Key))
	f.applyAll(second)
	require.Equal(t, catalog.StateApplied, f.status(g2).State)

	require.Equal(t, 12.0, f.metrics.Sum(metrics.RowsInserted))
	require.Equal(t, 6.0, f.metrics.Sum(metrics.RowsUpdated), "3 updates, planned twice (the re-run)")
	require.Equal(t, 4.0, f.metrics.Sum(metrics.RowsDeleted))
	require.Len(t, f.metrics.Lines(), 6, "a diff time and the planned rows per run")
}

// Chunks are bounded in bytes too: rows with large attributes close a
// chunk before its object would pass ChunkBytes, whatever the row limit,
// the total is known before the first chunk is sent, and a re-run sends the
// same chunks (CSV attributes repeat the header's names in every row, so a
// long header makes every row large: issue 9).
func TestChunksBoundedInBytes(t *testing.T) {
	t.Parallel()
	f := &fixture{t: t, store: pgstoretest.New(t), blobs: inmem.NewBlobs(), queue: inmem.NewQueue()}
	const budget = 4000
	f.h = diff.New(diff.Config{ChunkRows: 5000, ChunkBytes: budget, InflightCap: 20, LargeThreshold: 1000,
		SmallQueueURL: "small", LargeQueueURL: "large"}, f.store, f.blobs, f.queue, slog.New(slog.DiscardHandler))
	require.NoError(t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	var b strings.Builder
	name := strings.Repeat("h", 700)
	fmt.Fprintf(&b, "product_id,%s,note\n", name)
	for i := range 40 {
		note := "short"
		if i%7 == 3 {
			note = strings.Repeat("\x01", 300) // escaped 6x in canonical JSON: ~1,800 bytes
		}
		fmt.Fprintf(&b, "p%03d,v,%s\n", i, note)
	}
	g := f.upload([]byte(b.String()))
	f.diff(g)
	msgs := f.take()
	require.Equal(t, len(msgs), f.status(g).ChunksTotal)
	require.Greater(t, len(msgs), 8)
	rows := 0
	for _, s := range msgs {
		body := f.object(s.msg.Key)
		require.LessOrEqual(t, len(body), budget, "chunk %d", s.msg.Seq)
		require.Equal(t, len(msgs), s.msg.Total)
		rows += s.msg.Rows
	}
	require.Equal(t, 40, rows)
	f.diff(g) // a re-run: same chunks
	require.Equal(t, msgs, f.take())
	f.applyAll(msgs)
	require.Equal(t, catalog.StateApplied, f.status(g).State)
}

// The large queue takes snapshots with at least LargeThreshold changed rows.
func TestQueueBySize(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 12)
	f.diff(f.upload(csvOf(12, "1")))
	msgs := f.take()
	require.Len(t, msgs, 3)
	for _, s := range msgs {
		require.Equal(t, "large", s.queue)
	}
}

// supersedingQueue makes a newer generation take over once the diff has
// sent after messages.
type supersedingQueue struct {
	*inmem.Queue
	store *pgstore.Stores
	after int
	sends int
}

func (q *supersedingQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	if err := q.Queue.Send(ctx, queueURL, body, groupID, dedupID); err != nil {
		return err
	}
	if q.sends++; q.sends == q.after {
		gen, err := q.store.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
		if err != nil {
			return err
		}
		if _, err := q.store.BeginDiff(ctx, "r1", gen, ""); err != nil {
			return err
		}
		_, err = q.store.TakeOver(ctx, "r1", gen)
		return err
	}
	return nil
}

// I4 in the diff: superseded between chunks, it stops sending.
func TestStopsWhenSupersededBetweenChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	q := &supersedingQueue{Queue: f.queue, store: f.store, after: 1}
	h := diff.New(diff.Config{ChunkRows: 5, SmallQueueURL: "small", LargeQueueURL: "large"}, f.store, f.blobs, q, slog.New(slog.DiscardHandler))
	g1 := f.upload(csvOf(12, "1"))
	require.NoError(t, h.Diff(context.Background(), message.DiffJob{RetailerID: "r1", Generation: g1, Key: keys.Upload("r1", g1)}))
	require.Len(t, f.take(), 1, "one chunk sent, then the generation was superseded")
	require.Equal(t, catalog.StateSuperseded, f.status(g1).State)
}

// I7: a duplicate id is rejected with both lines, and nothing is sent.
func TestRejectsDuplicateIDs(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g := f.upload([]byte("product_id,price\na,1\nb,1\na,2\n"))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "duplicate_product_id", st.ErrorCode)
	require.Equal(t, 4, st.ErrorLine)
	require.Contains(t, st.ErrorMessage, "first on line 2")
	require.Empty(t, f.take())
	require.Equal(t, 1.0, f.metrics.Sum(metrics.Uploads, "State=rejected"))
	require.Equal(t, 1.0, f.metrics.Sum(metrics.Rejections, "Code=duplicate_product_id", "retailer_id=r1"))
	_, err := f.blobs.Size(context.Background(), keys.Index("r1", g))
	require.ErrorIs(t, err, blob.ErrNotFound, "a rejected snapshot has no index")
}

// The new generation's index appears only once the generation took over:
// a held snapshot leaves none (its upload is aborted), an applied one has
// it before its first chunk is sent.
func TestIndexOnlyAfterTakeOver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.upload(csvOf(200, "1"))
	f.diff(g1)
	require.NotEmpty(t, f.object(keys.Index("r1", g1)))
	f.applyAll(f.take())

	g2 := f.upload(csvOf(10, "1")) // deletes 190 of 200: held
	f.diff(g2)
	require.Equal(t, catalog.StateHeld, f.status(g2).State)
	_, err := f.blobs.Size(context.Background(), keys.Index("r1", g2))
	require.ErrorIs(t, err, blob.ErrNotFound, "a held snapshot has no index")
	listed, err := f.blobs.List(context.Background(), keys.IndexPrefix("r1"))
	require.NoError(t, err)
	require.Equal(t, []string{keys.Index("r1", g1)}, listed)
}

// A diff whose sorted runs spill to disk sends exactly the chunks of one
// that keeps them in memory, and writes the same index.
func TestSpillingDiffSendsTheSameChunks(t *testing.T) {
	t.Parallel()
	run := func(sortMemory int64) (map[string][]byte, []sent) {
		f := newFixture(t, 100000)
		h := diff.New(diff.Config{ChunkRows: 500, SmallQueueURL: "small", LargeQueueURL: "large",
			SortMemoryBytes: sortMemory, SpillDir: t.TempDir()}, f.store, f.blobs, f.queue, slog.New(slog.DiscardHandler))
		var b strings.Builder
		b.WriteString("product_id,price\n")
		for i := 0; i < 70000; i++ { // two sort batches, unsorted
			fmt.Fprintf(&b, "id-%07d,%d\n", (i*7919)%70000, i%7)
		}
		g := f.upload([]byte(b.String()))
		require.NoError(t, h.Diff(context.Background(), message.DiffJob{RetailerID: "r1", Generation: g, Key: keys.Upload("r1", g)}))
		require.Equal(t, catalog.StateApplying, f.status(g).State)
		objects := map[string][]byte{"index": f.object(keys.Index("r1", g))}
		msgs := f.take()
		for _, m := range msgs {
			objects[m.msg.Key] = f.object(m.msg.Key)
		}
		return objects, msgs
	}
	inMemory, msgs := run(1 << 30)
	spilled, spilledMsgs := run(1)
	require.Len(t, msgs, 140)
	require.Equal(t, msgs, spilledMsgs)
	require.Equal(t, inMemory, spilled)
}

// An upload of a retailer the registry does not know is dropped, and a
// missing upload rejects its generation.
func TestUnknownRetailerAndMissingUpload(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	require.NoError(t, f.h.Diff(context.Background(), message.DiffJob{RetailerID: "nobody", Generation: 1, Key: keys.Upload("nobody", 1)}))
	gen, err := f.store.ReserveGeneration(context.Background(), "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	f.diff(gen)
	st := f.status(gen)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "upload_missing", st.ErrorCode)
}
