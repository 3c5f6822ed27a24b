package pgstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Reconciliation's runs: a run of every retailer learns its total late,
// results overwrite their own, and a run finishes with its last result.
func testReconcileRuns(t *testing.T, s Store, id func(string) string) {
	a, b := id("a"), id("b")
	onboard(t, s, a)
	onboard(t, s, b)
	ids, err := s.RetailerIDs(tctx(t), a[:len(a)-1], 2)
	require.NoError(t, err)
	require.Equal(t, []string{a, b}, ids, "in id order, after the given id")
	ids, err = s.RetailerIDs(tctx(t), a, 1)
	require.NoError(t, err)
	require.Equal(t, []string{b}, ids)

	run := id("run")
	require.NoError(t, s.CreateReconcileRun(tctx(t), catalog.ReconcileRun{ID: run, Repair: true}))
	rep, err := s.ReconcileReport(tctx(t), run, 10)
	require.NoError(t, err)
	require.Equal(t, run, rep.Run.ID)
	require.True(t, rep.Run.Repair)
	require.Zero(t, rep.Run.Total)
	require.Nil(t, rep.Run.FinishedAt)
	require.WithinDuration(t, time.Now(), rep.Run.RequestedAt, time.Minute)

	now := time.Now()
	record := func(r catalog.ReconcileResult) {
		t.Helper()
		r.RunID, r.CheckedAt = run, now
		require.NoError(t, s.RecordReconcileResult(tctx(t), r))
	}
	record(catalog.ReconcileResult{RetailerID: a, Generation: 3, Products: 5, Rows: 5, Missing: 1, Examples: []string{"x"}})
	record(catalog.ReconcileResult{RetailerID: b, Generation: 1, Products: 2, Rows: 2})
	rep, err = s.ReconcileReport(tctx(t), run, 10)
	require.NoError(t, err)
	require.Nil(t, rep.Run.FinishedAt, "the total is not known yet")
	require.NoError(t, s.SetReconcileTotal(tctx(t), run, 2))
	rep, err = s.ReconcileReport(tctx(t), run, 10)
	require.NoError(t, err)
	require.NotNil(t, rep.Run.FinishedAt, "every retailer has a result")
	require.Equal(t, 2, rep.Results)
	require.Equal(t, 2, rep.Checked)
	require.Equal(t, 1, rep.Divergent)
	require.Len(t, rep.Notable, 1)
	require.Equal(t, a, rep.Notable[0].RetailerID)
	require.Equal(t, []string{"x"}, rep.Notable[0].Examples)
	require.EqualValues(t, 1, rep.Notable[0].Missing)

	// A retried check overwrites its own result.
	record(catalog.ReconcileResult{RetailerID: a, Generation: 3, Products: 5, Rows: 5, Skipped: "busy"})
	rep, err = s.ReconcileReport(tctx(t), run, 10)
	require.NoError(t, err)
	require.Equal(t, 2, rep.Results)
	require.Equal(t, 1, rep.Checked)
	require.Zero(t, rep.Divergent)
	require.Equal(t, "busy", rep.Notable[0].Skipped)

	// One retailer's run: finished by its result.
	one := id("one")
	require.NoError(t, s.CreateReconcileRun(tctx(t), catalog.ReconcileRun{ID: one, RetailerID: a, Total: 1}))
	record2 := catalog.ReconcileResult{RunID: one, RetailerID: a, CheckedAt: now}
	require.NoError(t, s.RecordReconcileResult(tctx(t), record2))
	rep, err = s.ReconcileReport(tctx(t), one, 10)
	require.NoError(t, err)
	require.Equal(t, a, rep.Run.RetailerID)
	require.NotNil(t, rep.Run.FinishedAt)

	_, err = s.ReconcileReport(tctx(t), id("none"), 10)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	n, err := s.PruneReconcileRuns(tctx(t), time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(2))
	_, err = s.ReconcileReport(tctx(t), run, 10)
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// The walk sees the live rows in product_id byte order from one snapshot
// whose fence is the one expected; a repair writes under the fence (also
// over rows of the applied generation itself), leaves rows of newer
// generations alone, and writes a change event numbered after the chunks.
func testReconcileWalkAndRepair(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g0 := start(t, s, r, 1, catalog.Counts{Inserted: 1, Products: 1})
	applyChunk(t, s, r, g0, 0, upsert("Z", `{"v":"0"}`))
	g1 := start(t, s, r, 2, catalog.Counts{Inserted: 3, Deleted: 1, Products: 3})
	applyChunk(t, s, r, g1, 0, upsert("b", `{"v":"2"}`), upsert("a", `{"v":"1"}`))
	applyChunk(t, s, r, g1, 1, upsert("c", `{"v":"3"}`), del("Z"))
	drainAll(t, s, r)
	fence, err := s.Fence(tctx(t), r)
	require.NoError(t, err)

	var seen []string
	var attrs []any
	err = s.ScanCatalog(tctx(t), r, fence, "", "", func(id, a []byte) error {
		seen = append(seen, string(id))
		var v any
		require.NoError(t, json.Unmarshal(a, &v))
		attrs = append(attrs, v)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b", "c"}, seen, "live rows only, in byte order")
	require.Equal(t, []any{jsonOf(t, `{"v":"1"}`), jsonOf(t, `{"v":"2"}`), jsonOf(t, `{"v":"3"}`)}, attrs)
	stale := fence
	stale.Applied--
	require.ErrorIs(t, s.ScanCatalog(tctx(t), r, stale, "", "", func(id, a []byte) error { return nil }), catalog.ErrSuperseded)
	var part []string
	require.NoError(t, s.ScanCatalog(tctx(t), r, fence, "aa", "c", func(id, a []byte) error { part = append(part, string(id)); return nil }))
	require.Equal(t, []string{"b"}, part, "a part: ids in [from, to)")
	part = nil
	require.NoError(t, s.ScanCatalog(tctx(t), r, fence, "b", "", func(id, a []byte) error { part = append(part, string(id)); return nil }))
	require.Equal(t, []string{"b", "c"}, part, "the last part: no end")

	normalized, err := s.NormalizeAttributes(tctx(t), r, []string{`{"n":1.50,"s":"x"}`, `{}`})
	require.NoError(t, err)
	require.Len(t, normalized, 2)
	require.Equal(t, jsonOf(t, `{"n":1.50,"s":"x"}`), jsonOf(t, normalized[0]))

	// Repair: a rewritten to the snapshot's value (its row is of g1 itself),
	// c tombstoned, d inserted.
	ops := []message.ChunkOp{upsert("a", `{"v":"fixed"}`), upsert("d", `{"v":"4"}`), del("c"), del("never")}
	res, err := s.RepairRows(tctx(t), r, g1, ops, "chunks/x/repair-1", "00")
	require.NoError(t, err)
	require.False(t, res.Superseded)
	require.EqualValues(t, 3, res.Written)
	require.Empty(t, res.Fenced)
	require.Equal(t, 2, res.Seq, "after the generation's two chunks")
	require.Equal(t, map[string]any{"a": jsonOf(t, `{"v":"fixed"}`), "b": jsonOf(t, `{"v":"2"}`), "d": jsonOf(t, `{"v":"4"}`)},
		productsOf(t, s, r))
	row, err := s.CatalogRow(tctx(t), r, "c")
	require.NoError(t, err)
	require.True(t, row.Deleted)
	require.Equal(t, g1, row.Generation, "stamped with the applied generation")
	got := drainAll(t, s, r)
	require.Equal(t, []string{"catalog.changes 2 3 [never]"}, kinds(got), "one change event, numbered after the chunks")
	require.Equal(t, "chunks/x/repair-1", got[0].ObjectKey)

	// The same repair again writes nothing (the rows are equal) but is a new event.
	res, err = s.RepairRows(tctx(t), r, g1, ops[:1], "chunks/x/repair-2", "00")
	require.NoError(t, err)
	require.Zero(t, res.Written)
	require.Equal(t, 3, res.Seq)
	require.Equal(t, []string{"catalog.changes 3 0 [a]"}, kinds(drainAll(t, s, r)))

	// A directory repair sets entries of the repair's own generation.
	require.NoError(t, s.UpdateDirectory(tctx(t), r, g1, []message.ChunkOp{upsert("c", `{}`)}))
	require.NoError(t, s.RepairDirectory(tctx(t), r, g1, []message.ChunkOp{del("c"), upsert("d", `{}`)}))
	owners, err := s.DirectoryRetailers(tctx(t), "c", 10)
	require.NoError(t, err)
	require.NotContains(t, owners, r)
	owners, err = s.DirectoryRetailers(tctx(t), "d", 10)
	require.NoError(t, err)
	require.Contains(t, owners, r)

	// A newer generation took over: a repair of g1 writes nothing.
	g2 := start(t, s, r, 1, catalog.Counts{Updated: 1, Products: 3})
	res, err = s.RepairRows(tctx(t), r, g1, ops[:1], "chunks/x/repair-3", "00")
	require.NoError(t, err)
	require.True(t, res.Superseded)
	applyChunk(t, s, r, g2, 0, upsert("b", `{"v":"g2"}`))
	require.Equal(t, catalog.StateApplied, status(t, s, r, g2).State)

	// A repair never touches a row of a newer generation (a row stamped
	// past the applied one, as only a hand-made change could).
	g3 := start(t, s, r, 1, catalog.Counts{Products: 3})
	applyChunk(t, s, r, g3, 0, upsert("a", `{"v":"g3"}`))
	res, err = s.RepairRows(tctx(t), r, g2, []message.ChunkOp{upsert("a", `{"v":"old"}`)}, "chunks/x/repair-4", "00")
	require.NoError(t, err)
	require.True(t, res.Superseded, "g2 is no longer the applied generation")
	drainAll(t, s, r)
}
