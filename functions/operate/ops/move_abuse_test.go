package ops_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// The move routes under abuse (DESIGN 14): a to_shard that is no shard
// number, a body that is not the request, a move id that is not one
// (bytes PostgreSQL's text refuses among them), a retailer's token: each a
// 4xx in the contract's error shape, never a 500, and no move recorded.
func TestMoveRoutesRefuseAbuse(t *testing.T) {
	t.Parallel()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	require.NoError(t, s.CreateRetailer(t.Context(), catalog.Retailer{ID: "r", Shard: 0, TokenHash: httpapi.HashToken("token-r")}))
	h := ops.New(ops.Config{AdminToken: adminToken, Queues: queues}, s, inmem.NewBlobs(), inmem.NewQueue(), slog.New(slog.DiscardHandler))
	h.Mover = s
	do := func(method, path, token, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	for _, c := range []struct {
		body string
		code int
	}{
		{`{"to_shard":"1"}`, 400},
		{`{"to_shard":-1}`, 400},
		{`{"to_shard":2}`, 400},
		{`{"to_shard":9223372036854775807}`, 400},
		{`{"to_shard":99999999999999999999999}`, 400},
		{`{"to_shard":1.5}`, 400},
		{`{"to_shard":1e0}`, 400},
		{`{"to_shard":null}`, 400},
		{`{"to_shard":[1]}`, 400},
		{`{}`, 400},
		{``, 400},
		{`null`, 400},
		{`[]`, 400},
		{`{"to_shard":1,"from_shard":0}`, 400},
		{`{"to_shard":1}{"to_shard":1}`, 400},
		{`{"to_shard":1`, 400},
		{`{"to_shard":1,"pad":"` + strings.Repeat("x", 1<<20) + `"}`, 413},
		{`{"to_shard":0}`, 409},
	} {
		w := do(http.MethodPost, "/v1/admin/retailers/r/move", adminToken, c.body)
		require.Equal(t, c.code, w.Code, "body %.60q: %s", c.body, w.Body.String())
		require.Contains(t, w.Body.String(), `"code"`, "body %.60q", c.body)
	}
	for _, path := range []string{"/v1/admin/retailers/nobody/move", "/v1/admin/retailers/%00/move", "/v1/admin/retailers/%FF/move"} {
		w := do(http.MethodPost, path, adminToken, `{"to_shard":1}`)
		require.Contains(t, []int{400, 404}, w.Code, "%s: %s", path, w.Body.String())
	}
	// A retailer's token: 403 on both routes, and nothing recorded.
	w := do(http.MethodPost, "/v1/admin/retailers/r/move", "token-r", `{"to_shard":1}`)
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	w = do(http.MethodPost, "/v1/admin/retailers/r/move", "", `{"to_shard":1}`)
	require.Equal(t, http.StatusUnauthorized, w.Code, w.Body.String())
	var moves int
	require.NoError(t, s.Control.Pool().QueryRow(t.Context(), `SELECT count(*) FROM retailer_moves`).Scan(&moves))
	require.Zero(t, moves)

	w = do(http.MethodPost, "/v1/admin/retailers/r/move", adminToken, `{"to_shard":1}`)
	require.Equal(t, http.StatusAccepted, w.Code, w.Body.String())
	w = do(http.MethodGet, "/v1/admin/moves/mv_x", "token-r", "")
	require.Equal(t, http.StatusForbidden, w.Code, w.Body.String())
	for _, id := range []string{"mv_nothing", "r", "rc_1", "%00", "%FF", "mv_%00", "%E2%80%AE", "'%20OR%201=1--", strings.Repeat("m", 5000), "mv_x%2F..%2Fy"} {
		w := do(http.MethodGet, "/v1/admin/moves/"+id, adminToken, "")
		require.Equal(t, http.StatusNotFound, w.Code, "%.40s: %s", id, w.Body.String())
		require.Contains(t, w.Body.String(), `"code"`)
	}
}

// The admin routes that write a retailer's rows on its shard, asked while
// its move switches (the shard refuses its writes, CM001), answer 429
// retailer_moving with a Retry-After, as the retailer's own writes do,
// not 500: POST /v1/admin/retailers/{id}/replay writes its events into
// the outbox.
func TestAdminWritesWhileMovingAreRetailerMoving(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r")
	f.upload("r", catalogCSV)
	_, shard, err := f.store.ForRetailer(t.Context(), "r")
	require.NoError(t, err)
	_, err = shard.Pool().Exec(t.Context(), `DELETE FROM outbox WHERE retailer_id = 'r'`) // published: a replay writes them again
	require.NoError(t, err)
	_, err = shard.Pool().Exec(t.Context(), `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r', 'mv_test', 'source', 'moved', 1)`)
	require.NoError(t, err)
	req := httptest.NewRequest(http.MethodPost, "/v1/admin/retailers/r/replay", strings.NewReader(`{"since":"2000-01-01T00:00:00Z"}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	w := httptest.NewRecorder()
	f.ops.ServeHTTP(w, req)
	require.Equal(t, http.StatusTooManyRequests, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"retailer_moving"`)
	require.NotEmpty(t, w.Header().Get("Retry-After"))
}
