package upload_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
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

// A problems file over 5 MB (100,000 long problems, about 26 MB) is never
// the body of an answer, which Lambda caps at 6 MB: the route answers 303
// with a presigned GET of the file valid 15 minutes (Location and the
// body's url), which fetched without credentials gives the file's exact
// bytes; the same URL changed (another generation's key, a later expiry)
// or sent with the retailer's token besides is refused. A file just under
// 5 MB is answered 200, and its Lambda response stays under 6 MB; one under
// 5 MB whose quotes make it over 6 MB as a JSON string is linked too.
func TestProblemsOverFiveMBRedirect(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	for range 2 {
		require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", nil))
	}
	ctx := context.Background()
	var b strings.Builder
	long := strings.Repeat("x", 150)
	for i := range 100_000 {
		fmt.Fprintf(&b, `{"code":"malformed_csv","line":%d,"message":"line %d: column count 3, header has 2: %s \"quoted\" é"}`+"\n", i+2, i+2, long)
	}
	b.WriteString(`{"truncated":true}` + "\n")
	file := b.String()
	require.Greater(t, len(file), upload.MaxInlineProblemsBytes)
	require.NoError(t, f.Blobs.Put(ctx, keys.Problems("r1", 1), []byte(file)))
	require.NoError(t, f.Blobs.Put(ctx, keys.Problems("r1", 2), []byte("generation 2's\n")))

	begin := time.Now()
	w := problemsAnswer(f, "/v1/retailers/r1/snapshots/1/problems", token)
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	require.Less(t, w.Body.Len(), 4096)
	var link upload.ProblemsLink
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &link))
	location := w.Header().Get("Location")
	require.Equal(t, location, link.URL)
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	require.WithinDuration(t, begin.Add(upload.ProblemsLinkTTL), link.ExpiresAt, 2*time.Second)
	require.Equal(t, 15*time.Minute, upload.ProblemsLinkTTL)

	status, got := fetch(t, location, "")
	require.Equal(t, http.StatusOK, status)
	require.True(t, file == got, "the link gives the exact bytes of the file (%d bytes, want %d)", len(got), len(file))

	u, err := url.Parse(location)
	require.NoError(t, err)
	another := *u
	another.Path = strings.Replace(u.Path, "/r1/1", "/r1/2", 1)
	require.NotEqual(t, u.Path, another.Path)
	later := *u
	q := u.Query()
	for name, v := range q {
		if strings.Contains(strings.ToLower(name), "expires") {
			q.Set(name, v[0]+"0")
		}
	}
	later.RawQuery = q.Encode()
	require.NotEqual(t, u.RawQuery, later.RawQuery)
	for _, changed := range []string{another.String(), later.String()} {
		status, body := fetch(t, changed, "")
		require.Equal(t, http.StatusForbidden, status, "%s: %s", changed, body)
	}
	status, _ = fetch(t, location, "Bearer "+token)
	require.Equal(t, http.StatusBadRequest, status, "S3 takes one authentication: the presigned query or an Authorization header")

	// Just under 5 MB, problems with long messages: 200, inside Lambda's 6 MB.
	var under strings.Builder
	for under.Len() < upload.MaxInlineProblemsBytes-600 {
		fmt.Fprintf(&under, `{"code":"malformed_csv","line":%d,"message":"line %d: %s"}`+"\n", under.Len(), under.Len(), strings.Repeat("y", 400))
	}
	require.NoError(t, f.Blobs.Put(ctx, keys.Problems("r1", 1), []byte(under.String())))
	w = problemsAnswer(f, "/v1/retailers/r1/snapshots/1/problems", token)
	require.Equal(t, http.StatusOK, w.Code)
	require.True(t, under.String() == w.Body.String())
	require.LessOrEqual(t, lambdaResponseBytes(t, f, "/v1/retailers/r1/snapshots/1/problems", token), 6_291_556)

	// Under 5 MB of short problems, whose quotes make the Lambda response
	// pass 6 MB: linked.
	var quoted strings.Builder
	for quoted.Len() < upload.MaxInlineProblemsBytes-100 {
		quoted.WriteString(`{"code":"x","line":1,"message":"\"\"\"\"\"\"\"\""}` + "\n")
	}
	require.NoError(t, f.Blobs.Put(ctx, keys.Problems("r1", 1), []byte(quoted.String())))
	w = problemsAnswer(f, "/v1/retailers/r1/snapshots/1/problems", token)
	require.Equal(t, http.StatusSeeOther, w.Code)
	status, got = fetch(t, w.Header().Get("Location"), "")
	require.Equal(t, http.StatusOK, status)
	require.True(t, quoted.String() == got)
	require.Less(t, lambdaResponseBytes(t, f, "/v1/retailers/r1/snapshots/1/problems", token), 4096)
}

// problemsAnswer GETs the problems route with a token.
func problemsAnswer(f *fixture, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, req)
	return w
}

// lambdaResponseBytes is the size of the route's answer as the upload
// Lambda returns it to API Gateway (a JSON document, as the runtime
// encodes it).
func lambdaResponseBytes(t *testing.T, f *fixture, path, token string) int {
	t.Helper()
	req := lambdaevents.APIGatewayV2HTTPRequest{RawPath: path, Headers: map[string]string{"authorization": "Bearer " + token}}
	req.RequestContext.HTTP.Method = http.MethodGet
	resp, err := httpapi.LambdaHandler(f.Handler())(context.Background(), req)
	require.NoError(t, err)
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(resp))
	return out.Len()
}

// fetch GETs a link as a client without credentials would (with the
// authorization given, if any) and returns the status and body.
func fetch(t *testing.T, link, authorization string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, link, nil)
	require.NoError(t, err)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}
