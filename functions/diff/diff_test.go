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
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/blob"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/diff"
)

// memBlobs is an in-memory blob store.
type memBlobs struct {
	mu      sync.Mutex
	objects map[string][]byte
}

func (b *memBlobs) Open(_ context.Context, key, _ string) (blob.Object, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	data, ok := b.objects[key]
	if !ok {
		return blob.Object{}, fmt.Errorf("%s: %w", key, blob.ErrNotFound)
	}
	return blob.Object{Body: io.NopCloser(bytes.NewReader(data)), Size: int64(len(data)), ETag: "e"}, nil
}

func (b *memBlobs) Put(_ context.Context, key string, body []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.objects[key] = append([]byte(nil), body...)
	return nil
}

// sent is one message the diff sent.
type sent struct {
	queue, group, dedup string
	msg                 events.ChunkMessage
}

type recQueue struct{ sent []sent }

func (q *recQueue) Send(_ context.Context, queueURL, body, groupID, dedupID string) error {
	var m events.ChunkMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		return err
	}
	q.sent = append(q.sent, sent{queueURL, groupID, dedupID, m})
	return nil
}

// fakeShard is a shard whose generation is the latest until latestFor says otherwise.
type fakeShard struct {
	baseline  int64
	products  int64
	latestFor func(checks int) bool
	checks    int
	state     string
	chunks    int
	counts    catalog.Counts
	rejected  string
}

func (s *fakeShard) Retailer(context.Context, string) (catalog.Retailer, error) {
	return catalog.Retailer{ID: "r1", Hold: catalog.DefaultHoldPolicy}, nil
}
func (s *fakeShard) BeginDiff(context.Context, string, int64) (catalog.DiffDecision, error) {
	return catalog.DiffDecision{Proceed: true, Baseline: s.baseline, BaselineProducts: s.products}, nil
}
func (s *fakeShard) TakeOver(context.Context, string, int64) (catalog.DiffDecision, error) {
	return catalog.DiffDecision{Proceed: true, Baseline: s.baseline, BaselineProducts: s.products}, nil
}
func (s *fakeShard) IsLatest(context.Context, string, int64) (bool, error) {
	s.checks++
	return s.latestFor == nil || s.latestFor(s.checks), nil
}
func (s *fakeShard) StartApplying(_ context.Context, _ string, _ int64, c catalog.Counts, chunks int) error {
	s.state, s.chunks, s.counts = "applying", chunks, c
	return nil
}
func (s *fakeShard) Reject(_ context.Context, _ string, _ int64, code, _ string, _ int) error {
	s.state, s.rejected = "rejected", code
	return nil
}
func (s *fakeShard) Hold(context.Context, string, int64, string, string, catalog.Counts) error {
	s.state = "held"
	return nil
}

func csvOf(n int, price string) []byte {
	var b strings.Builder
	b.WriteString("product_id,price\n")
	for i := n - 1; i >= 0; i-- { // unsorted on purpose
		fmt.Fprintf(&b, "p%03d,%s\n", i, price)
	}
	return []byte(b.String())
}

// differ builds diff handlers over one blob store and queue.
type differ func(shard *fakeShard) *diff.Handler

func newDiff(blobs *memBlobs, q *recQueue, threshold int) differ {
	return func(shard *fakeShard) *diff.Handler {
		return diff.New(diff.Config{ChunkRows: 5, InflightCap: 20, LargeThreshold: threshold,
			SmallQueueURL: "small", LargeQueueURL: "large"}, shard, blobs, q, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
}

func run(t *testing.T, h differ, shard *fakeShard, gen int64) {
	t.Helper()
	job := events.DiffJob{RetailerID: "r1", Generation: gen, Key: events.UploadKey("r1", gen)}
	require.NoError(t, h(shard).Diff(context.Background(), job))
}

// Chunking: ops are cut into chunks of ChunkRows, upserts then deletes, each
// chunk object checksummed in its message, FIFO group {retailer}#{seq mod
// cap}, dedup id {retailer}:{gen}:{seq}; a re-run sends the same chunks.
func TestChunking(t *testing.T) {
	t.Parallel()
	blobs := &memBlobs{objects: map[string][]byte{}}
	q := &recQueue{}
	h := newDiff(blobs, q, 1000)
	blobs.objects[events.UploadKey("r1", 1)] = csvOf(12, "1")
	shard := &fakeShard{}
	run(t, h, shard, 1)
	require.Equal(t, 3, shard.chunks)
	require.EqualValues(t, 12, shard.counts.Inserted)
	require.Len(t, q.sent, 3)
	for seq, s := range q.sent {
		require.Equal(t, "small", s.queue)
		require.Equal(t, fmt.Sprintf("r1#%d", seq), s.group)
		require.Equal(t, fmt.Sprintf("r1:1:%d", seq), s.dedup)
		require.Equal(t, seq, s.msg.Seq)
		require.Equal(t, 3, s.msg.Total)
		body := blobs.objects[s.msg.Key]
		sum := sha256.Sum256(body)
		require.Equal(t, hex.EncodeToString(sum[:]), s.msg.SHA256)
		ops, err := events.ReadChunk(bytes.NewReader(body))
		require.NoError(t, err)
		require.Len(t, ops, s.msg.Rows)
	}
	require.Equal(t, []int{5, 5, 2}, []int{q.sent[0].msg.Rows, q.sent[1].msg.Rows, q.sent[2].msg.Rows})

	// Generation 2 against baseline 1: 3 updates, 2 deletes -> one chunk, deletes last.
	next := strings.Replace(string(csvOf(12, "1")), "p011,1\n", "p011,2\n", 1)
	next = strings.Replace(next, "p005,1\n", "p005,2\n", 1)
	next = strings.Replace(next, "p000,1\n", "p000,2\n", 1)
	next = strings.Replace(next, "p007,1\n", "", 1)
	next = strings.Replace(next, "p008,1\n", "", 1)
	blobs.objects[events.UploadKey("r1", 2)] = []byte(next)
	q.sent = nil
	shard2 := &fakeShard{baseline: 1, products: 12}
	run(t, h, shard2, 2)
	require.Equal(t, catalog.Counts{Updated: 3, Deleted: 2, Unchanged: 7, Products: 10}, shard2.counts)
	require.Len(t, q.sent, 1)
	ops, err := events.ReadChunk(bytes.NewReader(blobs.objects[q.sent[0].msg.Key]))
	require.NoError(t, err)
	var kinds []string
	for _, op := range ops {
		kinds = append(kinds, op.Op+":"+op.ProductID)
	}
	require.Equal(t, []string{"upsert:p011", "upsert:p005", "upsert:p000", "delete:p007", "delete:p008"}, kinds,
		"upserts in file order, then deletes in id order")

	// A re-run writes byte-identical chunks and the same messages.
	first := blobs.objects[q.sent[0].msg.Key]
	firstMsg := q.sent[0]
	q.sent = nil
	run(t, h, &fakeShard{baseline: 1, products: 12}, 2)
	require.Equal(t, []sent{firstMsg}, q.sent)
	require.Equal(t, first, blobs.objects[q.sent[0].msg.Key])
}

// The large queue takes snapshots with at least LargeThreshold changed rows.
func TestQueueBySize(t *testing.T) {
	t.Parallel()
	blobs := &memBlobs{objects: map[string][]byte{events.UploadKey("r1", 1): csvOf(12, "1")}}
	q := &recQueue{}
	run(t, newDiff(blobs, q, 12), &fakeShard{}, 1)
	require.Len(t, q.sent, 3)
	for _, s := range q.sent {
		require.Equal(t, "large", s.queue)
	}
}

// I4 in the diff: superseded between chunks, it stops sending.
func TestStopsWhenSupersededBetweenChunks(t *testing.T) {
	t.Parallel()
	blobs := &memBlobs{objects: map[string][]byte{events.UploadKey("r1", 1): csvOf(12, "1")}}
	q := &recQueue{}
	var sentBefore int
	shard := &fakeShard{}
	shard.latestFor = func(int) bool {
		sentBefore = len(q.sent)
		return sentBefore < 1
	}
	run(t, newDiff(blobs, q, 1000), shard, 1)
	require.Len(t, q.sent, 1, "one chunk sent, then the generation was superseded")
}

// I7: a duplicate id is rejected with both lines, and nothing is sent.
func TestRejectsDuplicateIDs(t *testing.T) {
	t.Parallel()
	blobs := &memBlobs{objects: map[string][]byte{events.UploadKey("r1", 1): []byte("product_id,price\na,1\nb,1\na,2\n")}}
	q := &recQueue{}
	shard := &fakeShard{}
	run(t, newDiff(blobs, q, 1000), shard, 1)
	require.Equal(t, "duplicate_product_id", shard.rejected)
	require.Empty(t, q.sent)
}
