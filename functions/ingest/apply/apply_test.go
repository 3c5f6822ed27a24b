package apply_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/publish/relay"
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

// fixture is the apply handler on databases of the test's own and the
// in-memory blob store, retailer r1 registered.
type fixture struct {
	t       *testing.T
	store   *pgstore.Stores
	blobs   *inmem.Blobs
	h       *apply.Handler
	metrics *metricstest.Capture
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, store: pgstoretest.New(t), blobs: inmem.NewBlobs(), metrics: &metricstest.Capture{}}
	f.h = apply.New(f.store, f.blobs, slog.New(slog.DiscardHandler))
	f.h.Metrics = metrics.New(f.metrics, metrics.Options{Function: "apply"})
	t.Cleanup(func() { require.NoError(t, f.metrics.Validate()) })
	require.NoError(t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	return f
}

// start makes a new generation of r1 the latest, applying chunks chunks.
func (f *fixture) start(chunks int) int64 {
	f.t.Helper()
	ctx := context.Background()
	gen, err := f.store.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(f.t, err)
	_, err = f.store.BeginDiff(ctx, "r1", gen, "")
	require.NoError(f.t, err)
	_, err = f.store.TakeOver(ctx, "r1", gen)
	require.NoError(f.t, err)
	require.NoError(f.t, f.store.StartApplying(ctx, "r1", gen, catalog.Counts{}, chunks))
	return gen
}

// chunk writes a chunk object as the diff does and returns its message.
func (f *fixture) chunk(gen int64, seq, total int, ops ...message.ChunkOp) message.ChunkMessage {
	f.t.Helper()
	var body []byte
	for _, op := range ops {
		if op.Op == message.OpDelete {
			body = message.AppendDeleteLine(body, op.ProductID)
		} else {
			body = message.AppendUpsertLine(body, []byte(op.ProductID), mustHash(f.t, op.Hash), op.Attributes)
		}
	}
	key := keys.Chunk("r1", gen, seq)
	require.NoError(f.t, f.blobs.Put(context.Background(), key, body))
	sum := sha256.Sum256(body)
	return message.ChunkMessage{RetailerID: "r1", Generation: gen, Seq: seq, Total: total, Rows: len(ops), Key: key, SHA256: hex.EncodeToString(sum[:])}
}

func mustHash(t *testing.T, h string) [16]byte {
	b, err := hex.DecodeString(h)
	require.NoError(t, err)
	require.Len(t, b, 16)
	var out [16]byte
	copy(out[:], b)
	return out
}

func sqsEvent(t *testing.T, msgs ...message.ChunkMessage) lambdaevents.SQSEvent {
	var ev lambdaevents.SQSEvent
	for i, m := range msgs {
		body, err := json.Marshal(m)
		require.NoError(t, err)
		ev.Records = append(ev.Records, lambdaevents.SQSMessage{MessageId: string(rune('a' + i)), Body: string(body)})
	}
	return ev
}

func (f *fixture) product(id string) (catalog.Product, error) {
	return f.store.Product(context.Background(), "r1", id, true)
}

func (f *fixture) directory(id string) []string {
	f.t.Helper()
	got, err := f.store.DirectoryRetailers(context.Background(), id, 10)
	require.NoError(f.t, err)
	return got
}

// A batch applies each chunk's rows, counts it once, finishes the
// generation with its last chunk and keeps the product directory in line.
func TestAppliesBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gen := f.start(2)
	m0 := f.chunk(gen, 0, 2, upsert("a", `{"price":"1"}`), upsert("b", `{"price":"2"}`))
	m1 := f.chunk(gen, 1, 2, upsert("c", `{"price":"3"}`))
	resp, err := f.h.HandleSQS(context.Background(), sqsEvent(t, m0, m1, m0))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures, "a redelivered chunk in the batch is acknowledged")
	st, err := f.store.Generation(context.Background(), "r1", gen)
	require.NoError(t, err)
	require.Equal(t, catalog.StateApplied, st.State)
	require.Equal(t, 2, st.ChunksApplied)
	p, err := f.product("c")
	require.NoError(t, err)
	require.JSONEq(t, `{"price":"3"}`, string(p.Attributes))
	require.Equal(t, []string{"r1"}, f.directory("a"))

	require.Equal(t, 2.0, f.metrics.Sum(metrics.ChunksApplied), "the redelivery is not counted")
	require.Equal(t, 3.0, f.metrics.Sum(metrics.RowsWritten))
	require.Equal(t, 1.0, f.metrics.Sum(metrics.Uploads, "State=applied", "retailer_id=r1"))
	require.Len(t, linesWith(f.metrics, metrics.PutToAppliedSeconds), 1)
}

func linesWith(c *metricstest.Capture, name string) []metricstest.Line {
	var out []metricstest.Line
	for _, l := range c.Lines() {
		if _, ok := l[name]; ok {
			out = append(out, l)
		}
	}
	return out
}

// After the first failure, that message and every later one of the batch
// are reported (FIFO order within a group holds); earlier ones are not redone.
func TestFailureReportsTheRestOfTheBatch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gen := f.start(3)
	m0 := f.chunk(gen, 0, 3, upsert("a", `{}`))
	m1 := f.chunk(gen, 1, 3, upsert("b", `{}`))
	m1.SHA256 = "00" + m1.SHA256[2:] // the object does not match its message
	m2 := f.chunk(gen, 2, 3, upsert("c", `{}`))
	resp, err := f.h.HandleSQS(context.Background(), sqsEvent(t, m0, m1, m2))
	require.NoError(t, err)
	var failed []string
	for _, it := range resp.BatchItemFailures {
		failed = append(failed, it.ItemIdentifier)
	}
	require.Equal(t, []string{"b", "c"}, failed)
	_, err = f.product("a")
	require.NoError(t, err)
	_, err = f.product("c")
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// A failure fails only the later messages of its own FIFO group: the
// other groups of the batch (another retailer's, another group of the same
// retailer) are applied in the same invocation.
func TestFailureFailsOnlyItsGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r2", TokenHash: []byte("t2")}))
	gen := f.start(4)
	m0 := f.chunk(gen, 0, 4, upsert("a", `{}`))
	m0.SHA256 = "00" + m0.SHA256[2:] // fails
	m1 := f.chunk(gen, 1, 4, upsert("b", `{}`))
	m4 := f.chunk(gen, 4, 4, upsert("e", `{}`)) // group r1#0 again, after the failure
	// r2: its own generation and chunk.
	ctx := context.Background()
	gen2, err := f.store.ReserveGeneration(ctx, "r2", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = f.store.BeginDiff(ctx, "r2", gen2, "")
	require.NoError(t, err)
	_, err = f.store.TakeOver(ctx, "r2", gen2)
	require.NoError(t, err)
	require.NoError(t, f.store.StartApplying(ctx, "r2", gen2, catalog.Counts{}, 1))
	r2body := message.AppendUpsertLine(nil, []byte("x"), mustHash(t, upsert("x", `{}`).Hash), []byte(`{}`))
	r2key := keys.Chunk("r2", gen2, 0)
	require.NoError(t, f.blobs.Put(ctx, r2key, r2body))
	sum := sha256.Sum256(r2body)
	r2 := message.ChunkMessage{RetailerID: "r2", Generation: gen2, Seq: 0, Total: 1, Rows: 1, Key: r2key, SHA256: hex.EncodeToString(sum[:])}

	ev := sqsEvent(t, m0, r2, m1, m4)
	for i, g := range []string{"r1#0", "r2#0", "r1#1", "r1#0"} {
		ev.Records[i].Attributes = map[string]string{"MessageGroupId": g}
	}
	resp, err := f.h.HandleSQS(ctx, ev)
	require.NoError(t, err)
	var failed []string
	for _, it := range resp.BatchItemFailures {
		failed = append(failed, it.ItemIdentifier)
	}
	require.Equal(t, []string{"a", "d"}, failed, "the failed message and the later one of its group")
	for _, id := range []string{"b"} {
		_, err := f.product(id)
		require.NoError(t, err, "another group of the same retailer")
	}
	_, err = f.store.Product(ctx, "r2", "x", true)
	require.NoError(t, err, "another retailer's group")
	_, err = f.product("e")
	require.ErrorIs(t, err, catalog.ErrNotFound, "the later message of the failed group is not applied")
}

// A superseded chunk is acknowledged without reading or writing anything
// (I4); a chunk of an unknown retailer is dropped.
func TestSupersededAndUnknownAreAcknowledged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old := f.start(2)
	stale := f.chunk(old, 0, 2, upsert("zombie", `{}`))
	f.start(1)
	require.NoError(t, f.blobs.Put(context.Background(), stale.Key, []byte("not even read")))
	require.NoError(t, f.h.Apply(context.Background(), stale))
	_, err := f.product("zombie")
	require.ErrorIs(t, err, catalog.ErrNotFound)
	require.Empty(t, f.directory("zombie"))

	unknown := stale
	unknown.RetailerID = "nobody"
	require.NoError(t, f.h.Apply(context.Background(), unknown))
	require.Equal(t, 1.0, f.metrics.Sum(metrics.FencedWritesRefused))
	require.Zero(t, f.metrics.Sum(metrics.ChunksApplied))
}

// A chunk whose transaction committed before the process stopped (so its
// directory update was lost) gets the update when it is redelivered, even
// after a newer generation took over.
func TestRedeliveryFinishesTheDirectory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gen := f.start(2)
	m := f.chunk(gen, 0, 2, upsert("p", `{}`))
	ops, err := message.ReadChunk(bytesOf(t, f, m.Key))
	require.NoError(t, err)
	_, err = f.store.ApplyChunk(context.Background(), m, ops) // committed; the directory update never ran
	require.NoError(t, err)
	require.Empty(t, f.directory("p"))
	f.start(1)
	require.NoError(t, f.h.Apply(context.Background(), m))
	require.Equal(t, []string{"r1"}, f.directory("p"))
}

// A message that is not a chunk message fails.
func TestNotAChunkMessage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	resp, err := f.h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{{MessageId: "x", Body: "{"}}})
	require.NoError(t, err)
	require.Len(t, resp.BatchItemFailures, 1)
}

func bytesOf(t *testing.T, f *fixture, key string) *bytes.Reader {
	b, err := f.blobs.Get(context.Background(), key)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// countingFlusher passes flushes to next, counting those running, and
// notes any that starts after the invocation returned.
type countingFlusher struct {
	next     apply.Flusher
	started  chan string // each flush's retailer, as it starts
	mu       sync.Mutex
	active   int
	returned bool
	late     int // flushes started after returned
}

func (c *countingFlusher) Flush(ctx context.Context, retailerID string) {
	c.mu.Lock()
	c.active++
	if c.returned {
		c.late++
	}
	c.mu.Unlock()
	select {
	case c.started <- retailerID:
	default:
	}
	c.next.Flush(ctx, retailerID)
	c.mu.Lock()
	c.active--
	c.mu.Unlock()
}

func (c *countingFlusher) markReturned() (active int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.returned = true
	return c.active
}

// The fast path publishes each chunk's events right after it commits,
// while the next message of the batch applies, and every event of the
// batch is published, with no flush left running, when HandleSQS returns.
func TestEventsPublishedWhileTheNextChunkApplies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sns := inmem.NewTopic()
	flusher := &countingFlusher{started: make(chan string, 1),
		next: relay.New(relay.Config{}, f.store, f.blobs, sns, slog.New(slog.DiscardHandler))}
	f.h.Events = flusher
	gen := f.start(3)
	m0 := f.chunk(gen, 0, 3, upsert("a", `{}`))
	m1 := f.chunk(gen, 1, 3, upsert("b", `{}`))
	m2 := f.chunk(gen, 2, 3, upsert("c", `{}`))
	var overlapped bool
	f.h.Observe = func(m message.ChunkMessage, start bool) {
		if start && m.Seq == 1 {
			select { // the flush of chunk 0 starts before chunk 1 applies
			case <-flusher.started:
				overlapped = true
			case <-time.After(5 * time.Second):
			}
		}
	}
	resp, err := f.h.HandleSQS(context.Background(), sqsEvent(t, m0, m1, m2))
	require.Zero(t, flusher.markReturned(), "no flush running after the return")
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.True(t, overlapped, "chunk 0's events are published while chunk 1 applies")
	var types []string
	for _, m := range sns.Take() {
		types = append(types, m.Attributes[message.AttrType])
	}
	require.ElementsMatch(t, []string{message.TypeChanges, message.TypeChanges, message.TypeChanges, message.TypeSnapshotApplied}, types)
	require.Empty(t, pgstoretest.Outbox(t, f.store))
	flusher.mu.Lock()
	defer flusher.mu.Unlock()
	require.Zero(t, flusher.late)
}

// A topic that refuses everything fails no message: the events stay in
// the outbox for the sweeper, which publishes them once the topic is back.
func TestFailingTopicLeavesEventsToTheSweeper(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sns := inmem.NewTopic()
	down := errors.New("topic down")
	sns.Fail = func(topic.Message) error { return down }
	r := relay.New(relay.Config{SweepAge: 30 * time.Second}, f.store, f.blobs, sns, slog.New(slog.DiscardHandler))
	flusher := &countingFlusher{next: r}
	f.h.Events = flusher
	gen := f.start(2)
	m0 := f.chunk(gen, 0, 2, upsert("a", `{}`))
	m1 := f.chunk(gen, 1, 2, upsert("b", `{}`))
	resp, err := f.h.HandleSQS(context.Background(), sqsEvent(t, m0, m1))
	require.Zero(t, flusher.markReturned())
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures, "a failed publish fails no chunk")
	require.Len(t, pgstoretest.Outbox(t, f.store), 3, "two chunks' events and the applied event wait")
	require.Zero(t, sns.Published())

	sns.Fail = nil
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)
	st, err := r.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 3, st.Published)
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// refusingStore refuses, for its content, every write of one chunk.
type refusingStore struct {
	apply.Store
	seq int
}

func (s refusingStore) ApplyChunk(ctx context.Context, m message.ChunkMessage, ops []message.ChunkOp) (catalog.ApplyResult, error) {
	if m.Seq == s.seq {
		return catalog.ApplyResult{}, fmt.Errorf("apply chunk %d: %w: new row violates check constraint", m.Seq, catalog.ErrRefused)
	}
	return s.Store.ApplyChunk(ctx, m, ops)
}

// delays records the visibility changes asked of it.
type delays struct{ got []time.Duration }

func (d *delays) Delay(_ context.Context, queueURL, _ string, dur time.Duration) error {
	if queueURL != "https://sqs/000/apply-small.fifo" {
		return fmt.Errorf("unexpected queue %s", queueURL)
	}
	d.got = append(d.got, dur)
	return nil
}

// undoJobs records the undo diff jobs sent.
type undoJobs struct{ gens []int64 }

func (j *undoJobs) SendDiffJob(_ context.Context, _ string, gen int64) error {
	j.gens = append(j.gens, gen)
	return nil
}

// I10: a chunk the database refuses for its content comes back after the
// retry schedule, not the queue's visibility timeout; on its last attempt
// the generation ends rejected (apply_failed) and, as one of its chunks was
// written, the undo is reserved and its diff job sent.
func TestRefusedChunkEndsTheGeneration(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	g1 := f.start(1)
	require.NoError(t, f.h.Apply(ctx, f.chunk(g1, 0, 1, upsert("a", `{"v":"1"}`))))
	g2 := f.start(2)
	d, jobs := &delays{}, &undoJobs{}
	h := apply.New(refusingStore{Store: f.store, seq: 1}, f.blobs, slog.New(slog.DiscardHandler))
	h.Jobs = jobs
	h.Refused = &apply.RefusedRetry{Schedule: retry.Schedule{Base: time.Second}, Queue: d,
		QueueURLs: []string{"https://sqs/000/apply-small.fifo", "https://sqs/000/apply-large.fifo"}}
	require.NoError(t, h.Apply(ctx, f.chunk(g2, 0, 2, upsert("a", `{"v":"2"}`))))
	refused := f.chunk(g2, 1, 2, upsert("b", `{"v":"2"}`))
	for receive := 1; receive <= 3; receive++ {
		ev := sqsEvent(t, refused)
		ev.Records[0].Attributes = map[string]string{"ApproximateReceiveCount": strconv.Itoa(receive)}
		ev.Records[0].EventSourceARN = "arn:aws:sqs:us-east-1:000:apply-small.fifo"
		resp, err := h.HandleSQS(ctx, ev)
		require.NoError(t, err)
		if receive < 3 {
			require.Len(t, resp.BatchItemFailures, 1, "receive %d: tried again", receive)
			continue
		}
		require.Empty(t, resp.BatchItemFailures, "the last receive ends the generation: the message is done with")
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second}, d.got)
	st, err := f.store.Generation(ctx, "r1", g2)
	require.NoError(t, err)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeApplyFailed, st.ErrorCode)
	require.Contains(t, st.ErrorMessage, "chunk 2 of 2 was refused by the database on each of 3 tries: new row violates check constraint")
	require.Equal(t, []int64{g2 + 1}, jobs.gens, "the undo's diff job")
	undo, err := f.store.Generation(ctx, "r1", g2+1)
	require.NoError(t, err)
	require.Equal(t, catalog.ModeRollback, undo.Mode)
	require.Equal(t, &g1, undo.SourceGeneration)
}
