package ops_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/operate/ops"
)

// POST /v1/admin/gc: the admin token only, a body of at most a retailer
// id, and the answer says what went. Nothing is eligible until the deleting
// generation was applied TombstoneAfter ago (19 days); then the deleted
// products' rows and directory entries go, the catalog the storefront reads
// is the same, and reconciliation stays clean.
func TestGCRoute(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.onboard("r1")
	f.onboard("r2")
	f.upload("r1", catalogCSV)
	f.upload("r1", "product_id,price\na,1\n") // b and c deleted
	f.upload("r2", catalogCSV)
	before := f.catalogOf("r1")
	require.Equal(t, map[string]string{"a": `{"price":"1"}`}, before)

	for _, c := range []struct {
		body, token string
		status      int
		code        string
	}{
		{`{}`, "", http.StatusUnauthorized, "missing_token"},
		{`{}`, "token-r1", http.StatusForbidden, "forbidden"},
		{`{"retailer_id":"nobody"}`, adminToken, http.StatusNotFound, "retailer_not_found"},
		{`{"retailer_id":"bad id"}`, adminToken, http.StatusBadRequest, "invalid_retailer_id"},
		{`{"retailer":"r1"}`, adminToken, http.StatusBadRequest, "invalid_body"},
		{`{"retailer_id":7}`, adminToken, http.StatusBadRequest, "invalid_body"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/v1/admin/gc", strings.NewReader(c.body))
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		w := httptest.NewRecorder()
		f.ops.ServeHTTP(w, req)
		require.Equal(t, c.status, w.Code, "%s as %q: %s", c.body, c.token, w.Body.String())
		var problem struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &problem), w.Body.String())
		require.Equal(t, c.code, problem.Error.Code, w.Body.String())
	}

	gc := func(body string) map[string]int64 {
		t.Helper()
		var got map[string]int64
		require.Equal(t, http.StatusOK, f.call(http.MethodPost, "/v1/admin/gc", body, &got))
		return got
	}
	require.Equal(t, map[string]int64{"retailers": 2, "tombstones": 0, "directory_entries": 0, "chunk_rows": 0,
		"outbox_rows": 0, "consumer_versions": 0, "move_records": 0}, gc(``), "nothing is old enough yet")

	f.now = f.now.Add(20 * 24 * time.Hour)
	got := gc(`{"retailer_id":"r1"}`)
	require.EqualValues(t, 1, got["retailers"])
	require.EqualValues(t, 2, got["tombstones"], "b and c")
	require.EqualValues(t, 2, got["directory_entries"])
	require.Positive(t, got["chunk_rows"])
	require.Zero(t, got["outbox_rows"], "nothing parked")
	for _, id := range []string{"b", "c"} {
		_, err := f.store.CatalogRow(ctx, "r1", id)
		require.Error(t, err, "%s's tombstone is gone", id)
	}
	require.Equal(t, before, f.catalogOf("r1"))
	require.Equal(t, map[string]string{"a": `{"price":"1"}`, "b": `{"price":"2"}`, "c": `{"price":"3"}`}, f.catalogOf("r2"), "r2 untouched")
	rep := f.reconcile("r1", false)
	require.Empty(t, rep.Divergent)
	require.Empty(t, rep.Skipped)

	// The scheduled task collects every retailer (over the queue); after
	// it there is nothing left.
	require.NoError(t, f.ops.RunTask(ctx, ops.TaskGC))
	f.runJobs()
	require.Equal(t, map[string]int64{"retailers": 2, "tombstones": 0, "directory_entries": 0, "chunk_rows": 0,
		"outbox_rows": 0, "consumer_versions": 0, "move_records": 0}, gc(`{}`))

	// The next upload brings a collected product back, as any upload.
	f.upload("r1", "product_id,price\na,1\nb,5\n")
	require.Equal(t, map[string]string{"a": `{"price":"1"}`, "b": `{"price":"5"}`}, f.catalogOf("r1"))
}

// The synchronous collection of every retailer (POST /v1/admin/gc) that
// reaches one switching shards (a move's freeze: its writes are refused)
// skips it, names it in the answer's skipped, and collects the others (the
// scheduled run over the queue: TestGCOfEveryRetailerGoesOnPastAMovingOne).
func TestGCSkipsARetailerSwitchingShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.onboard("r1")
	f.onboard("r2")
	f.upload("r1", catalogCSV)
	f.upload("r1", "product_id,price\na,1\n") // b and c deleted
	f.upload("r2", catalogCSV)
	f.upload("r2", "product_id,price\na,1\n")
	_, sh, err := f.store.ForRetailer(ctx, "r2")
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r2', 'mv_test', 'source', 'frozen', 1)`)
	require.NoError(t, err)
	f.now = f.now.Add(20 * 24 * time.Hour)

	res, err := f.ops.Collect(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"r2"}, res.Skipped)
	require.Equal(t, 1, res.Retailers)
	require.EqualValues(t, 2, res.Tombstones, "r1's b and c")
}
