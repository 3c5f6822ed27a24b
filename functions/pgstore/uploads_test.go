package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// The first version of an upload is pinned; another version is refused:
// ignored while the pinned one is diffed, the end of a held generation.
func TestUploadVersionPinned(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g, err := sh.ReserveGeneration(ctx, "r1", "", time.Now().Add(time.Hour))
	require.NoError(t, err)
	d, err := sh.BeginDiff(ctx, "r1", g, `"a"`)
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, `"a"`, d.ETag)

	// The same version again (a duplicate event, a re-sent job): proceeds.
	d, err = sh.BeginDiff(ctx, "r1", g, `"a"`)
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	d, err = sh.BeginDiff(ctx, "r1", g, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, `"a"`, d.ETag)
	pinned, err := sh.PinUpload(ctx, "r1", g, `"b"`)
	require.NoError(t, err)
	require.Equal(t, `"a"`, pinned, "the first version stays pinned")

	// Another version while diffing: refused, the generation untouched.
	d, err = sh.BeginDiff(ctx, "r1", g, `"b"`)
	require.NoError(t, err)
	require.False(t, d.Proceed)
	require.Contains(t, d.Reason, "another version")
	st, err := sh.Generation(ctx, "r1", g)
	require.NoError(t, err)
	require.Equal(t, catalog.StateDiffing, st.State)

	// Held, then replaced: rejected, and confirming it is a conflict.
	require.NoError(t, sh.Hold(ctx, "r1", g, "empty_snapshot", "empty", catalog.Counts{}))
	d, err = sh.BeginDiff(ctx, "r1", g, `"b"`)
	require.NoError(t, err)
	require.False(t, d.Proceed)
	st, err = sh.Generation(ctx, "r1", g)
	require.NoError(t, err)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeUploadChanged, st.ErrorCode)
	require.ErrorIs(t, sh.Confirm(ctx, "r1", g), catalog.ErrConflict)
}

// A generation applying when its upload turns out gone ends rejected, and
// its chunks still in flight write nothing.
func TestRejectWhileApplying(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g := startGeneration(t, sh, 2)
	res, err := sh.ApplyChunk(ctx, "r1", g, 0, nil)
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkApplied, res.Outcome)
	require.NoError(t, sh.Reject(ctx, "r1", g, catalog.CodeUploadMissing, "gone", 0))
	res, err = sh.ApplyChunk(ctx, "r1", g, 1, nil)
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkSuperseded, res.Outcome)
	st, err := sh.Generation(ctx, "r1", g)
	require.NoError(t, err)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, 1, st.ChunksApplied)
}
