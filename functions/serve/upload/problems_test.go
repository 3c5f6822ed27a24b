package upload_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/serve/upload"
)

// The problems route streams the problems file the diff wrote, as JSON
// Lines, to the retailer alone; 409 problems_unavailable while there is
// none (not read yet, or past its retention), 404 for a generation never
// reserved.
func TestProblemsRoute(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	other := f.Onboard("r2")
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", nil))
	path := "/v1/retailers/r1/snapshots/1/problems"
	var e errorBody
	require.Equal(t, http.StatusConflict, f.Call("GET", path, token, "", &e))
	require.Equal(t, "problems_unavailable", e.Error.Code)

	file := `{"code":"malformed_csv","line":3,"message":"line 3: x"}` + "\n" + `{"truncated":true}` + "\n"
	require.NoError(t, f.Blobs.Put(context.Background(), keys.Problems("r1", 1), []byte(file)))
	get := func(token string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		f.Handler().ServeHTTP(w, req)
		return w
	}
	w := get(token)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, upload.ProblemsContentType, w.Header().Get("Content-Type"))
	require.Equal(t, file, w.Body.String())
	require.Equal(t, http.StatusForbidden, get(other).Code)
	require.Equal(t, http.StatusUnauthorized, get("nope").Code)
	require.Equal(t, http.StatusNotFound, f.Call("GET", "/v1/retailers/r1/snapshots/9/problems", token, "", nil))
	require.Equal(t, http.StatusBadRequest, f.Call("GET", "/v1/retailers/r1/snapshots/x/problems", token, "", nil))

	// An empty file: 200 and empty.
	require.NoError(t, f.Blobs.Put(context.Background(), keys.Problems("r1", 1), nil))
	w = get(token)
	require.Equal(t, http.StatusOK, w.Code)
	require.Empty(t, w.Body.String())
}
