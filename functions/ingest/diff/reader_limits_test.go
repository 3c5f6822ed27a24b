package diff_test

import (
	"bytes"
	"compress/gzip"
	"context"
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
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// limitsRig is a diff handler with its own configuration on databases of
// the test's own and the in-memory blob store and queue, and retailer r1.
type limitsRig struct {
	t     *testing.T
	store *pgstore.Stores
	blobs *inmem.Blobs
	queue *inmem.Queue
	h     *diff.Handler
}

func newLimitsRig(t *testing.T, cfg diff.Config) *limitsRig {
	t.Helper()
	cfg.SmallQueueURL, cfg.LargeQueueURL = "small", "large"
	r := &limitsRig{t: t, store: pgstoretest.New(t), blobs: inmem.NewBlobs(), queue: inmem.NewQueue()}
	r.h = diff.New(cfg, r.store, r.blobs, r.queue, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, r.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	return r
}

// diff uploads data as the next generation and diffs it; it returns the
// status and the chunk messages sent.
func (r *limitsRig) diff(data []byte) (catalog.GenerationStatus, int) {
	r.t.Helper()
	ctx := context.Background()
	gen, err := r.store.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(r.t, err)
	require.NoError(r.t, r.blobs.Put(ctx, keys.Upload("r1", gen), data))
	require.NoError(r.t, r.h.Diff(ctx, message.DiffJob{RetailerID: "r1", Generation: gen, Key: keys.Upload("r1", gen)}))
	st, err := r.store.Generation(ctx, "r1", gen)
	require.NoError(r.t, err)
	return st, len(r.queue.Take("small")) + len(r.queue.Take("large"))
}

// I11: what the catalog cannot hold ends the generation rejected at the
// diff, with its code and line, before any chunk is sent (it used to pass
// the reader, then fail every apply of its chunk in jsonb).
func TestUnstorableSnapshotsRejectedBeforeAnyChunk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, file string
		code       string
		line       int
	}{
		{"NUL byte in a CSV cell", "product_id,title\np1,ok\np2,a\x00b\n", "unsupported_value", 3},
		{`\u0000 in a JSON value`, `{"product_id":"p1","t":"ok"}` + "\n" + `{"product_id":"p2","t":"a\u0000"}`, "unsupported_value", 2},
		{`\u0000 in a JSON key`, `{"product_id":"p1","t\u0000":"ok"}`, "unsupported_value", 1},
		{"a number numeric cannot hold", `{"product_id":"p1","w":1}` + "\n" + `{"product_id":"p2","w":1e200000}`, "unsupported_value", 2},
		{"a lone surrogate", `{"product_id":"p1","t":"\ud800"}`, "unsupported_value", 1},
		{"an attribute name of 1,025 bytes", "product_id," + strings.Repeat("n", 1025) + "\np1,x\n", "invalid_attribute_name", 1},
		{"a control character in a column name", "product_id,\"a\tb\"\np1,x\n", "invalid_attribute_name", 1},
		{"_delete in a full snapshot", "product_id,_delete\np1,true\n", "invalid_attribute_name", 1},
	} {
		r := newLimitsRig(t, diff.Config{})
		st, sent := r.diff([]byte(tc.file))
		require.Equal(t, catalog.StateRejected, st.State, tc.name)
		require.Equal(t, tc.code, st.ErrorCode, "%s: %s", tc.name, st.ErrorMessage)
		require.Equal(t, tc.line, st.ErrorLine, tc.name)
		require.Zero(t, sent, "%s: no chunk", tc.name)
		require.Zero(t, st.ChunksTotal, tc.name)
	}
}

// The product limit and the inflate limit, from the diff's configuration:
// the snapshot ends rejected, read no further than the limit.
func TestProductAndInflateLimitsRejectTheSnapshot(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("product_id,title\n")
	for i := range 1000 {
		fmt.Fprintf(&b, "p%04d,x\n", i)
	}
	r := newLimitsRig(t, diff.Config{MaxProducts: 100})
	st, sent := r.diff([]byte(b.String()))
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "too_many_products", st.ErrorCode)
	require.Equal(t, 102, st.ErrorLine, st.ErrorMessage)
	require.Contains(t, st.ErrorMessage, "more than 100 products")
	require.Zero(t, sent)

	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	for i := range 1 << 20 {
		fmt.Fprintf(zw, `{"product_id":"p%07d"}`+"\n", i) // 24 MiB decompressed, 10 MiB stored
	}
	require.NoError(t, zw.Close())
	r = newLimitsRig(t, diff.Config{MaxInflatedBytes: 1 << 20})
	st, sent = r.diff(z.Bytes())
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "file_too_large", st.ErrorCode, st.ErrorMessage)
	require.Contains(t, st.ErrorMessage, "over the limit of 1048576 bytes (decompressed)")
	require.Zero(t, sent)
}

// I12: however bad the file, the status is at most 64 KiB: 1 MB of long
// column names that JSON escapes, quoted by every problem, and 100 of them.
func TestWorstRejectionStatusWithin64KiB(t *testing.T) {
	t.Parallel()
	var csv bytes.Buffer
	csv.WriteString("product_id")
	for i := range 999 {
		fmt.Fprintf(&csv, ",%04d%s", i, strings.Repeat(`<"&\`, 255))
	}
	csv.WriteString("\n")
	for i := range 300 {
		fmt.Fprintf(&csv, "%s-%d%s\xff\n", strings.Repeat("<", 200), i, strings.Repeat(",", 999))
	}
	var jsonl bytes.Buffer
	for i := range 300 {
		k, err := json.Marshal(fmt.Sprintf("%d%s", i, strings.Repeat(`<"&\`, 2000)))
		require.NoError(t, err)
		fmt.Fprintf(&jsonl, `{"product_id":"%s-%d","a":{%s:1,%s:2}}`+"\n", strings.Repeat("<", 200), i, k, k)
	}
	for name, file := range map[string][]byte{"csv": csv.Bytes(), "jsonl": jsonl.Bytes()} {
		r := newLimitsRig(t, diff.Config{})
		st, _ := r.diff(file)
		require.Equal(t, catalog.StateRejected, st.State, name)
		require.Len(t, st.Problems, 100, name)
		require.True(t, st.MoreProblems, name)
		status, err := json.Marshal(message.StatusOf(st))
		require.NoError(t, err)
		require.LessOrEqual(t, len(status), 64<<10, "%s: a status of %d bytes", name, len(status))
		for _, p := range st.Problems {
			require.LessOrEqual(t, len(p.Message), 512, p.Message)
		}
		t.Logf("%s: a file of %d bytes, a status of %d bytes", name, len(file), len(status))
	}
}

// What a snapshot stores is bounded by the inflate limit too: a CSV's
// column names are stored in every product, so a file of long names and
// empty cells under every other limit (attack pass 2: 195 KB of gzip stored
// 3.5 GB) is rejected file_too_large at the row that passes the limit,
// before any chunk, when its canonical catalog would pass it.
func TestStoredBytesBoundedByTheInflateLimit(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("product_id")
	for i := range 20 {
		fmt.Fprintf(&b, ",%s%02d", strings.Repeat("n", 198), i)
	}
	b.WriteString("\n")
	for i := range 10 {
		fmt.Fprintf(&b, "p%d%s\n", i, strings.Repeat(",", 20))
	}
	file := []byte(b.String()) // 4.2 KB; each product about 4.1 KB stored
	r := newLimitsRig(t, diff.Config{MaxInflatedBytes: 20_000})
	st, sent := r.diff(file)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "file_too_large", st.ErrorCode, st.ErrorMessage)
	require.Equal(t, 6, st.ErrorLine, "the fifth product passes 20,000 bytes")
	require.Contains(t, st.ErrorMessage, "stored")
	require.Zero(t, sent, "no chunk")

	ok := newLimitsRig(t, diff.Config{MaxInflatedBytes: 100_000})
	st, _ = ok.diff(file)
	require.Equal(t, catalog.StateApplying, st.State, "under the limit: diffed")
}
