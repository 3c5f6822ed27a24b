package systemtest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
	uploadroutes "github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// DESIGN 13, every problem: a file of 150,000 bad rows is rejected with the
// first 100 problems in its status, and the problems route answers the
// first 100,000 of them in line order, then {"truncated":true}; before its
// file is read a generation has none (409 problems_unavailable). The list
// (about 9 MB) is over 5 MB, more than a Lambda may answer: the route
// answers 303 to a presigned GET of the file valid 15 minutes, which the
// API client follows without the token and which gives the file's exact
// bytes; the S3 stand-in refuses the link changed (another retailer's
// key), expired, or sent with an Authorization header besides.
func TestEveryProblemOfALargeFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	token := e.Onboard("r1")
	ctx := systemtest.Context(t, 3*time.Minute)

	slot, err := e.API.Reserve(ctx, token, "r1", "")
	require.NoError(t, err)
	var sink bytes.Buffer
	requireHTTPStatus(t, e.API.Problems(ctx, token, "r1", slot.Generation, &sink), http.StatusConflict)

	var b strings.Builder
	b.WriteString("product_id,title\n")
	for i := range 150_000 {
		fmt.Fprintf(&b, "p%d,title,extra\n", i) // malformed_csv: column count 3, header has 2
	}
	require.NoError(t, e.API.Put(ctx, slot, []byte(b.String())))
	st := e.Wait("r1", slot.Generation)
	require.Equal(t, "rejected", st.State)
	require.Len(t, st.Error.Problems, 100)
	require.True(t, st.Error.MoreProblems)

	var body bytes.Buffer
	require.NoError(t, e.API.Problems(ctx, token, "r1", slot.Generation, &body))
	stored, err := e.Stack.Blobs.Get(ctx, keys.Problems("r1", slot.Generation))
	require.NoError(t, err)
	require.Greater(t, len(stored), uploadroutes.MaxInlineProblemsBytes)
	t.Logf("problems file: %d bytes", len(stored))
	require.True(t, bytes.Equal(stored, body.Bytes()), "the client's list is the stored file (%d bytes, want %d)", body.Len(), len(stored))

	// What the client followed: a 303 to the S3 stand-in.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/retailers/r1/snapshots/%d/problems", e.Stack.APIURL, slot.Generation), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Do(req)
	require.NoError(t, err)
	var link uploadroutes.ProblemsLink
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&link))
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, link.URL, resp.Header.Get("Location"))
	require.True(t, strings.HasPrefix(link.URL, e.Stack.S3Endpoint+"/"), "%s: a link to the bucket", link.URL)
	require.WithinDuration(t, time.Now().Add(15*time.Minute), link.ExpiresAt, 30*time.Second)
	get := func(u, authorization string) (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		require.NoError(t, err)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := noFollow.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, b
	}
	status, got := get(link.URL, "")
	require.Equal(t, http.StatusOK, status)
	require.True(t, bytes.Equal(stored, got), "the link gives the exact bytes")
	require.NoError(t, e.Stack.Blobs.Put(ctx, keys.Problems("r2", slot.Generation), []byte("r2's problems\n")))
	u, err := url.Parse(link.URL)
	require.NoError(t, err)
	another := *u
	another.Path, another.RawPath = strings.Replace(u.Path, "/r1/", "/r2/", 1), ""
	require.NotEqual(t, u.Path, another.Path)
	status, got = get(another.String(), "")
	require.Equal(t, http.StatusForbidden, status, "another retailer's key: %s", got)
	require.Contains(t, string(got), "SignatureDoesNotMatch")
	expired := *u
	q := u.Query()
	q.Set("X-Amz-Date", time.Now().UTC().Add(-time.Hour).Format("20060102T150405Z")) // signed an hour ago: expired 45 minutes ago
	expired.RawQuery = q.Encode()
	status, got = get(expired.String(), "")
	require.Equal(t, http.StatusForbidden, status, "expired: %s", got)
	require.Contains(t, string(got), "Request has expired")
	status, got = get(link.URL, "Bearer "+token)
	require.Equal(t, http.StatusBadRequest, status, "the token besides the presigned query: %s", got)
	lines := strings.Split(strings.TrimSuffix(body.String(), "\n"), "\n")
	require.Len(t, lines, 100_001)
	require.Equal(t, `{"truncated":true}`, lines[100_000])
	for i, l := range lines[:100_000] {
		var p struct {
			Code    string `json:"code"`
			Line    int    `json:"line"`
			Message string `json:"message"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		require.Equal(t, "malformed_csv", p.Code)
		require.Equal(t, i+2, p.Line, "line order")
		if i < 100 {
			require.Equal(t, st.Error.Problems[i].Message, p.Message, "the status lists the first 100 of the same list")
		}
	}
}
