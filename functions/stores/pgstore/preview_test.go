package pgstore_test

// Dry runs (DESIGN 13): a preview never supersedes, is never superseded,
// never holds, blocks or stops a real generation, counts against the
// reservation limit and emits no event.

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// dryRunDiffing reserves a dry run, marks its upload arrived and begins its diff.
func dryRunDiffing(t *testing.T, sh *pgstore.Shard) (int64, catalog.DiffDecision) {
	t.Helper()
	ctx := context.Background()
	gen, err := sh.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	st, err := sh.MarkArrived(ctx, "r1", gen, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, st)
	d, err := sh.BeginDiff(ctx, "r1", gen, "etag-preview")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.True(t, d.DryRun)
	return gen, d
}

func outboxEventsOf(t *testing.T, sh *pgstore.Shard, gen int64) int {
	t.Helper()
	var n int
	require.NoError(t, sh.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE retailer_id = 'r1' AND generation = $1`, gen).Scan(&n))
	return n
}

// A dry run reserved after an unused slot does not supersede it; a real
// reservation after the dry run's slot does not supersede the dry run; an
// upload arriving after the preview's is not stopped by it, nor is a real
// generation being diffed, nor its confirmation.
func TestDryRunNeverSupersedesAndIsNeverSuperseded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	g1 := applied(t, sh, upsert("a", `{"v":"1"}`))

	slot, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	preview, d := dryRunDiffing(t, sh)
	require.Equal(t, g1, d.Baseline, "a preview is read against the applied generation")
	st, err := sh.Generation(ctx, "r1", slot)
	require.NoError(t, err)
	require.Equal(t, catalog.StateAwaitingUpload, st.State, "a dry run supersedes no slot")

	// The older real slot's upload arrives after the preview's and is
	// diffed: nothing stops it for the preview.
	_, err = sh.MarkArrived(ctx, "r1", slot, time.Now(), time.Hour)
	require.NoError(t, err)
	newer, err := sh.NewerArrival(ctx, "r1", slot)
	require.NoError(t, err)
	require.Zero(t, newer, "a preview's arrival is no newer arrival")
	rd, err := sh.BeginDiff(ctx, "r1", slot, "etag-real")
	require.NoError(t, err)
	require.True(t, rd.Proceed, rd.Reason)
	_, err = sh.TakeOver(ctx, "r1", slot)
	require.NoError(t, err)

	// A newer real generation takes over while the preview is diffing:
	// the preview is not superseded, and IsLatest of the real one holds.
	g3 := startGeneration(t, sh, 1)
	ok, err := sh.IsLatest(ctx, "r1", g3)
	require.NoError(t, err)
	require.True(t, ok)
	st, err = sh.Generation(ctx, "r1", preview)
	require.NoError(t, err)
	require.Equal(t, catalog.StateDiffing, st.State, "a preview is never superseded")
	require.True(t, st.DryRun)

	require.NoError(t, sh.Preview(ctx, "r1", preview, catalog.HoldMassDelete, "would delete", catalog.Counts{Inserted: 1, Deleted: 1, Products: 1}, 1, g1))
	st, err = sh.Generation(ctx, "r1", preview)
	require.NoError(t, err)
	require.Equal(t, catalog.StatePreviewed, st.State)
	require.True(t, st.State.Terminal())
	require.Equal(t, catalog.HoldMassDelete, st.ErrorCode, "error names the hold a real upload would meet")
	require.Equal(t, int64(1), st.Inserted)
	require.NotNil(t, st.PlanPages)
	require.Zero(t, outboxEventsOf(t, sh, preview), "a preview emits no event")

	_, latest, _ := fenceOf(t, sh, "r1")
	require.Equal(t, g3, latest, "a preview never raises the fence")
}

// A held generation can be confirmed with a later preview received; a
// preview rejected writes no event and reserves no undo, even when the
// catalog is a mix no upload is coming to repair.
func TestDryRunBlocksNoConfirmationAndReservesNoUndo(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	applied(t, sh, upsert("a", `{"v":"1"}`))
	held, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	d, err := sh.BeginDiff(ctx, "r1", held, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	_, err = sh.Hold(ctx, "r1", held, catalog.HoldMassDelete, "deletes everything", catalog.Counts{})
	require.NoError(t, err)
	preview, _ := dryRunDiffing(t, sh)
	require.NoError(t, sh.Confirm(ctx, "r1", held), "a preview does not make a held upload older than the latest")

	undo, err := sh.Reject(ctx, "r1", preview, catalog.Rejection{Code: "malformed_csv", Message: "bad row", Line: 2})
	require.NoError(t, err)
	require.True(t, undo.Rejected)
	require.Zero(t, undo.Generation, "a preview wrote nothing: no undo")
	require.Zero(t, outboxEventsOf(t, sh, preview), "a preview's rejection emits no event")

	// Half applied and rejected with a preview in progress: the undo is
	// still reserved (the preview repairs nothing).
	g := halfApplied(t, sh, upsert("a", `{"v":"2"}`))
	_, _ = dryRunDiffing(t, sh)
	undo, err = sh.Reject(ctx, "r1", g, applyFailed)
	require.NoError(t, err)
	require.NotZero(t, undo.Generation, "a preview on its way is no upload coming to repair the mix")
}

// Dry runs are reservations of the retailer's: they count against the
// hourly limit.
func TestDryRunsCountAgainstTheReservationLimit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	for range 2 {
		_, err := sh.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
		require.NoError(t, err)
	}
	_, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
	require.NoError(t, err)
	_, err = sh.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
	_, err = sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 3)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
}
