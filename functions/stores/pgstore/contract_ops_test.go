package pgstore_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// What the ops function reads: a retailer's counters (zero before its
// first reservation), a generation's progress (its state's last change,
// its chunks applied with the newest one's time), and a product's row on
// the writer, tombstones included.
func testOpsViews(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	f, err := s.Fence(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, catalog.Fence{}, f)

	g1 := reserve(t, s, r)
	p, err := s.Progress(tctx(t), r, g1)
	require.NoError(t, err)
	reserved := p.StateChangedAt
	require.WithinDuration(t, time.Now(), reserved, time.Minute)
	require.Empty(t, p.AppliedSeqs)
	require.Nil(t, p.LastChunkAt)
	require.Zero(t, p.Redrives)

	_, err = s.BeginDiff(tctx(t), r, g1, "")
	require.NoError(t, err)
	_, err = s.TakeOver(tctx(t), r, g1)
	require.NoError(t, err)
	require.NoError(t, s.StartApplying(tctx(t), r, g1, catalog.Counts{Inserted: 2, Products: 2}, 3))
	p, err = s.Progress(tctx(t), r, g1)
	require.NoError(t, err)
	require.False(t, p.StateChangedAt.Before(reserved), "a state change moves the clock")
	applyChunk(t, s, r, g1, 2, upsert("a", `{"v":"1"}`))
	applyChunk(t, s, r, g1, 0, upsert("b", `{"v":"2"}`))
	p, err = s.Progress(tctx(t), r, g1)
	require.NoError(t, err)
	require.Equal(t, []int{0, 2}, p.AppliedSeqs)
	require.True(t, p.Applied(2) && !p.Applied(1))
	require.NotNil(t, p.LastChunkAt)
	require.False(t, p.LastMoved().Before(*p.LastChunkAt))

	f, err = s.Fence(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, catalog.Fence{Reserved: g1, Latest: g1}, f, "not applied yet: chunk 1 is missing")
	applyChunk(t, s, r, g1, 1)
	f, err = s.Fence(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, catalog.Fence{Reserved: g1, Latest: g1, Applied: g1, AppliedProducts: 2}, f)

	g2 := start(t, s, r, 1, catalog.Counts{Deleted: 1, Products: 1})
	applyChunk(t, s, r, g2, 0, del("a"))
	row, err := s.CatalogRow(tctx(t), r, "b")
	require.NoError(t, err)
	require.False(t, row.Deleted)
	require.Equal(t, g1, row.Generation)
	var attrs map[string]any
	require.NoError(t, json.Unmarshal(row.Attributes, &attrs))
	require.Equal(t, map[string]any{"v": "2"}, attrs)
	row, err = s.CatalogRow(tctx(t), r, "a")
	require.NoError(t, err)
	require.True(t, row.Deleted, "a tombstone is a row too")
	require.Equal(t, g2, row.Generation)
	_, err = s.CatalogRow(tctx(t), r, "never")
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.Progress(tctx(t), r, 99)
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// The sweeper's view: generations with work left that have not moved since
// a time, with their re-drives; a re-drive restarts the clock.
func testStalledGenerations(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	done := start(t, s, r, 1, catalog.Counts{Inserted: 1, Products: 1})
	applyChunk(t, s, r, done, 0, upsert("a", `{}`))
	applying := start(t, s, r, 3, catalog.Counts{Inserted: 2, Updated: 1, Products: 3})
	applyChunk(t, s, r, applying, 1, upsert("b", `{}`))
	other := id("other")
	onboard(t, s, other)
	diffing, _ := arrive(t, s, other)
	held, _ := arrive(t, s, other)
	require.NoError(t, errOf(s.Hold(tctx(t), other, held, "empty_snapshot", "empty", catalog.Counts{})))
	reserve(t, s, other) // awaiting its upload: nothing to re-drive

	mine := func(before time.Time) map[string]catalog.StalledGeneration {
		t.Helper()
		list, err := s.Stalled(tctx(t), before, 1000)
		require.NoError(t, err)
		out := map[string]catalog.StalledGeneration{}
		for _, g := range list {
			if g.RetailerID == r || g.RetailerID == other {
				out[g.RetailerID+"/"+string(rune('0'+g.Generation))] = g
			}
		}
		return out
	}
	require.Empty(t, mine(time.Now().Add(-time.Hour)), "nothing idle for an hour")
	got := mine(time.Now().Add(time.Minute))
	require.Len(t, got, 2, "applying and diffing; not the applied, the unconfirmed hold, the slot: %v", got)
	a := got[r+"/"+string(rune('0'+applying))]
	require.Equal(t, catalog.StateApplying, a.State)
	require.Equal(t, 3, a.ChunksTotal)
	require.EqualValues(t, 3, a.Changed)
	require.Zero(t, a.Redrives)
	require.WithinDuration(t, time.Now(), a.LastMoved, time.Minute)
	require.Equal(t, catalog.StateDiffing, got[other+"/"+string(rune('0'+diffing))].State)

	n, err := s.RecordRedrive(tctx(t), r, applying, "2 chunks sent again")
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = s.RecordRedrive(tctx(t), r, applying, "2 chunks sent again")
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got = mine(time.Now().Add(time.Minute))
	require.Equal(t, 2, got[r+"/"+string(rune('0'+applying))].Redrives)
	p, err := s.Progress(tctx(t), r, applying)
	require.NoError(t, err)
	require.Equal(t, 2, p.Redrives)
	require.NotNil(t, p.LastRedriveAt)

	require.NoError(t, s.Confirm(tctx(t), other, held))
	require.Contains(t, mine(time.Now().Add(time.Minute)), other+"/"+string(rune('0'+held)), "a confirmed hold waits for its diff")
}
