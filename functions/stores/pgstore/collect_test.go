package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// Collection (DESIGN 14): what each kind removes, what it keeps, the
// retailer-level fence that keeps I3 true once tombstones are gone, and
// collection beside an apply.

// applyGeneration applies one generation of r1 in one chunk (shard and
// directory, as the apply does) and returns it.
func applyGeneration(t *testing.T, s *pgstore.Stores, ops ...message.ChunkOp) int64 {
	t.Helper()
	ctx := context.Background()
	sh := s.Shards[0]
	gen := startGeneration(t, sh, 1)
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", gen, 0), ops)
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkApplied, res.Outcome)
	require.True(t, res.GenerationApplied)
	require.NoError(t, s.Control.UpdateDirectory(ctx, "r1", gen, ops))
	return gen
}

// age moves a generation's application and last state change back by d.
func age(t *testing.T, s *pgstore.Stores, gen int64, d time.Duration) {
	t.Helper()
	_, err := s.Shards[0].Pool().Exec(context.Background(), `UPDATE generations
		SET applied_at = applied_at - make_interval(secs => $2), state_changed_at = state_changed_at - make_interval(secs => $2)
		WHERE retailer_id = 'r1' AND generation = $1`, gen, d.Seconds())
	require.NoError(t, err)
}

// rowsOf lists r1's product rows, tombstones included: id -> generation
// (negative for a tombstone).
func rowsOf(t *testing.T, sh *pgstore.Shard) map[string]int64 {
	t.Helper()
	rows, err := sh.Pool().Query(context.Background(), `SELECT product_id, CASE WHEN deleted THEN -generation ELSE generation END
		FROM products WHERE retailer_id = 'r1'`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var g int64
		require.NoError(t, rows.Scan(&id, &g))
		out[id] = g
	}
	require.NoError(t, rows.Err())
	return out
}

// directoryOf lists r1's directory entries: id -> generation (negative for a tombstone).
func directoryOf(t *testing.T, s *pgstore.Stores) map[string]int64 {
	t.Helper()
	rows, err := s.Control.Pool().Query(context.Background(), `SELECT product_id, CASE WHEN deleted THEN -generation ELSE generation END
		FROM product_directory WHERE retailer_id = 'r1'`)
	require.NoError(t, err)
	out := map[string]int64{}
	for rows.Next() {
		var id string
		var g int64
		require.NoError(t, rows.Scan(&id, &g))
		out[id] = g
	}
	require.NoError(t, rows.Err())
	return out
}

func count(t *testing.T, sh *pgstore.Shard, query string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, sh.Pool().QueryRow(context.Background(), query, args...).Scan(&n))
	return n
}

func policy(now time.Time) catalog.CollectPolicy {
	return catalog.CollectPolicy{AppliedBefore: now.Add(-catalog.DefaultTombstoneAfter),
		ParkedBefore: now.Add(-catalog.DefaultParkedAfter), Window: 2}
}

// Every kind of row collection removes goes only when it is eligible:
// tombstones of generations applied before the horizon (not those of a
// generation applied since), their directory entries and consumers'
// versions, the chunk progress of generations finished before it, outbox
// rows parked before their retention. Live rows, their entries and
// versions, and usage stay. Run as the ops function's role: it needs no
// DELETE of its own (the rules are the 0110 functions).
func TestCollectRemovesOnlyWhatIsEligible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := newStores(t)
	sh := admin.Shards[0]
	g1 := applyGeneration(t, admin, upsert("a", `{"v":1}`), upsert("b", `{"v":1}`), upsert("c", `{"v":1}`), upsert("d", `{"v":1}`), upsert("e", `{"v":1}`))
	g2 := applyGeneration(t, admin, del("a"), del("b"), del("e"))
	g3 := applyGeneration(t, admin, del("c"))
	age(t, admin, g1, 40*24*time.Hour)
	age(t, admin, g2, 30*24*time.Hour)
	for _, id := range []string{"a", "b", "c", "d"} {
		require.NoError(t, admin.RecordVersions(ctx, "analytics", "r1", []string{id}, []int64{g1}))
	}
	require.NoError(t, admin.RecordVersions(ctx, "analytics", "r1", []string{"a", "b", "c"}, []int64{g2, g2, g3}))
	require.NoError(t, admin.RecordVersions(ctx, "webhooks", "r1", []string{"a"}, []int64{g2}))
	// Two change events parked long ago (never redriven), one parked today.
	_, err := sh.Pool().Exec(ctx, `UPDATE outbox SET parked_at = now() - interval '20 days'
		WHERE event_type = 'catalog.changes' AND generation IN ($1, $2)`, g1, g2)
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `UPDATE outbox SET parked_at = now() WHERE event_type = 'catalog.changes' AND generation = $1`, g3)
	require.NoError(t, err)
	outboxBefore := count(t, sh, `SELECT count(*) FROM outbox`)
	usageBefore := count(t, sh, `SELECT count(*) FROM usage_daily`)

	ops := openAs(t, admin, catalogsql.RoleOps)
	var seen []catalog.Collected
	got, err := ops.Collect(ctx, "r1", policy(time.Now()), func(c catalog.Collected) { seen = append(seen, c) })
	require.NoError(t, err)
	require.Equal(t, g2, got.Floor, "the floor is the newest generation applied before the horizon")
	require.EqualValues(t, 3, got.Tombstones)
	require.EqualValues(t, 3, got.DirectoryEntries)
	require.EqualValues(t, 2, got.ChunkRows, "g1's and g2's chunk")
	require.EqualValues(t, 2, got.OutboxRows)
	require.EqualValues(t, 3, got.ConsumerVersions, "analytics' a and b (e was never recorded), webhooks' a")
	require.NotEmpty(t, seen)
	require.Equal(t, got, seen[len(seen)-1], "progress ends with the total")
	require.Greater(t, got.Batches, 3, "windows of 2 rows: several transactions")

	require.Equal(t, map[string]int64{"c": -g3, "d": g1}, rowsOf(t, sh), "g3's tombstone stays: g3 was applied today")
	require.Equal(t, map[string]int64{"c": -g3, "d": g1}, directoryOf(t, admin))
	require.EqualValues(t, 1, count(t, sh, `SELECT count(*) FROM applied_chunks WHERE retailer_id = 'r1'`))
	require.EqualValues(t, 1, count(t, sh, `SELECT count(*) FROM applied_chunks WHERE retailer_id = 'r1' AND generation = $1`, g3))
	require.EqualValues(t, outboxBefore-2, count(t, sh, `SELECT count(*) FROM outbox`))
	require.EqualValues(t, 1, count(t, sh, `SELECT count(*) FROM outbox WHERE parked_at IS NOT NULL`), "today's parked row stays")
	require.EqualValues(t, usageBefore, count(t, sh, `SELECT count(*) FROM usage_daily`), "usage is finance's record: kept")
	require.EqualValues(t, 2, count(t, sh, `SELECT count(*) FROM consumer_versions WHERE retailer_id = 'r1'`), "c and d")
	require.Equal(t, map[string]string{"d": `{"v": 1}`}, catalogOf(t, sh))

	again, err := ops.Collect(ctx, "r1", policy(time.Now()), nil)
	require.NoError(t, err)
	require.Equal(t, catalog.Collected{Floor: g2, Batches: again.Batches}, again, "a second collection finds nothing")
}

// A generation in progress keeps what it wrote: its tombstones and its
// chunk progress, however old the generations before it; it then finishes
// as if nothing happened. The horizon never passes a generation that is
// not finished, whatever was applied after it.
func TestCollectKeepsAGenerationInProgress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	g1 := applyGeneration(t, s, upsert("a", `{"v":1}`), upsert("b", `{"v":1}`), upsert("c", `{"v":1}`))
	g2 := applyGeneration(t, s, del("a"))
	age(t, s, g1, 40*24*time.Hour)
	age(t, s, g2, 30*24*time.Hour)
	g3 := startGeneration(t, sh, 2)
	ops0 := []message.ChunkOp{del("b"), upsert("a", `{"v":3}`)}
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g3, 0), ops0)
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkApplied, res.Outcome)
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET state_changed_at = now() - interval '30 days' WHERE retailer_id = 'r1' AND generation = $1`, g3)
	require.NoError(t, err)

	got, err := s.Collect(ctx, "r1", policy(time.Now()), nil)
	require.NoError(t, err)
	require.Equal(t, g2, got.Floor)
	require.Zero(t, got.Tombstones, "a was brought back by g3, b is g3's tombstone")
	require.EqualValues(t, 2, got.ChunkRows, "g1's and g2's, not g3's")
	require.Equal(t, map[string]int64{"a": g3, "b": -g3, "c": g1}, rowsOf(t, sh))
	require.Equal(t, []int{0}, progressOf(t, sh, g3))

	res, err = sh.ApplyChunk(ctx, chunkOf("r1", g3, 1), []message.ChunkOp{upsert("c", `{"v":3}`)})
	require.NoError(t, err)
	require.True(t, res.GenerationApplied)
	require.Equal(t, map[string]string{"a": `{"v": 3}`, "c": `{"v": 3}`}, catalogOf(t, sh))

	// An older generation left unfinished (a held upload nobody
	// superseded) holds the horizon below it.
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET state = 'held' WHERE retailer_id = 'r1' AND generation = $1`, g1)
	require.NoError(t, err)
	age(t, s, g3, 30*24*time.Hour)
	got, err = s.Collect(ctx, "r1", policy(time.Now()), nil)
	require.NoError(t, err)
	require.Equal(t, g2, got.Floor, "the floor never goes down, and does not rise past the held g1")
}

func progressOf(t *testing.T, sh *pgstore.Shard, gen int64) []int {
	t.Helper()
	p, err := sh.Progress(context.Background(), "r1", gen)
	require.NoError(t, err)
	return p.AppliedSeqs
}

// I3 after collection: once the tombstone of x is gone, a zombie chunk of
// the generation before its delete, replayed with the retailer's latest
// fence wound back (as TestNoResurrection does), is refused by the
// retailer-level write floor: the catalog and the directory are unchanged,
// and x has no row at all. Without the floor the row fence has nothing to
// compare with and x comes back. A chunk of a generation at the floor or
// above still writes.
func TestZombieChunkRefusedAfterCollection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	g1 := applyGeneration(t, s, upsert("x", `{"v":1}`), upsert("y", `{"v":1}`))
	g2 := applyGeneration(t, s, del("x"))
	age(t, s, g1, 40*24*time.Hour)
	age(t, s, g2, 30*24*time.Hour)
	got, err := s.Collect(ctx, "r1", policy(time.Now()), nil)
	require.NoError(t, err)
	require.EqualValues(t, 1, got.Tombstones)
	require.EqualValues(t, 1, got.DirectoryEntries)
	require.Equal(t, map[string]int64{"y": g1}, rowsOf(t, sh))

	// The plain zombie: refused (the latest fence, and the floor).
	zombie := []message.ChunkOp{upsert("x", `{"v":"zombie"}`), upsert("y", `{"v":"zombie"}`)}
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g1, 1), zombie)
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkSuperseded, res.Outcome)

	// The zombie with the latest fence wound back and its generation
	// applying again: only the write floor stands in its way.
	_, err = sh.Pool().Exec(ctx, `UPDATE retailer_state SET latest_generation = $1 WHERE retailer_id = 'r1'`, g1)
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET state = 'applying', chunks_total = 5 WHERE retailer_id = 'r1' AND generation = $1`, g1)
	require.NoError(t, err)
	for seq, ops := range [][]message.ChunkOp{zombie, {upsert("x", `{"v":"zombie"}`)}} {
		res, err = sh.ApplyChunk(ctx, chunkOf("r1", g1, 2+seq), ops)
		require.NoError(t, err)
		require.Equal(t, catalog.ChunkSuperseded, res.Outcome, "chunk %d of g1", 2+seq)
		require.Zero(t, res.Written)
	}
	require.Equal(t, map[string]int64{"y": g1}, rowsOf(t, sh), "x has no row, y is g1's")
	require.Equal(t, map[string]string{"y": `{"v": 1}`}, catalogOf(t, sh))

	// The directory's own fence: a late directory write of g1 changes nothing.
	require.NoError(t, s.Control.UpdateDirectory(ctx, "r1", g1, zombie))
	require.Equal(t, map[string]int64{"y": g1}, directoryOf(t, s))
	retailers, err := s.Control.DirectoryRetailers(ctx, "x", 10)
	require.NoError(t, err)
	require.Empty(t, retailers)

	// The next upload writes as ever.
	_, err = sh.Pool().Exec(ctx, `UPDATE retailer_state SET latest_generation = $1 WHERE retailer_id = 'r1'`, g2)
	require.NoError(t, err)
	g3 := applyGeneration(t, s, upsert("x", `{"v":3}`))
	require.Equal(t, map[string]int64{"x": g3, "y": g1}, rowsOf(t, sh))
	require.Equal(t, map[string]int64{"x": g3, "y": g1}, directoryOf(t, s))
}

// Collection beside an apply, and beside itself: a generation whose chunks
// bring back products whose tombstones collection is deleting, and delete
// others, applies exactly (no write lost to a tombstone deleted under it),
// while two collections run in a loop with windows of a few rows.
func TestCollectConcurrentWithApply(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	const n, chunks = 600, 12
	var first, deletes []message.ChunkOp
	for i := 0; i < n; i++ {
		first = append(first, upsert(fmt.Sprintf("p%04d", i), `{"v":1}`))
		if i%2 == 0 {
			deletes = append(deletes, del(fmt.Sprintf("p%04d", i)))
		}
	}
	g1 := applyGeneration(t, s, first...)
	g2 := applyGeneration(t, s, deletes...)
	age(t, s, g1, 40*24*time.Hour)
	age(t, s, g2, 30*24*time.Hour)

	// g3: every deleted product back, every fourth live one deleted.
	want := map[string]string{}
	var plan [chunks][]message.ChunkOp
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("p%04d", i)
		switch {
		case i%2 == 0:
			plan[i%chunks] = append(plan[i%chunks], upsert(id, `{"v":3}`))
			want[id] = `{"v": 3}`
		case i%4 == 1:
			plan[i%chunks] = append(plan[i%chunks], del(id))
		default:
			want[id] = `{"v": 1}`
		}
	}
	g3 := startGeneration(t, sh, chunks)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	var mu sync.Mutex
	var total catalog.Collected
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := policy(time.Now())
			p.Window = 7
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := s.Collect(ctx, "r1", p, nil)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				total.Add(got)
				mu.Unlock()
			}
		}()
	}
	for seq, ops := range plan {
		res, err := sh.ApplyChunk(ctx, chunkOf("r1", g3, seq), ops)
		require.NoError(t, err)
		require.Equal(t, catalog.ChunkApplied, res.Outcome)
		require.NoError(t, s.Control.UpdateDirectory(ctx, "r1", g3, ops))
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, want, catalogOf(t, sh))
	st, err := sh.Generation(ctx, "r1", g3)
	require.NoError(t, err)
	require.Equal(t, catalog.StateApplied, st.State)
	rows := rowsOf(t, sh)
	for id, g := range rows {
		require.True(t, g == g1 || g == g3 || g == -g3, "%s: %d (no tombstone of g2 may survive a reinsert, none is lost)", id, g)
	}
	dir := directoryOf(t, s)
	for id := range want {
		require.Positive(t, dir[id], "%s is live in the directory", id)
	}
	mu.Lock()
	defer mu.Unlock()
	require.LessOrEqual(t, total.Tombstones, int64(n/2), "no tombstone counted twice")
}
