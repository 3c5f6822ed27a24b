package control_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/upload"
)

// Hold thresholds: either or both, each 0-100 (400 otherwise), read back
// by GET and used by the store's hold policy.
func TestSettings(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	other := f.Onboard("r2")
	var s control.Settings
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/settings", token, "", &s))
	require.Equal(t, 50.0, *s.HoldDeletePct)
	require.Equal(t, 50.0, *s.HoldUpdatePct)
	for _, body := range []string{`{}`, `{"hold_delete_pct": -1}`, `{"hold_update_pct": 100.5}`, `{"hold_delete_pct": "10"}`,
		`{"hold_delete_pct": 10, "other": 1}`, `not json`, `{"hold_delete_pct": null}`} {
		var e errorBody
		require.Equal(t, http.StatusBadRequest, f.Call("PUT", "/v1/retailers/r1/settings", token, body, &e), body)
		require.NotEmpty(t, e.Error.Code, body)
	}
	require.Equal(t, http.StatusForbidden, f.Call("PUT", "/v1/retailers/r1/settings", other, `{"hold_delete_pct": 10}`, nil))
	require.Equal(t, http.StatusUnauthorized, f.Call("PUT", "/v1/retailers/r1/settings", "", `{"hold_delete_pct": 10}`, nil))
	require.Equal(t, http.StatusOK, f.Call("PUT", "/v1/retailers/r1/settings", token, `{"hold_delete_pct": 12.5}`, &s))
	require.Equal(t, 12.5, *s.HoldDeletePct)
	require.Equal(t, 50.0, *s.HoldUpdatePct, "a threshold not given stays")
	require.Equal(t, http.StatusOK, f.Call("PUT", "/v1/retailers/r1/settings", token, `{"hold_update_pct": 0, "hold_delete_pct": 100}`, &s))
	r, err := f.Store.Retailer(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, catalog.HoldPolicy{DeleteFraction: 1, UpdateFraction: 0, DropFraction: 0.5, MinProducts: 100}, r.Hold)
}

// A new token works at once and the old one gets 401 at once; the admin
// gives a new one to a retailer that lost its own.
func TestTokenRotationAndRecovery(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	old := f.Onboard("r1")
	other := f.Onboard("r2")
	var tok struct{ Token string }
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/token", old, "", &tok))
	require.NotEqual(t, old, tok.Token)
	require.Equal(t, http.StatusUnauthorized, f.Call("POST", "/v1/retailers/r1/snapshots", old, "", nil))
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", tok.Token, "", nil))
	require.Equal(t, http.StatusForbidden, f.Call("POST", "/v1/retailers/r1/token", other, "", nil))

	require.Equal(t, http.StatusForbidden, f.Call("POST", "/v1/admin/retailers/r1/token", tok.Token, "", nil), "a retailer's token on an admin route")
	require.Equal(t, http.StatusUnauthorized, f.Call("POST", "/v1/admin/retailers/r1/token", "wrong", "", nil))
	require.Equal(t, http.StatusNotFound, f.Call("POST", "/v1/admin/retailers/nobody/token", admin, "", nil))
	require.Equal(t, http.StatusBadRequest, f.Call("POST", "/v1/admin/retailers/bad%20id/token", admin, "", nil))
	var recovered struct{ Token string }
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/admin/retailers/r1/token", admin, "", &recovered))
	require.Equal(t, http.StatusUnauthorized, f.Call("GET", "/v1/retailers/r1/snapshots", tok.Token, "", nil))
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots", recovered.Token, "", nil))
}

// Offboarding revokes the token, reserves the generation whose empty
// snapshot removes the catalog (written to its upload key), refuses
// anything new, and is the same generation when asked again.
func TestOffboardRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	blobs := f.Blobs
	token := f.Onboard("r1")
	f.Onboard("r2")
	var slot struct{ Generation int64 }
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", &slot))

	require.Equal(t, http.StatusForbidden, f.Call("DELETE", "/v1/admin/retailers/r1", token, "", nil))
	require.Equal(t, http.StatusNotFound, f.Call("DELETE", "/v1/admin/retailers/nobody", admin, "", nil))
	var off control.OffboardResponse
	require.Equal(t, http.StatusAccepted, f.Call("DELETE", "/v1/admin/retailers/r1", admin, "", &off))
	require.Equal(t, "r1", off.RetailerID)
	require.Equal(t, slot.Generation+1, off.Generation)
	body, err := blobs.Get(context.Background(), keys.Upload("r1", off.Generation))
	require.NoError(t, err)
	require.Empty(t, body, "the empty snapshot that removes the catalog")

	require.Equal(t, http.StatusUnauthorized, f.Call("GET", "/v1/retailers/r1/snapshots", token, "", nil), "the token is revoked")
	var e errorBody
	require.Equal(t, http.StatusConflict, f.Call("POST", "/v1/retailers/r1/snapshots", admin, "", &e))
	require.Equal(t, "retailer_offboarded", e.Error.Code)
	require.Equal(t, http.StatusConflict, f.Call("POST", "/v1/admin/retailers/r1/token", admin, "", nil))
	require.Equal(t, http.StatusConflict, f.Call("PUT", "/v1/retailers/r1/settings", admin, `{"hold_delete_pct": 1}`, nil))
	var st upload.Status
	require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d", slot.Generation), admin, "", &st))
	require.Equal(t, "superseded", st.State)

	var again control.OffboardResponse
	require.Equal(t, http.StatusAccepted, f.Call("DELETE", "/v1/admin/retailers/r1", admin, "", &again))
	require.Equal(t, off.Generation, again.Generation)
	var created struct{ Token string }
	require.Equal(t, http.StatusConflict, f.Call("POST", "/v1/admin/retailers", admin, `{"retailer_id":"r1"}`, &created), "the id is not taken again")
}
