package ops_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/operate/ops"
)

// A collection of every retailer goes on past one whose move between
// shards is switching (its shard refuses its writes, here for good: 429
// retailer_moving with a Retry-After when collected alone): the scheduled
// run's queue delivers it again and, on its third delivery, leaves it to
// the next run, instead of stopping there and leaving every retailer after
// it uncollected for the day. (Frozen, not moved: a source record in state
// moved is a forwarding record, which the run itself collects.)
func TestGCOfEveryRetailerGoesOnPastAMovingOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	for _, id := range []string{"r1", "r2"} {
		f.onboard(id)
		f.upload(id, catalogCSV)
		f.upload(id, "product_id,price\na,1\n") // b and c deleted
	}
	f.now = f.now.Add(20 * 24 * time.Hour)
	_, shard, err := f.store.ForRetailer(ctx, "r1")
	require.NoError(t, err)
	_, err = shard.Pool().Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r1', 'mv_test', 'source', 'frozen', 1)`)
	require.NoError(t, err)

	req := httptest.NewRequest(http.MethodPost, "/v1/admin/gc", strings.NewReader(`{"retailer_id":"r1"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"retailer_moving"`)
	require.NotEmpty(t, w.Header().Get("Retry-After"))

	require.NoError(t, f.ops.RunTask(ctx, ops.TaskGC))
	r := newJobRunner(t, f, f.ops)
	r.drain()
	require.Equal(t, 3, r.receives["r1"], "r1 (first) is moving: delivered again, then left to the next run")
	require.Equal(t, 1, r.receives["r2"], "the others are not held up")
	require.Empty(t, r.dead)
	for _, id := range []string{"b", "c"} {
		_, err := f.store.CatalogRow(ctx, "r2", id)
		require.Error(t, err, "r2's tombstone of %s is gone", id)
		_, err = f.store.CatalogRow(ctx, "r1", id)
		require.NoError(t, err, "r1's tombstone of %s is left to the next run", id)
	}
}
