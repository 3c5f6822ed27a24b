package control_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/serve/control"
)

// hold_drop_pct (attribute_dropped's threshold): 50 by default, readable,
// set alone or with the others, 0-100 (400 otherwise), kept by the store.
func TestHoldDropPctSetting(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	var s control.Settings
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/settings", token, "", &s))
	require.Equal(t, 50.0, *s.HoldDropPct)
	for _, body := range []string{`{"hold_drop_pct": -0.1}`, `{"hold_drop_pct": 101}`, `{"hold_drop_pct": "5"}`, `{"hold_drop_pct": null}`} {
		var e errorBody
		require.Equal(t, http.StatusBadRequest, f.Call("PUT", "/v1/retailers/r1/settings", token, body, &e), body)
		require.Equal(t, "invalid_settings", e.Error.Code, body)
	}
	require.Equal(t, http.StatusOK, f.Call("PUT", "/v1/retailers/r1/settings", token, `{"hold_drop_pct": 20}`, &s))
	require.Equal(t, 20.0, *s.HoldDropPct)
	require.Equal(t, 50.0, *s.HoldDeletePct, "a threshold not given stays")
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/settings", token, "", &s))
	require.Equal(t, 20.0, *s.HoldDropPct)
	r, err := f.Store.Retailer(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, 0.2, r.Hold.DropFraction)
}
