package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/docs/samples/webhookreceiver"
	"github.com/retailcatalog/catalog/functions/core/catalog"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// The sample files of docs/samples pass check and are applied when
// uploaded with catalogctl as docs/RETAILERS.md shows (the JSON Lines one
// gzipped on the way), each replacing the catalog before it; the storefront
// then serves them, an id with "/" and a space included. Then the guide's
// examples of bad files, uploaded, are rejected by the server with the
// code, line and message the guide shows, nothing of them applied; and an
// empty file is held with the guide's message.
func TestSamplesApplied(t *testing.T) {
	t.Parallel()
	for _, sample := range []string{"../../docs/samples/catalog.csv", "../../docs/samples/catalog.jsonl"} {
		r := runTool(t, nil, "check", sample)
		require.Equal(t, 0, r.code, "%s: %s%s", sample, r.stdout, r.stderr)
	}
	_, admin := startStack(t)
	vars := onboard(t, admin, "acme")

	// The guide's webhook receiver (docs/samples/webhookreceiver) gets every
	// outcome below, each delivery's signature verified.
	secret := "a-secret-of-32-bytes-or-so-0123"
	var mu sync.Mutex
	delivered := map[string]bool{} // event ids
	receiver := httptest.NewServer(webhookreceiver.Handler([]byte(secret), func(eventID string, body []byte) error {
		mu.Lock()
		defer mu.Unlock()
		delivered[eventID] = true
		return nil
	}))
	t.Cleanup(receiver.Close)
	api := apiclient.New(admin[apiVar])
	require.NoError(t, api.Do(context.Background(), http.MethodPut, "/v1/retailers/acme/webhook", vars[tokenVar],
		map[string]string{"url": receiver.URL + "/hook", "secret": secret}, nil))
	var want []string // event ids

	r := runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/catalog.csv")
	require.Equal(t, 0, r.code, r.stderr)
	st := statusOf(t, r)
	require.Equal(t, "applied", st.State)
	require.EqualValues(t, 10, st.Changes.Inserted)
	want = append(want, "acme:1:applied")
	// The guide's quick start shows this upload's output: its lines that do
	// not depend on timing are the tool's.
	g := readGuide(t)
	shown := fenced(g.sections["Quick start"], "text")
	require.Len(t, shown, 1, "the quick start shows upload's output in a ```text block")
	stderr := strings.ReplaceAll(r.stderr, "../../docs/samples/", "docs/samples/")
	for _, line := range strings.Split(shown[0], "\n") {
		switch {
		case strings.HasPrefix(line, "acme/1: generation"), strings.HasPrefix(line, "uploading: 100%"), strings.HasPrefix(line, "acme/1: applied:"):
			require.Contains(t, stderr, line+"\n", "the quick start's output vs the tool's")
		case regexp.MustCompile(`^acme/1: [a-z_]+ \(`).MatchString(line): // a state on the way, if seen
			state, _, _ := strings.Cut(strings.TrimPrefix(line, "acme/1: "), " ")
			require.Equal(t, "acme/1: "+state+waiter{stored: true}.note(state), line, "the quick start's output vs the tool's")
		case strings.HasPrefix(line, `  "state"`):
			require.Equal(t, `  "state": "applied",`, line)
			require.Contains(t, r.stdout, line)
		}
	}

	attributes := func(productID string) map[string]any {
		t.Helper()
		p, err := api.Product(context.Background(), "acme", productID)
		require.NoError(t, err)
		var attrs map[string]any
		require.NoError(t, json.Unmarshal(p.Attributes, &attrs))
		return attrs
	}
	require.Equal(t, "Screen cleaning kit", attributes("sku/1008 spare")["title"])
	require.Equal(t, "Warm light.\nDimmable in three steps.", attributes("SKU-1004")["description"], "a quoted field over two lines")
	require.Equal(t, `Monitor 24" full HD`, attributes("SKU-1003")["title"], "a literal quote in an unquoted field")

	r = runTool(t, vars, "upload", "--retailer", "acme", "--gzip", "../../docs/samples/catalog.jsonl")
	require.Equal(t, 0, r.code, r.stderr)
	st = statusOf(t, r)
	require.Equal(t, "applied", st.State)
	require.EqualValues(t, 6, st.Changes.Inserted)
	require.EqualValues(t, 10, st.Changes.Deleted, "the CSV sample's products: each upload is the whole catalog")
	require.Equal(t, []any{"red", "steel"}, attributes("SKU-2001")["colors"])

	examples := guideExamples(t, g)
	require.NotEmpty(t, examples)
	for i, ex := range examples {
		name := fmt.Sprintf("example-%d.%s", i, ex.format)
		r = runTool(t, vars, "upload", "--retailer", "acme", writeFile(t, name, ex.file))
		require.Equal(t, 2, r.code, "%s (%s): %s", ex.code, name, r.stderr)
		st = statusOf(t, r)
		require.Equal(t, "rejected", st.State, ex.code)
		require.Equal(t, ex.code, st.Error.Code)
		require.Equal(t, ex.message, st.Error.Message, "%s: the server's message vs the guide's", ex.code)
		require.NotNil(t, st.Error.Line, ex.code)
		require.Contains(t, ex.message, fmt.Sprintf("line %d:", *st.Error.Line), ex.code)
		want = append(want, fmt.Sprintf("acme:%d:rejected", st.Generation))
	}
	products, err := api.Catalog(context.Background(), "acme")
	require.NoError(t, err)
	require.Len(t, products, 6, "the rejected files changed nothing: the JSON Lines sample is the catalog")

	r = runTool(t, vars, "upload", "--retailer", "acme", writeFile(t, "empty.csv", []byte("product_id,title\n")))
	require.Equal(t, 3, r.code, r.stderr)
	st = statusOf(t, r)
	require.Equal(t, "held", st.State)
	hold := guideHoldError(t, g, catalog.HoldEmptySnapshot)
	require.Equal(t, hold.Code, st.Error.Code)
	require.Equal(t, hold.Message, st.Error.Message)
	want = append(want, fmt.Sprintf("acme:%d:held", st.Generation))

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range want {
			if !delivered[id] {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "deliveries verified by the guide's receiver: want %v", want)
}
