package analytics_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// upsert is a chunk op writing attrs (a JSON object) to id, with its hash.
func upsert(id, attrs string) message.ChunkOp {
	h := catalog.HashAttributes([]byte(attrs))
	return message.ChunkOp{Op: message.OpUpsert, ProductID: id, Hash: hex.EncodeToString(h[:]), Attributes: []byte(attrs)}
}

// del is a chunk op deleting id.
func del(id string) message.ChunkOp { return message.ChunkOp{Op: message.OpDelete, ProductID: id} }

// fixture is the analytics consumer on databases of the test's own and an
// in-memory blob store that fails on demand, retailer r1 registered.
type fixture struct {
	t     *testing.T
	store *pgstore.Stores
	blobs *failingBlobs
	vis   *inmem.Visibility
	h     *analytics.Handler
	n     int
}

// failingBlobs fails Puts while failPuts is set.
type failingBlobs struct {
	*inmem.Blobs
	failPuts bool
}

func (b *failingBlobs) Put(ctx context.Context, key string, body []byte) error {
	if b.failPuts {
		return errors.New("bucket down")
	}
	return b.Blobs.Put(ctx, key, body)
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, store: pgstoretest.New(t), blobs: &failingBlobs{Blobs: inmem.NewBlobs()}, vis: inmem.NewVisibility()}
	f.h = analytics.New(analytics.Config{QueueURL: "analytics", Retry: retry.Schedule{Base: time.Second}}, f.store, f.blobs, f.vis, slog.New(slog.DiscardHandler))
	require.NoError(t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	return f
}

var day = time.Date(2026, 12, 1, 23, 59, 0, 0, time.UTC)

// event writes a change object of ops for chunk seq of gen and returns its envelope as a message.
func (f *fixture) event(gen int64, seq int, at time.Time, ops ...message.ChunkOp) lambdaevents.SQSMessage {
	f.t.Helper()
	var body []byte
	for _, op := range ops {
		body = message.AppendChunkLine(body, op)
	}
	key := keys.Chunk("r1", gen, seq)
	require.NoError(f.t, f.blobs.Blobs.Put(context.Background(), key, body))
	sum := sha256.Sum256(body)
	env := message.Envelope{ID: message.EventID(message.TypeChanges, "r1", gen, seq), Type: message.TypeChanges, Time: at,
		RetailerID: "r1", Generation: gen, Seq: &seq, Count: len(ops), Object: key, SHA256: hex.EncodeToString(sum[:])}
	b, err := json.Marshal(env)
	require.NoError(f.t, err)
	f.n++
	return lambdaevents.SQSMessage{MessageId: env.ID, ReceiptHandle: "rh-" + env.ID + "-" + string(rune('a'+f.n)), Body: string(b),
		Attributes: map[string]string{"ApproximateReceiveCount": "1"}}
}

func (f *fixture) handle(msgs ...lambdaevents.SQSMessage) []string {
	f.t.Helper()
	resp, err := f.h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: msgs})
	require.NoError(f.t, err)
	var failed []string
	for _, it := range resp.BatchItemFailures {
		failed = append(failed, it.ItemIdentifier)
	}
	return failed
}

// files returns the retailer's Parquet files and their rows.
func (f *fixture) files() map[string][]analytics.Row {
	f.t.Helper()
	keys, err := f.blobs.List(context.Background(), analytics.RetailerPrefix("r1"))
	require.NoError(f.t, err)
	out := map[string][]analytics.Row{}
	for _, k := range keys {
		body, err := f.blobs.Get(context.Background(), k)
		require.NoError(f.t, err)
		rows, err := analytics.Decode(body)
		require.NoError(f.t, err)
		out[k] = rows
	}
	return out
}

func (f *fixture) latest() map[string]string {
	f.t.Helper()
	var all []analytics.Row
	for _, rows := range f.files() {
		all = append(all, rows...)
	}
	got, err := analytics.Latest(all)
	require.NoError(f.t, err)
	return got
}

// One batch: one file per day, the schema of DESIGN 8, deletes as rows.
func TestWritesOneFilePerRetailerAndDay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.Empty(t, f.handle(
		f.event(1, 0, day, upsert("a", `{"price":"1"}`), upsert("b", `{"price":"2"}`)),
		f.event(1, 1, day.Add(2*time.Minute), upsert("c", `{"price":"3"}`)),
	))
	files := f.files()
	require.Len(t, files, 2, "the second chunk committed after midnight")
	var keys []string
	for k := range files {
		keys = append(keys, k)
	}
	for _, k := range keys {
		require.True(t, strings.HasPrefix(k, "analytics/changes/retailer_id=r1/date=2026-12-0"), k)
		require.True(t, strings.HasSuffix(k, ".parquet"), k)
	}
	require.Len(t, files[analytics.FileKey("r1", day, nameOf(keys, "2026-12-01"))], 2)
	row := files[analytics.FileKey("r1", day, nameOf(keys, "2026-12-01"))][0]
	require.Equal(t, "r1", row.RetailerID)
	require.Equal(t, "a", row.ProductID)
	require.EqualValues(t, 1, row.Generation)
	require.Equal(t, "upsert", row.Op)
	require.JSONEq(t, `{"price":"1"}`, *row.Attributes)
	require.Len(t, *row.Hash, 32)
	require.True(t, day.Equal(row.AppliedAt))

	require.Empty(t, f.handle(f.event(2, 0, day.Add(time.Hour), del("a"), upsert("b", `{"price":"9"}`))))
	require.Equal(t, map[string]string{"b": `{"price":"9"}`, "c": `{"price":"3"}`}, f.latest())
}

func nameOf(keys []string, date string) string {
	for _, k := range keys {
		if strings.Contains(k, "date="+date+"/") {
			return k[strings.LastIndex(k, "/")+1 : len(k)-len(".parquet")]
		}
	}
	return ""
}

// An older generation's changes arriving after a newer one's, and the same
// events delivered again, write nothing: the latest rows equal the catalog.
func TestOutOfOrderAndReplayedEventsChangeNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g1 := f.event(1, 0, day, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`))
	g2 := f.event(2, 0, day, upsert("a", `{"v":"2"}`), del("b"))
	require.Empty(t, f.handle(g2))
	require.Empty(t, f.handle(g1))
	require.Equal(t, map[string]string{"a": `{"v":"2"}`}, f.latest())
	rowsBefore := 0
	for _, rows := range f.files() {
		rowsBefore += len(rows)
	}
	require.Equal(t, 2, rowsBefore, "gen 1's rows of a and b were older: not written")
	require.Empty(t, f.handle(g1, g2))
	require.Empty(t, f.handle(g2))
	rows := 0
	for _, r := range f.files() {
		rows += len(r)
	}
	require.Equal(t, rowsBefore, rows, "a replay writes nothing")

	// Within one batch, the newest change of a product wins.
	g3 := f.event(3, 0, day, upsert("x", `{"v":"3"}`))
	g4 := f.event(4, 0, day, upsert("x", `{"v":"4"}`))
	require.Empty(t, f.handle(g4, g3))
	require.Equal(t, `{"v":"4"}`, f.latest()["x"])
}

// A change object that is missing or not the one the event names fails its
// message alone, with a delay of the schedule; a bucket that refuses the
// file fails the retailer's messages and records nothing, so the retry
// writes them.
func TestFailuresRetryLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	good := f.event(1, 0, day, upsert("a", `{"v":"1"}`))
	bad := f.event(1, 1, day, upsert("b", `{"v":"1"}`))
	require.NoError(t, f.blobs.Blobs.Put(context.Background(), keys.Chunk("r1", 1, 1), []byte("{}\n")))
	bad.Attributes["ApproximateReceiveCount"] = "3"
	require.Equal(t, []string{bad.MessageId}, f.handle(good, bad))
	require.Equal(t, 4*time.Second, f.vis.Delays()[bad.ReceiptHandle], "third failure: 1 s doubled twice")
	require.Equal(t, map[string]string{"a": `{"v":"1"}`}, f.latest())

	f.blobs.failPuts = true
	next := f.event(2, 0, day, upsert("a", `{"v":"2"}`))
	require.Equal(t, []string{next.MessageId}, f.handle(next))
	f.blobs.failPuts = false
	require.Empty(t, f.handle(next))
	require.Equal(t, `{"v":"2"}`, f.latest()["a"])
}

// Lifecycle events (filtered out by the subscription on AWS) are acknowledged.
func TestIgnoresLifecycleEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := message.SnapshotStatus{RetailerID: "r1", Generation: 1, State: "applied"}
	b, _ := json.Marshal(message.Envelope{ID: "r1:1:applied", Type: message.TypeSnapshotApplied, Time: day, RetailerID: "r1", Generation: 1, Status: &st})
	require.Empty(t, f.handle(lambdaevents.SQSMessage{MessageId: "m", Body: string(b)}))
	require.Empty(t, f.files())
}
