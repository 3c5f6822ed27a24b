package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// The first version of an upload is pinned; another version is refused:
// ignored while the pinned one is diffed, the end of a held generation.
func testUploadVersionPinned(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g := reserve(t, s, r)
	d, err := s.BeginDiff(ctx(t), r, g, `"a"`)
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, `"a"`, d.ETag)

	// The same version again (a duplicate event, a re-sent job): proceeds.
	d, err = s.BeginDiff(ctx(t), r, g, `"a"`)
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	d, err = s.BeginDiff(ctx(t), r, g, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, `"a"`, d.ETag)
	pinned, err := s.PinUpload(ctx(t), r, g, `"b"`)
	require.NoError(t, err)
	require.Equal(t, `"a"`, pinned, "the first version stays pinned")

	// Another version while diffing: refused, the generation untouched.
	d, err = s.BeginDiff(ctx(t), r, g, `"b"`)
	require.NoError(t, err)
	require.False(t, d.Proceed)
	require.Contains(t, d.Reason, "another version")
	require.Equal(t, catalog.StateDiffing, status(t, s, r, g).State)

	// Held, then replaced: rejected, and confirming it is a conflict.
	require.NoError(t, s.Hold(ctx(t), r, g, "empty_snapshot", "empty", catalog.Counts{}))
	d, err = s.BeginDiff(ctx(t), r, g, `"b"`)
	require.NoError(t, err)
	require.False(t, d.Proceed)
	st := status(t, s, r, g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeUploadChanged, st.ErrorCode)
	require.ErrorIs(t, s.Confirm(ctx(t), r, g), catalog.ErrConflict)

	// Without a version in the event, the first read pins one.
	g2 := reserve(t, s, r)
	d, err = s.BeginDiff(ctx(t), r, g2, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Empty(t, d.ETag)
	pinned, err = s.PinUpload(ctx(t), r, g2, `"c"`)
	require.NoError(t, err)
	require.Equal(t, `"c"`, pinned)
}

// A generation applying when its upload turns out gone ends rejected, and
// its chunks still in flight write nothing.
func testRejectWhileApplying(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g := start(t, s, r, 2, catalog.Counts{Inserted: 2, Products: 2})
	require.Equal(t, catalog.ChunkApplied, applyChunk(t, s, r, g, 0, Upsert("a", `{"v": "1"}`)).Outcome)
	require.NoError(t, s.Reject(ctx(t), r, g, catalog.CodeUploadMissing, "gone", 0))
	require.Equal(t, catalog.ChunkSuperseded, applyChunk(t, s, r, g, 1, Upsert("b", `{"v": "1"}`)).Outcome)
	st := status(t, s, r, g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, 1, st.ChunksApplied)
	require.Equal(t, map[string]any{"a": jsonOf(t, `{"v": "1"}`)}, catalogOf(t, s, r))
}
