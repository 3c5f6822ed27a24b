package pgstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// applied makes gen (reserved, taken over, applying with one chunk) the
// baseline: its one chunk written.
func applied(t *testing.T, sh *pgstore.Shard, ops ...message.ChunkOp) int64 {
	t.Helper()
	gen := startGeneration(t, sh, 1)
	res, err := sh.ApplyChunk(context.Background(), chunkOf("r1", gen, 0), ops)
	require.NoError(t, err)
	require.True(t, res.GenerationApplied)
	return gen
}

// halfApplied starts gen with two chunks and writes the first.
func halfApplied(t *testing.T, sh *pgstore.Shard, ops ...message.ChunkOp) int64 {
	t.Helper()
	gen := startGeneration(t, sh, 2)
	res, err := sh.ApplyChunk(context.Background(), chunkOf("r1", gen, 0), ops)
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkApplied, res.Outcome)
	return gen
}

var applyFailed = catalog.Rejection{Code: catalog.CodeApplyFailed, Message: "chunk 2 of 2 was refused"}

// I10: a generation rejected after it took over and wrote some chunks is
// undone: the same transaction reserves the next generation, a rollback
// whose content is the last applied generation's upload (pinned), received
// and confirmed in advance; the rejection's message names it.
func TestRejectHalfAppliedReservesTheUndo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := applied(t, sh, upsert("a", `{"v":"1"}`))
	g2 := halfApplied(t, sh, upsert("a", `{"v":"2"}`))

	undo, err := sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Rejected: true, Generation: g2 + 1, Source: g1}, undo)

	st2, err := sh.Generation(ctx, "r1", g2)
	require.NoError(t, err)
	require.Equal(t, catalog.StateRejected, st2.State)
	require.Equal(t, catalog.CodeApplyFailed, st2.ErrorCode)
	require.Contains(t, st2.ErrorMessage, "generation 3 returns the catalog to generation 1, the last applied")

	st3, err := sh.Generation(ctx, "r1", undo.Generation)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, st3.State)
	require.Equal(t, catalog.ModeRollback, st3.Mode)
	require.Equal(t, &g1, st3.SourceGeneration)
	require.Equal(t, &g2, st3.Undoes)
	require.True(t, st3.Confirmed)

	d, err := sh.BeginDiff(ctx, "r1", undo.Generation, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, keys.Upload("r1", g1), d.ObjectKey, "the undo reads the applied generation's upload")
	require.Equal(t, g2, d.Undoes)
	require.Equal(t, 1, d.Attempt)
	to, err := sh.TakeOver(ctx, "r1", undo.Generation)
	require.NoError(t, err)
	require.Equal(t, g1, to.Baseline)
	require.Equal(t, []int64{g2}, to.Stopped, "the rejected generation's rows are repaired (I5)")

	again, err := sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{}, again, "rejecting again does nothing")
}

// I10: nothing to undo when the rejected generation never took over (an
// older one still applies, or nothing was written), or when a newer
// upload has arrived that will repair what it wrote; when that newer one
// then fails before taking over, its rejection reserves the undo.
func TestRejectUndoesOnlyAMixNobodyRepairs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := applied(t, sh, upsert("a", `{"v":"1"}`))

	// Rejected before taking over: nothing was written.
	g2, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.BeginDiff(ctx, "r1", g2, "")
	require.NoError(t, err)
	undo, err := sh.Reject(ctx, "r1", g2, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 2})
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Rejected: true}, undo)

	// Half applied, but a newer upload has arrived: it repairs.
	g3 := halfApplied(t, sh, upsert("a", `{"v":"3"}`))
	g4, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.MarkArrived(ctx, "r1", g4, time.Now(), time.Hour)
	require.NoError(t, err)
	undo, err = sh.Reject(ctx, "r1", g3, applyFailed)
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Rejected: true}, undo, "g4 will repair g3's rows")

	// g4 is rejected before it takes over: nobody repairs g3's rows now.
	_, err = sh.BeginDiff(ctx, "r1", g4, "")
	require.NoError(t, err)
	undo, err = sh.Reject(ctx, "r1", g4, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 2})
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Rejected: true, Generation: g4 + 1, Source: g1}, undo)
}

// I10: a held upload waits on its retailer and repairs nothing meanwhile:
// when it was the one coming to repair a rejected generation's rows, the
// hold reserves the undo.
func TestHoldOfTheRepairingUploadReservesTheUndo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := applied(t, sh, upsert("a", `{"v":"1"}`))
	g2 := halfApplied(t, sh, upsert("a", `{"v":"2"}`))
	g3, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.BeginDiff(ctx, "r1", g3, "")
	require.NoError(t, err)
	undo, err := sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.Zero(t, undo.Generation, "g3 is diffing: it will repair")
	undo, err = sh.Hold(ctx, "r1", g3, catalog.HoldMassDelete, "deletes everything", catalog.Counts{})
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Generation: g3 + 1, Source: g1}, undo)
}

// A rejected undo is not undone again (the chain stops for an operator),
// and an offboarding is never given up.
func TestRejectStopsAtUndoesAndOffboardings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	applied(t, sh, upsert("a", `{"v":"1"}`))
	g2 := halfApplied(t, sh, upsert("a", `{"v":"2"}`))
	undo, err := sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.NotZero(t, undo.Generation)
	d, err := sh.BeginDiff(ctx, "r1", undo.Generation, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	_, err = sh.TakeOver(ctx, "r1", undo.Generation)
	require.NoError(t, err)
	require.NoError(t, sh.StartApplying(ctx, "r1", undo.Generation, catalog.Counts{Updated: 1}, 2))
	_, err = sh.ApplyChunk(ctx, chunkOf("r1", undo.Generation, 0), []message.ChunkOp{upsert("a", `{"v":"1"}`)})
	require.NoError(t, err)
	again, err := sh.Reject(ctx, "r1", undo.Generation, applyFailed)
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Rejected: true}, again, "no undo of an undo")

	off, err := s.Offboard(ctx, "r1", []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	d, err = sh.BeginDiff(ctx, "r1", off, "")
	require.NoError(t, err)
	require.True(t, d.Offboarding)
	require.Empty(t, d.ObjectKey, "an offboarding reads the empty catalog")
	undo, err = sh.Reject(ctx, "r1", off, catalog.Rejection{Code: catalog.CodeDiffFailed, Message: "failed"})
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{}, undo)
	st, err := sh.Generation(ctx, "r1", off)
	require.NoError(t, err)
	require.Equal(t, catalog.StateDiffing, st.State, "an offboarding is never given up")
}

// I12: a rejection's messages are bounded and fit for text columns,
// whatever the file held: a NUL, invalid UTF-8, a megabyte.
func TestRejectBoundsItsMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.BeginDiff(ctx, "r1", g, "")
	require.NoError(t, err)
	huge := "column " + strings.Repeat("x", 1<<20)
	problems := make([]catalog.Problem, 0, 150)
	for i := range 150 {
		problems = append(problems, catalog.Problem{Code: "malformed_csv", Line: i + 1, Message: "a\x00b\xff" + huge})
	}
	_, err = sh.Reject(ctx, "r1", g, catalog.Rejection{Code: "malformed_csv", Message: "nul \x00 here " + huge, Line: 1, Problems: problems})
	require.NoError(t, err)
	st, err := sh.Generation(ctx, "r1", g)
	require.NoError(t, err)
	require.Equal(t, catalog.StateRejected, st.State)
	require.LessOrEqual(t, len(st.ErrorMessage), catalog.MaxMessageBytes)
	require.Len(t, st.Problems, catalog.MaxProblems)
	require.True(t, st.MoreProblems)
	for _, p := range st.Problems {
		require.LessOrEqual(t, len(p.Message), catalog.MaxMessageBytes)
		require.NotContains(t, p.Message, "\x00")
	}
}

// The undos the pipeline reserves itself are not the retailer's
// reservations: they do not count against its hourly limit.
func TestUndosDoNotCountAgainstTheReservationLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	applied(t, sh, upsert("a", `{"v":"1"}`))
	g2 := halfApplied(t, sh, upsert("a", `{"v":"2"}`))
	undo, err := sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.NotZero(t, undo.Generation)
	// g1 and g2 were reserved (2 of 4 an hour): two more go, the fifth does not.
	for range 2 {
		_, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 4)
		require.NoError(t, err)
	}
	_, err = sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 4)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
}
