package upload_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/serve/upload"
)

// A reservation's mode (DESIGN 13): "delta" reserves a delta, "full" or
// none a full snapshot, anything else 400 invalid_mode; the status says
// the mode of every generation, and a delta's reservation supersedes an
// older unused slot as any reservation does; a delta's dry run is
// reserved as any dry run, superseding nothing.
func TestReserveDeltaMode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	var slot struct{ Generation int64 }
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"format":"csv","mode":"full"}`, &slot))
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"mode":"delta"}`, &slot))
	require.Equal(t, int64(2), slot.Generation)
	var e errorBody
	require.Equal(t, http.StatusBadRequest, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"mode":"patch"}`, &e))
	require.Equal(t, "invalid_mode", e.Error.Code)
	require.Equal(t, http.StatusBadRequest, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"mode":"rollback"}`, &e),
		"a rollback has its own route")

	var st upload.Status
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/2", token, "", &st))
	require.Equal(t, "delta", st.Mode)
	require.Equal(t, "awaiting_upload", st.State)
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/1", token, "", &st))
	require.Equal(t, "full", st.Mode)
	require.Equal(t, "superseded", st.State, "a delta's reservation supersedes an unused slot")

	// A delta's dry run: mode delta, dry_run, and it supersedes no slot.
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"mode":"delta","dry_run":true}`, &slot))
	require.Equal(t, int64(3), slot.Generation)
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/3", token, "", &st))
	require.Equal(t, "delta", st.Mode)
	require.True(t, st.DryRun)
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/2", token, "", &st))
	require.Equal(t, "awaiting_upload", st.State, "a dry run supersedes no slot")
	require.Equal(t, http.StatusBadRequest, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"mode":"patch","dry_run":true}`, &e))
	require.Equal(t, "invalid_mode", e.Error.Code)
}
