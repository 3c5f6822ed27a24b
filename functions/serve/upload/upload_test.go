package upload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/servetest"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const admin = servetest.Admin

// fixture is the upload function's routes (upload's and control's) on
// databases of the test's own (four shards) and the in-memory blob store
// and queue.
type fixture = servetest.Fixture

type errorBody = servetest.ErrorBody

func newFixture(t *testing.T) *fixture { return servetest.New(t, servetest.Options{}) }

func TestOnboardingAndTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	var e errorBody
	require.Equal(t, http.StatusConflict, f.Call("POST", "/v1/admin/retailers", admin, `{"retailer_id":"r1"}`, &e))
	require.Equal(t, "retailer_exists", e.Error.Code)
	require.Equal(t, http.StatusUnauthorized, f.Call("POST", "/v1/admin/retailers", "", `{"retailer_id":"r2"}`, nil))
	require.Equal(t, http.StatusUnauthorized, f.Call("POST", "/v1/admin/retailers", "wrong", `{"retailer_id":"r2"}`, nil))
	require.Equal(t, http.StatusForbidden, f.Call("POST", "/v1/admin/retailers", token, `{"retailer_id":"r2"}`, nil), "a retailer's token on an admin route")
	require.Equal(t, http.StatusBadRequest, f.Call("POST", "/v1/admin/retailers", admin, `{"retailer_id":"bad id"}`, nil))
	r, err := f.Store.Retailer(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, control.HashToken(token), r.TokenHash, "only the token's hash is stored")
}

func TestReserveAndStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	other := f.Onboard("r2")
	var slot struct {
		RetailerID string `json:"retailer_id"`
		Generation int64
		Upload     upload.UploadSlot
	}
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"format":"jsonl"}`, &slot))
	require.Equal(t, int64(1), slot.Generation)
	require.Equal(t, "PUT", slot.Upload.Method)
	require.Contains(t, slot.Upload.URL, keys.Upload("r1", 1))
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", &slot))
	require.Equal(t, int64(2), slot.Generation, "generations in increasing order")
	require.Equal(t, http.StatusBadRequest, f.Call("POST", "/v1/retailers/r1/snapshots", token, `{"format":"xml"}`, nil))
	require.Equal(t, http.StatusForbidden, f.Call("POST", "/v1/retailers/r1/snapshots", other, "", nil), "another retailer's token")
	require.Equal(t, http.StatusNotFound, f.Call("POST", "/v1/retailers/r9/snapshots", admin, "", nil))

	var st upload.Status
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/2", token, "", &st))
	require.Equal(t, "awaiting_upload", st.State)
	require.Nil(t, st.Error)
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/1", token, "", &st))
	require.Equal(t, "superseded", st.State, "a new reservation supersedes an unused slot")
	require.Equal(t, int64(2), *st.SupersededBy)
	require.Equal(t, http.StatusNotFound, f.Call("GET", "/v1/retailers/r1/snapshots/7", token, "", nil))
	require.Equal(t, http.StatusBadRequest, f.Call("GET", "/v1/retailers/r1/snapshots/x", token, "", nil))
	var list struct{ Items []upload.Status }
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots?limit=1", token, "", &list))
	require.Len(t, list.Items, 1)
	require.Equal(t, int64(2), list.Items[0].Generation, "newest first")
	require.Equal(t, http.StatusBadRequest, f.Call("GET", "/v1/retailers/r1/snapshots?limit=0", token, "", nil))
	require.Equal(t, 2.0, f.Metrics.Sum(metrics.UploadsReserved, "retailer_id=r1"))
}

// Confirming a held snapshot sends its diff job again, as S3 would.
func TestConfirmResendsTheDiffJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	ctx := context.Background()
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", nil))
	var e errorBody
	require.Equal(t, http.StatusConflict, f.Call("POST", "/v1/retailers/r1/snapshots/1/confirm", token, "", &e))
	require.Equal(t, "not_held", e.Error.Code)
	_, err := f.Store.BeginDiff(ctx, "r1", 1, "")
	require.NoError(t, err)
	require.NoError(t, errOf(f.Store.Hold(ctx, "r1", 1, "empty_snapshot", "empty", catalog.Counts{})))

	var st upload.Status
	require.Equal(t, http.StatusOK, f.Call("POST", "/v1/retailers/r1/snapshots/1/confirm", token, "", &st))
	require.Equal(t, "held", st.State)
	msgs := f.Queue.Take("diff-jobs")
	require.Len(t, msgs, 1)
	var ev lambdaevents.S3Event
	require.NoError(t, json.Unmarshal([]byte(msgs[0].Body), &ev))
	jobs, err := message.DiffJobsFromS3Event(ev)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, "inmem", jobs[0].Bucket)
	require.Equal(t, keys.Upload("r1", 1), jobs[0].Key)
	require.Equal(t, int64(1), jobs[0].Generation)
}

// Every route is served, and nothing else.
func TestRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.Len(t, f.Routes(), 14)
	req := httptest.NewRequest("GET", "/v1/nothing", nil)
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, req)
	io.Copy(io.Discard, w.Body)
	require.Equal(t, http.StatusNotFound, w.Code)
}

// The snapshot list pages backwards with before: each page holds at most
// limit uploads older than before, newest first, and names the before of
// the next page (null on the last); before is validated like limit.
func TestListPagesWithBefore(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	for range 7 {
		require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", nil))
	}
	type page struct {
		Items      []struct{ Generation int64 } `json:"items"`
		NextBefore *int64                       `json:"next_before"`
	}
	var got [][]int64
	path := "/v1/retailers/r1/snapshots?limit=3"
	for {
		var p page
		require.Equal(t, http.StatusOK, f.Call("GET", path, token, "", &p))
		var gens []int64
		for _, it := range p.Items {
			gens = append(gens, it.Generation)
		}
		got = append(got, gens)
		if p.NextBefore == nil {
			break
		}
		require.Less(t, len(got), 5, "pages end")
		path = fmt.Sprintf("/v1/retailers/r1/snapshots?limit=3&before=%d", *p.NextBefore)
	}
	require.Equal(t, [][]int64{{7, 6, 5}, {4, 3, 2}, {1}}, got)

	var exact page
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots?limit=3&before=4", token, "", &exact))
	require.Len(t, exact.Items, 3)
	require.Nil(t, exact.NextBefore, "a page that ends with generation 1 is the last")
	var beyond page
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots?before=100", token, "", &beyond))
	require.Len(t, beyond.Items, 7, "a before past the newest lists from the newest")
	var none page
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots?before=1", token, "", &none))
	require.Empty(t, none.Items)
	require.Nil(t, none.NextBefore)

	for _, bad := range []string{"0", "-2", "x", "1.5", "99999999999999999999"} {
		var e errorBody
		require.Equal(t, http.StatusBadRequest, f.Call("GET", "/v1/retailers/r1/snapshots?before="+bad, token, "", &e), bad)
		require.Equal(t, "invalid_before", e.Error.Code, bad)
	}
}

// errOf is the error of a call that also returns an undo (Reject, Hold).
func errOf(_ catalog.Undo, err error) error { return err }

// A page of the list is bounded in bytes (I12), whatever the uploads'
// problems: rejected uploads with 100 problems of 512 bytes each (about
// 52 KiB a status) fill a page of limit=1000 well before its limit; the
// page ends below upload.MaxListBytes and next_before goes on, so every
// upload is listed once, newest first. (Defect: a page carried every
// listed status whole, 21-28 MB for 1,000 rejected uploads.)
func TestListPageBoundedInBytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	ctx := context.Background()
	problems := make([]catalog.Problem, catalog.MaxProblems)
	for i := range problems {
		problems[i] = catalog.Problem{Code: "invalid_attribute_name", Line: i + 2, Message: strings.Repeat("x", 512)}
	}
	const uploads = 25
	for range uploads {
		var slot struct{ Generation int64 }
		require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", &slot))
		_, err := f.Store.BeginDiff(ctx, "r1", slot.Generation, "")
		require.NoError(t, err)
		require.NoError(t, errOf(f.Store.Reject(ctx, "r1", slot.Generation, catalog.Rejection{
			Code: problems[0].Code, Message: problems[0].Message, Line: problems[0].Line, Problems: problems})))
	}
	var listed []int64
	pages := 0
	path := "/v1/retailers/r1/snapshots?limit=1000"
	for {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		w := httptest.NewRecorder()
		f.Handler().ServeHTTP(w, req)
		require.Equal(t, http.StatusOK, w.Code)
		require.LessOrEqual(t, w.Body.Len(), upload.MaxListBytes+64, "a page's bytes")
		var p struct {
			Items []struct {
				Generation int64
				Error      struct{ Problems []catalog.Problem }
			} `json:"items"`
			NextBefore *int64 `json:"next_before"`
		}
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
		require.NotEmpty(t, p.Items)
		for _, it := range p.Items {
			require.Len(t, it.Error.Problems, catalog.MaxProblems, "each status whole")
			listed = append(listed, it.Generation)
		}
		pages++
		if p.NextBefore == nil {
			break
		}
		require.Less(t, pages, uploads, "pages end")
		path = fmt.Sprintf("/v1/retailers/r1/snapshots?limit=1000&before=%d", *p.NextBefore)
	}
	require.Greater(t, pages, 1, "the bytes, not the limit, ended the first page")
	want := make([]int64, uploads)
	for i := range want {
		want[i] = int64(uploads - i)
	}
	require.Equal(t, want, listed, "every upload once, newest first")
}

// A generation in a path has one spelling: "+1", "01", "1e2" and
// anything not a positive integer are invalid_generation.
func TestGenerationPathIsCanonical(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", nil))
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots/1", token, "", nil))
	for _, bad := range []string{"+1", "01", "1e2", "0", "-1", "1.0", "99999999999999999999"} {
		var e errorBody
		require.Equal(t, http.StatusBadRequest, f.Call("GET", "/v1/retailers/r1/snapshots/"+url.PathEscape(bad), token, "", &e), bad)
		require.Equal(t, "invalid_generation", e.Error.Code, bad)
	}
}
