package pgstore_test

// Dry runs of delta uploads (DESIGN 13): a dry run's slot of mode delta,
// which supersedes nothing, waits for no older generation in progress,
// makes no real delta wait and counts against the reservation limit.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// A delta's dry run reserved after an unused slot leaves it awaiting its
// upload; its status is mode delta, dry_run. Received while an older
// generation applies, it is no waiting delta, its diff begins at once
// (against the applied generation) and the sweeper re-drives it if it
// idles there (it waits for nothing); a real delta received then waits
// for the older generation only, and once that one is applied, starts
// with the dry run still diffing.
func TestDeltaDryRunSupersedesNothingAndWaitsForNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	g1 := applied(t, sh, upsert("a", `{"v":"1"}`))
	older := startGeneration(t, sh, 2)
	slot, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)

	preview, err := sh.ReserveDeltaDryRun(ctx, "r1", "jsonl", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	st, err := sh.Generation(ctx, "r1", slot)
	require.NoError(t, err)
	require.Equal(t, catalog.StateAwaitingUpload, st.State, "a dry run supersedes no slot")
	st, err = sh.Generation(ctx, "r1", preview)
	require.NoError(t, err)
	require.Equal(t, catalog.ModeDelta, st.Mode)
	require.True(t, st.DryRun)
	require.Equal(t, catalog.StateAwaitingUpload, st.State)

	state, err := sh.MarkArrived(ctx, "r1", preview, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, state)
	waiting, err := sh.WaitingDelta(ctx, "r1")
	require.NoError(t, err)
	require.Zero(t, waiting, "a dry run is never a waiting delta")
	stalled, err := s.Stalled(ctx, time.Now().Add(time.Minute), 1000)
	require.NoError(t, err)
	var redriven bool
	for _, g := range stalled {
		redriven = redriven || (g.RetailerID == "r1" && g.Generation == preview)
	}
	require.True(t, redriven, "a received delta dry run idles behind nothing: the sweeper re-drives it (%v)", stalled)

	d, err := sh.BeginDiff(ctx, "r1", preview, "etag-preview")
	require.NoError(t, err)
	require.True(t, d.Proceed, "a delta's dry run waits for no older generation: %s", d.Reason)
	require.True(t, d.DryRun)
	require.Equal(t, catalog.ModeDelta, d.Mode)
	require.Equal(t, g1, d.Baseline, "read against the applied generation of its arrival")
	st, err = sh.Generation(ctx, "r1", older)
	require.NoError(t, err)
	require.Equal(t, catalog.StateApplying, st.State, "a preview stops nothing")

	real, err := sh.ReserveDelta(ctx, "r1", "jsonl", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.MarkArrived(ctx, "r1", real, time.Now(), time.Hour)
	require.NoError(t, err)
	rd, err := sh.BeginDiff(ctx, "r1", real, "etag-real")
	require.NoError(t, err)
	require.False(t, rd.Proceed)
	require.Contains(t, rd.Reason, "waits for generation", "the real delta waits for the older generation in progress")
	for seq := range 2 {
		_, err := sh.ApplyChunk(ctx, chunkOf("r1", older, seq), nil)
		require.NoError(t, err)
	}
	waiting, err = sh.WaitingDelta(ctx, "r1")
	require.NoError(t, err)
	require.Equal(t, real, waiting, "once the older one is applied, the real delta starts: the dry run diffing blocks it not")
	rd, err = sh.BeginDiff(ctx, "r1", real, "etag-real")
	require.NoError(t, err)
	require.True(t, rd.Proceed, rd.Reason)
	require.Equal(t, older, rd.Baseline)

	require.NoError(t, sh.Preview(ctx, "r1", preview, "", "", catalog.Counts{Updated: 1, Products: 1}, 0, g1))
	st, err = sh.Generation(ctx, "r1", preview)
	require.NoError(t, err)
	require.Equal(t, catalog.StatePreviewed, st.State)
	require.Equal(t, catalog.ModeDelta, st.Mode)
	require.Zero(t, outboxEventsOf(t, sh, preview), "a preview emits no event")
}

// A delta's dry run is a reservation of the retailer's: it counts against
// the hourly limit, and is refused over it.
func TestDeltaDryRunsCountAgainstTheReservationLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	for range 2 {
		_, err := sh.ReserveDeltaDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
		require.NoError(t, err)
	}
	_, err := sh.ReserveDelta(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
	require.NoError(t, err)
	_, err = sh.ReserveDeltaDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
	_, err = sh.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
}
