package pgstore_test

import (
	"context"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// openStores opens stores on a control and a shard database of their own, migrated.
func openStores(t *testing.T) *pgstore.Stores {
	t.Helper()
	s := pgstoretest.New(t)
	require.NoError(t, s.Migrate(context.Background()), "migrations are idempotent")
	return s
}

// newStores gives each test its own control and shard databases, with retailer r1.
func newStores(t *testing.T) *pgstore.Stores {
	t.Helper()
	s := openStores(t)
	require.NoError(t, s.Control.CreateRetailer(context.Background(), catalog.Retailer{ID: "r1", Shard: 0, TokenHash: []byte("h1")}))
	return s
}

func upsert(id, attrs string) message.ChunkOp {
	h := catalog.HashAttributes([]byte(attrs))
	return message.ChunkOp{Op: message.OpUpsert, ProductID: id, Hash: hex.EncodeToString(h[:]), Attributes: []byte(attrs)}
}

func del(id string) message.ChunkOp { return message.ChunkOp{Op: message.OpDelete, ProductID: id} }

// chunkOf is the message of chunk seq of gen, as the diff sends it (the
// checksum is a stand-in: the store only records it).
func chunkOf(retailerID string, gen int64, seq int) message.ChunkMessage {
	return message.ChunkMessage{RetailerID: retailerID, Generation: gen, Seq: seq,
		Key: keys.Chunk(retailerID, gen, seq), SHA256: strings.Repeat("0", 64)}
}

// startGeneration reserves gen, receives it and starts applying with chunks chunks.
func startGeneration(t *testing.T, sh *pgstore.Shard, chunks int) int64 {
	t.Helper()
	return startGenerationOf(t, sh, "r1", chunks)
}

// startGenerationOf is startGeneration for any retailer.
func startGenerationOf(t *testing.T, sh *pgstore.Shard, retailerID string, chunks int) int64 {
	t.Helper()
	ctx := context.Background()
	gen, err := sh.ReserveGeneration(ctx, retailerID, "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	d, err := sh.BeginDiff(ctx, retailerID, gen, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	_, err = sh.TakeOver(ctx, retailerID, gen)
	require.NoError(t, err)
	require.NoError(t, sh.StartApplying(ctx, retailerID, gen, catalog.Counts{}, chunks))
	return gen
}

func catalogOf(t *testing.T, sh *pgstore.Shard) map[string]string {
	t.Helper()
	rows, err := sh.Pool().Query(context.Background(), `SELECT product_id, attributes::text FROM products WHERE retailer_id = 'r1' AND NOT deleted`)
	require.NoError(t, err)
	out := map[string]string{}
	for rows.Next() {
		var id, attrs string
		require.NoError(t, rows.Scan(&id, &attrs))
		out[id] = attrs
	}
	require.NoError(t, rows.Err())
	return out
}

func TestGenerationsAreReservedInIncreasingOrder(t *testing.T) {
	t.Parallel()
	sh := newStores(t).Shards[0]
	var last int64
	for i := 0; i < 5; i++ {
		g, err := sh.ReserveGeneration(context.Background(), "r1", "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		require.Greater(t, g, last)
		last = g
	}
}

// I2 and I4: once generation 8 arrived, nothing of generation 7 is written,
// and rows stamped by 8 are never changed by 7's writes.
func TestFencingRefusesZombieChunks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g7 := startGeneration(t, sh, 1)
	g8 := startGeneration(t, sh, 1)
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g8, 0), []message.ChunkOp{upsert("a", `{"v": "8"}`), upsert("b", `{"v": "8"}`)})
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkApplied, res.Outcome)
	require.True(t, res.GenerationApplied)

	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g7, 0), []message.ChunkOp{upsert("a", `{"v": "7"}`), upsert("c", `{"v": "7"}`), del("b")})
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkSuperseded, res.Outcome)
	require.Equal(t, map[string]string{"a": `{"v": "8"}`, "b": `{"v": "8"}`}, catalogOf(t, sh))

	st, err := sh.Generation(ctx, "r1", g7)
	require.NoError(t, err)
	require.Equal(t, catalog.StateSuperseded, st.State)
	require.Equal(t, g8, *st.SupersededBy)
}

// I2 in SQL alone: even with the retailer fence bypassed, the row fence
// refuses an older generation's upsert and delete.
func TestRowFenceInSQL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	_, err := sh.Pool().Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation) VALUES ('r1', 'a', '{"v":"9"}', '\x00', 9)`)
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `INSERT INTO retailer_state (retailer_id, latest_generation) VALUES ('r1', 7)`)
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `INSERT INTO generations (retailer_id, generation, state, object_key, upload_expires_at, chunks_total) VALUES ('r1', 7, 'applying', 'k', now(), 2)`)
	require.NoError(t, err)
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", 7, 0), []message.ChunkOp{upsert("a", `{"v": "7"}`)})
	require.NoError(t, err)
	require.Zero(t, res.Written)
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", 7, 1), []message.ChunkOp{del("a")})
	require.NoError(t, err)
	require.Zero(t, res.Written)
	require.Equal(t, map[string]string{"a": `{"v": "9"}`}, catalogOf(t, sh))
}

// I3: a product deleted by generation 9 stays deleted when a late write of
// generation 8 arrives, even past the retailer fence.
func TestNoResurrection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := startGeneration(t, sh, 1)
	_, err := sh.ApplyChunk(ctx, chunkOf("r1", g1, 0), []message.ChunkOp{upsert("x", `{"v": "1"}`)})
	require.NoError(t, err)
	g2 := startGeneration(t, sh, 1)
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g2, 0), []message.ChunkOp{del("x")})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Written)
	require.Empty(t, catalogOf(t, sh))

	// A zombie of generation 1 with a second chunk, bypassing the retailer fence.
	_, err = sh.Pool().Exec(ctx, `UPDATE retailer_state SET latest_generation = $1 WHERE retailer_id = 'r1'`, g1)
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET state = 'applying', chunks_total = 5 WHERE retailer_id = 'r1' AND generation = $1`, g1)
	require.NoError(t, err)
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g1, 1), []message.ChunkOp{upsert("x", `{"v": "zombie"}`)})
	require.NoError(t, err)
	require.Zero(t, res.Written)
	require.Empty(t, catalogOf(t, sh), "x stays deleted")
}

// I6: an upsert of equal content writes no row version and no event.
func TestUnchangedRowsAreNotWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := startGeneration(t, sh, 1)
	_, err := sh.ApplyChunk(ctx, chunkOf("r1", g1, 0), []message.ChunkOp{upsert("a", `{"v": "1"}`), upsert("b", `{"v": "1"}`)})
	require.NoError(t, err)
	var xminBefore string
	require.NoError(t, sh.Pool().QueryRow(ctx, `SELECT xmin::text FROM products WHERE product_id = 'a'`).Scan(&xminBefore))

	g2 := startGeneration(t, sh, 1)
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g2, 0), []message.ChunkOp{upsert("a", `{"v": "1"}`), upsert("b", `{"v": "2"}`), del("zz")})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Written)
	var xminAfter string
	require.NoError(t, sh.Pool().QueryRow(ctx, `SELECT xmin::text FROM products WHERE product_id = 'a'`).Scan(&xminAfter))
	require.Equal(t, xminBefore, xminAfter, "row a was not rewritten")
	changed, unchanged := changeEvent(t, sh, g2, 0)
	require.Equal(t, 1, changed, "the chunk's change event counts b alone")
	require.Equal(t, []string{"a", "zz"}, unchanged, "a (equal) and zz (absent) changed nothing")
}

// A chunk is counted once, whether delivered twice in a row or twice at once.
func TestChunkCountedExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g := startGeneration(t, sh, 2)
	ops := []message.ChunkOp{upsert("a", `{"v": "1"}`)}
	outcomes := make([]catalog.ApplyOutcome, 4)
	var wg sync.WaitGroup
	for i := range outcomes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := sh.ApplyChunk(ctx, chunkOf("r1", g, 0), ops)
			require.NoError(t, err)
			outcomes[i] = res.Outcome
		}()
	}
	wg.Wait()
	applied := 0
	for _, o := range outcomes {
		if o == catalog.ChunkApplied {
			applied++
		} else {
			require.Equal(t, catalog.ChunkDuplicate, o)
		}
	}
	require.Equal(t, 1, applied)
	st, err := sh.Generation(ctx, "r1", g)
	require.NoError(t, err)
	require.Equal(t, 1, st.ChunksApplied)
	require.Equal(t, catalog.StateApplying, st.State)

	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g, 1), []message.ChunkOp{upsert("b", `{"v": "1"}`)})
	require.NoError(t, err)
	require.True(t, res.GenerationApplied)
	st, err = sh.Generation(ctx, "r1", g)
	require.NoError(t, err)
	require.Equal(t, catalog.StateApplied, st.State)
	require.NotNil(t, st.AppliedAt)
}

// An upload that arrives after a newer one ends superseded, even arriving last.
func TestOutOfOrderArrivalIsSuperseded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1, err := sh.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.MarkArrived(ctx, "r1", g1, time.Now(), time.Hour)
	require.NoError(t, err)
	g2, err := sh.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	d, err := sh.BeginDiff(ctx, "r1", g2, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	_, err = sh.TakeOver(ctx, "r1", g2)
	require.NoError(t, err)
	d, err = sh.BeginDiff(ctx, "r1", g1, "")
	require.NoError(t, err)
	require.False(t, d.Proceed)
	st, err := sh.Generation(ctx, "r1", g1)
	require.NoError(t, err)
	require.Equal(t, catalog.StateSuperseded, st.State)
	require.Equal(t, g2, *st.SupersededBy)
	require.NotNil(t, st.ReceivedAt)

	// A duplicate event of the finished generation does nothing.
	require.NoError(t, sh.StartApplying(ctx, "r1", g2, catalog.Counts{}, 0))
	d, err = sh.BeginDiff(ctx, "r1", g2, "")
	require.NoError(t, err)
	require.False(t, d.Proceed)
}

func TestConfirmOnlyHeldLatest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g, err := sh.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	require.ErrorIs(t, sh.Confirm(ctx, "r1", g), catalog.ErrConflict, "not held")
	_, err = sh.BeginDiff(ctx, "r1", g, "")
	require.NoError(t, err)
	_, err = sh.Hold(ctx, "r1", g, "empty_snapshot", "empty", catalog.Counts{})
	require.NoError(t, err)
	require.NoError(t, sh.Confirm(ctx, "r1", g))
	d, err := sh.BeginDiff(ctx, "r1", g, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	require.True(t, d.Confirmed)
	require.ErrorIs(t, sh.Confirm(ctx, "r1", 99), catalog.ErrNotFound)
}

// A chunk mixing new ids (bulk-loaded with COPY) and existing ones (the
// fenced upsert) writes each changed row once, with one event each, and
// leaves rows of a newer generation alone.
func TestChunkMixesNewAndExistingRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := startGeneration(t, sh, 1)
	_, err := sh.ApplyChunk(ctx, chunkOf("r1", g1, 0), []message.ChunkOp{upsert("a", `{"v": "1"}`), upsert("b", `{"v": "1"}`)})
	require.NoError(t, err)
	g2 := startGeneration(t, sh, 1)
	_, err = sh.Pool().Exec(ctx, `UPDATE products SET generation = $1 + 10, attributes = '{"v": "newer"}' WHERE product_id = 'b'`, g2)
	require.NoError(t, err)
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g2, 0), []message.ChunkOp{
		upsert("a", `{"v": "2"}`), upsert("b", `{"v": "2"}`), upsert("c", `{"v": "2"}`), upsert("d", `{"v": "2"}`)})
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkApplied, res.Outcome)
	require.EqualValues(t, 3, res.Written, "a updated, c and d inserted, b fenced")
	require.Equal(t, map[string]string{"a": `{"v": "2"}`, "b": `{"v": "newer"}`, "c": `{"v": "2"}`, "d": `{"v": "2"}`}, catalogOf(t, sh))
	changed, unchanged := changeEvent(t, sh, g2, 0)
	require.Equal(t, 3, changed)
	require.Equal(t, []string{"b"}, unchanged, "b is a newer generation's")
}

// changeEvent reads the outbox row of chunk seq of gen: how many products it
// changed and, sorted, the ids of its ops that changed nothing.
func changeEvent(t *testing.T, sh *pgstore.Shard, gen int64, seq int) (changed int, unchanged []string) {
	t.Helper()
	require.NoError(t, sh.Pool().QueryRow(context.Background(), `SELECT changed, ARRAY(SELECT unnest(unchanged_ids) ORDER BY 1)
		FROM outbox WHERE event_type = 'catalog.changes' AND generation = $1 AND seq = $2`, gen, seq).Scan(&changed, &unchanged))
	return changed, unchanged
}

// startGenerationCounted is startGenerationOf with the diff's counts: a
// generation that updates or deletes takes the staged path from its first
// chunk on.
func startGenerationCounted(t *testing.T, sh *pgstore.Shard, chunks int, c catalog.Counts) int64 {
	t.Helper()
	ctx := context.Background()
	gen, err := sh.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	d, err := sh.BeginDiff(ctx, "r1", gen, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	_, err = sh.TakeOver(ctx, "r1", gen)
	require.NoError(t, err)
	require.NoError(t, sh.StartApplying(ctx, "r1", gen, c, chunks))
	return gen
}

// The staged path on one session, chunk after chunk: the session's staging
// table holds only the chunk being applied (emptied at every commit, and by
// a rollback), so a chunk never writes another's rows; a generation that
// only inserts COPYs, and falls back to the staged path when an id exists.
func TestStagedChunksOnOneSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	cfg := s.Shards[0].Pool().Config().Copy()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	sh := pgstore.NewShard(pool)

	// Inserts only: COPY; the second chunk's "a" exists: staged, a fenced.
	g1 := startGenerationCounted(t, sh, 2, catalog.Counts{Inserted: 3})
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g1, 0), []message.ChunkOp{upsert("a", `{"v": "1"}`), upsert("b", `{"v": "1"}`)})
	require.NoError(t, err)
	require.EqualValues(t, 2, res.Written)
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g1, 1), []message.ChunkOp{upsert("c", `{"v": "1"}`), upsert("a", `{"v": "again"}`)})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Written, "c inserted; a is this generation's already")
	_, unchanged := changeEvent(t, sh, g1, 1)
	require.Equal(t, []string{"a"}, unchanged)

	// Updates and deletes: staged from the first chunk.
	g2 := startGenerationCounted(t, sh, 3, catalog.Counts{Updated: 1, Deleted: 1, Inserted: 1})
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g2, 0), []message.ChunkOp{upsert("b", `{"v": "2"}`), del("c"), upsert("d", `{"v": "2"}`), del("gone")})
	require.NoError(t, err)
	require.EqualValues(t, 3, res.Written)
	_, unchanged = changeEvent(t, sh, g2, 0)
	require.Equal(t, []string{"gone"}, unchanged)

	// A chunk whose transaction rolls back (its generation stopped applying
	// while it wrote) leaves nothing staged for the next one.
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET state = 'rejected' WHERE retailer_id = 'r1' AND generation = $1`, g2)
	require.NoError(t, err)
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g2, 1), []message.ChunkOp{upsert("e", `{"v": "2"}`), del("a")})
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkSuperseded, res.Outcome)
	g3 := startGenerationCounted(t, sh, 1, catalog.Counts{Updated: 1})
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g3, 0), []message.ChunkOp{upsert("b", `{"v": "3"}`)})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Written)
	_, unchanged = changeEvent(t, sh, g3, 0)
	require.Empty(t, unchanged)
	require.Equal(t, map[string]string{"a": `{"v": "1"}`, "b": `{"v": "3"}`, "d": `{"v": "2"}`}, catalogOf(t, sh),
		"e and the delete of a rolled back with their chunk")
}

// errOf is the error of a call that also returns an undo (Reject, Hold).
func errOf(_ catalog.Undo, err error) error { return err }
