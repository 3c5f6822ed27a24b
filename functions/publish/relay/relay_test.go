package relay_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/blob"
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

// del is a chunk op deleting id.
func del(id string) message.ChunkOp { return message.ChunkOp{Op: message.OpDelete, ProductID: id} }

// fixture is the relay and the apply handler on databases of the test's
// own and the in-memory blob store and topic, retailer r1 registered.
type fixture struct {
	t     *testing.T
	now   time.Time // when the fixture was made
	store *pgstore.Stores
	blobs *inmem.Blobs
	topic *inmem.Topic
	apply *apply.Handler
	relay *relay.Relay
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, now: time.Now(), store: pgstoretest.New(t), blobs: inmem.NewBlobs(), topic: inmem.NewTopic()}
	log := slog.New(slog.DiscardHandler)
	f.apply = apply.New(f.store, f.blobs, log)
	f.relay = relay.New(relay.Config{SweepAge: 30 * time.Second, DrainSize: 3}, f.store, f.blobs, f.topic, log)
	require.NoError(t, f.store.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", TokenHash: []byte("t")}))
	return f
}

// start makes a new generation of r1 the latest, applying chunks chunks.
func (f *fixture) start(chunks int) int64 {
	f.t.Helper()
	ctx := context.Background()
	gen, err := f.store.ReserveGeneration(ctx, "r1", "csv", f.now.Add(time.Hour), 0)
	require.NoError(f.t, err)
	_, err = f.store.BeginDiff(ctx, "r1", gen, "")
	require.NoError(f.t, err)
	_, err = f.store.TakeOver(ctx, "r1", gen)
	require.NoError(f.t, err)
	require.NoError(f.t, f.store.StartApplying(ctx, "r1", gen, catalog.Counts{}, chunks))
	return gen
}

// applyChunk writes a chunk object as the diff does and applies it.
func (f *fixture) applyChunk(gen int64, seq int, ops ...message.ChunkOp) {
	f.t.Helper()
	var body []byte
	for _, op := range ops {
		body = message.AppendChunkLine(body, op)
	}
	key := keys.Chunk("r1", gen, seq)
	require.NoError(f.t, f.blobs.Put(context.Background(), key, body))
	sum := sha256.Sum256(body)
	m := message.ChunkMessage{RetailerID: "r1", Generation: gen, Seq: seq, Rows: len(ops), Key: key, SHA256: hex.EncodeToString(sum[:])}
	require.NoError(f.t, f.apply.Apply(context.Background(), m))
}

// appliedAt is when chunk seq of gen was applied, by the shard's clock.
func (f *fixture) appliedAt(gen int64, seq int) time.Time {
	f.t.Helper()
	var at time.Time
	require.NoError(f.t, f.store.Shards[0].Pool().QueryRow(context.Background(),
		`SELECT applied_at FROM applied_chunks WHERE retailer_id = 'r1' AND generation = $1 AND seq = $2`, gen, seq).Scan(&at))
	return at
}

// published decodes what the topic took since the last call.
func (f *fixture) published() []message.Envelope {
	f.t.Helper()
	var out []message.Envelope
	for _, m := range f.topic.Take() {
		var env message.Envelope
		require.NoError(f.t, json.Unmarshal([]byte(m.Body), &env))
		require.NoError(f.t, env.Validate())
		require.Equal(f.t, env.Type, m.Attributes[message.AttrType])
		require.Equal(f.t, env.RetailerID, m.Attributes[message.AttrRetailerID])
		out = append(out, env)
	}
	return out
}

// changes reads the change object an event refers to, checking its checksum and count.
func (f *fixture) changes(env message.Envelope) []message.ChunkOp {
	f.t.Helper()
	body, err := f.blobs.Get(context.Background(), env.Object)
	require.NoError(f.t, err)
	sum := sha256.Sum256(body)
	require.Equal(f.t, hex.EncodeToString(sum[:]), env.SHA256)
	ops, err := message.ReadChunk(bytes.NewReader(body))
	require.NoError(f.t, err)
	require.Len(f.t, ops, env.Count)
	return ops
}

func ids(ops []message.ChunkOp) []string {
	var out []string
	for _, op := range ops {
		out = append(out, op.ProductID)
	}
	return out
}

// A chunk whose every op changed its product is its own change object; the
// fast path publishes it and the generation's applied event, and empties
// the outbox.
func TestFlushPublishesChunkAndLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`))
	f.relay.Flush(context.Background(), "r1")
	got := f.published()
	require.Len(t, got, 2)
	ch, applied := got[0], got[1]
	require.Equal(t, message.TypeChanges, ch.Type)
	require.Equal(t, message.EventID(message.TypeChanges, "r1", gen, 0), ch.ID)
	require.Equal(t, keys.Chunk("r1", gen, 0), ch.Object, "no copy: the chunk object is the change object")
	require.Equal(t, []string{"a", "b"}, ids(f.changes(ch)))
	require.True(t, f.appliedAt(gen, 0).Equal(ch.Time), "the event's time is its chunk's commit: %s", ch.Time)
	require.Equal(t, message.TypeSnapshotApplied, applied.Type)
	require.Equal(t, "applied", applied.Status.State)
	require.Equal(t, message.Chunks{Total: 1, Applied: 1}, applied.Status.Chunks)
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// A chunk with ops that changed nothing gets a change object of its own,
// written before the event that refers to it; a chunk that changed nothing
// publishes nothing, and leaves an empty change object for replays.
func TestPartialChunkWritesChangeObject(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g1 := f.start(1)
	f.applyChunk(g1, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`), upsert("c", `{"v":"1"}`))
	f.relay.Flush(context.Background(), "r1")
	f.published()

	g2 := f.start(2)
	f.applyChunk(g2, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"2"}`), del("zz"), del("c"))
	f.applyChunk(g2, 1, upsert("b", `{"v":"2"}`))
	f.relay.Flush(context.Background(), "r1")
	got := f.published()
	require.Len(t, got, 2, "chunk 0's changes and the applied event; chunk 1 changed nothing")
	require.Equal(t, keys.Change("r1", g2, 0), got[0].Object)
	ops := f.changes(got[0])
	require.Equal(t, []string{"b", "c"}, ids(ops), "a's equal upsert and zz's delete left out")
	require.Equal(t, message.OpDelete, ops[1].Op)
	empty, err := f.blobs.Get(context.Background(), keys.Change("r1", g2, 1))
	require.NoError(t, err)
	require.Empty(t, empty)
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// A publish that fails leaves the events in the outbox; the sweeper
// publishes them once they are SweepAge old, not before. After each sweep
// it records how long the oldest event still waiting has waited.
func TestSweeperPublishesWhatTheFastPathMissed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var lines metricstest.Capture
	f.relay.Metrics = metrics.New(&lines, metrics.Options{Function: "relay"})
	ages := func() []float64 {
		var out []float64
		for _, l := range lines.Lines() {
			out = append(out, l[metrics.OutboxAgeSeconds].(float64))
		}
		return out
	}
	down := true
	f.topic.Fail = func(topic.Message) error {
		if down {
			return errors.New("topic down")
		}
		return nil
	}
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`))
	f.relay.Flush(context.Background(), "r1")
	require.Len(t, pgstoretest.Outbox(t, f.store), 2)
	down = false
	st, err := f.relay.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, st.Taken, "younger than SweepAge: the fast path's")
	pgstoretest.AgeOutbox(t, f.store, 31*time.Second)
	down = true
	_, err = f.relay.Sweep(context.Background())
	require.NoError(t, err)
	down = false
	pgstoretest.AgeOutbox(t, f.store, time.Minute)
	st, err = f.relay.Sweep(context.Background())
	require.NoError(t, err)
	require.Equal(t, 2, st.Published)
	require.Len(t, f.published(), 2)
	require.Empty(t, pgstoretest.Outbox(t, f.store))
	// Waiting since the failed fast path (the clock is the database's:
	// the first two are a little over 0 s and 31 s); none after the sweep
	// that published.
	got := ages()
	require.Len(t, got, 3)
	require.True(t, got[0] >= 0 && got[0] < 1, "%v", got)
	require.True(t, got[1] >= 31 && got[1] < 32, "%v", got)
	require.Zero(t, got[2], "%v", got)
	require.NoError(t, lines.Validate())
}

// A chunk object that changed since the apply read it (a different
// checksum) is never published as the change: the event stays.
func TestChangedChunkObjectIsNotPublished(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gen := f.start(1)
	f.applyChunk(gen, 0, upsert("a", `{"v":"1"}`), del("gone"))
	require.NoError(t, f.blobs.Put(context.Background(), keys.Chunk("r1", gen, 0), []byte(`{"op":"delete","product_id":"x"}`+"\n")))
	f.relay.Flush(context.Background(), "r1")
	got := f.published()
	require.Len(t, got, 1)
	require.Equal(t, message.TypeSnapshotApplied, got[0].Type)
	left := pgstoretest.Outbox(t, f.store)
	require.Len(t, left, 1)
	require.Equal(t, message.TypeChanges, left[0].Type)
}

// A replay publishes the chunks' changes again under their first ids and
// times: from the change object the relay wrote (the chunk had ops that
// changed nothing) or else from the chunk object; a chunk that changed
// nothing stays unpublished, and one whose objects are gone is dropped.
func TestReplayFindsTheChangeObjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g1 := f.start(1)
	f.applyChunk(g1, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`))
	g2 := f.start(3)
	f.applyChunk(g2, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"2"}`)) // a changed nothing
	f.applyChunk(g2, 1, upsert("b", `{"v":"2"}`))                           // nothing changed
	f.applyChunk(g2, 2, upsert("c", `{"v":"2"}`))
	f.relay.Flush(context.Background(), "r1")
	first := map[string]message.Envelope{}
	for _, env := range f.published() {
		first[env.ID] = env
	}
	require.Len(t, first, 5, "3 chunks with changes, 2 applied")
	// g1's chunk object has expired (the bucket's lifecycle rule).
	expired := goneBlobs{Blobs: f.blobs, gone: keys.Chunk("r1", g1, 0)}
	rl := relay.New(relay.Config{DrainSize: 3}, f.store, expired, f.topic, slog.New(slog.DiscardHandler))

	changes, lifecycle, err := f.store.Replay(context.Background(), "r1", f.now.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 4, changes)
	require.Equal(t, 2, lifecycle)
	rl.Flush(context.Background(), "r1")
	again := f.published()
	require.Len(t, again, 4, "g1's chunk is gone (dropped); g2's chunk 1 changed nothing")
	for _, env := range again {
		orig, ok := first[env.ID]
		require.True(t, ok, env.ID)
		require.True(t, orig.Time.Equal(env.Time))
		if env.Type == message.TypeChanges {
			require.Equal(t, orig.Object, env.Object)
			require.Equal(t, orig.SHA256, env.SHA256)
			require.Equal(t, orig.Count, env.Count)
		}
	}
	require.Empty(t, pgstoretest.Outbox(t, f.store))
}

// goneBlobs is a bucket in which one object has expired.
type goneBlobs struct {
	*inmem.Blobs
	gone string
}

func (b goneBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	if key == b.gone {
		return nil, blob.ErrNotFound
	}
	return b.Blobs.Get(ctx, key)
}
