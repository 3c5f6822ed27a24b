package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/ports/inmem"
)

// catalogctl problems follows the API's 303 to the presigned GET of a
// large problems file and prints the file's exact bytes, without sending
// the token there: the API and the bucket are both on 127.0.0.1 (other
// ports), where Go's client alone would forward it, and the bucket, as
// S3 does, refuses a presigned request that also has an Authorization
// header.
func TestProblemsFollowsTheLinkWithoutTheToken(t *testing.T) {
	t.Parallel()
	blobs := inmem.NewBlobs()
	bucket := httptest.NewServer(blobs)
	t.Cleanup(bucket.Close)
	blobs.BaseURL = bucket.URL
	var b strings.Builder
	for i := range 100_000 {
		fmt.Fprintf(&b, `{"code":"malformed_csv","line":%d,"message":"line %d: column count 3, header has 2"}`+"\n", i+2, i+2)
	}
	b.WriteString(`{"truncated":true}` + "\n")
	require.NoError(t, blobs.Put(context.Background(), "problems/r1/7", []byte(b.String())))

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/retailers/r1/snapshots/7/problems", r.URL.Path)
		require.Equal(t, "Bearer good", r.Header.Get("Authorization"))
		link, err := blobs.PresignGet(r.Context(), "problems/r1/7", 15*time.Minute)
		require.NoError(t, err)
		w.Header().Set("Location", link)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusSeeOther)
		fmt.Fprintf(w, `{"url":%q,"expires_at":"2030-01-01T00:00:00Z"}`, link)
	}))
	t.Cleanup(api.Close)

	r := runTool(t, map[string]string{apiVar: api.URL, tokenVar: "good"}, "problems", "r1", "7")
	require.Equal(t, 0, r.code, r.stderr)
	require.True(t, r.stdout == b.String(), "every problem in line order, then the truncated marker (%d bytes, want %d)", len(r.stdout), b.Len())
}
