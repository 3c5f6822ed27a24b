package systemtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// post sends a JSON POST to the stack's API.
func (e *env) post(path, body string) answer {
	e.T.Helper()
	resp, err := e.API.HTTP.Post(e.Stack.APIURL+path, "application/json", strings.NewReader(body))
	require.NoError(e.T, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(e.T, err)
	return answer{resp.StatusCode, resp.Header, b}
}

// The guide's batch-get example, run against the local stack with a
// streaming replica: the body it sends gets the answer it shows (items in
// the order asked, each exactly the single route's body, a duplicate once,
// the absent and the deleted id missing), read on the replica; the
// refusals it names; an unknown retailer has every id missing.
func TestBatchGetAsTheGuideShows(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../../../docs/RETAILERS.md")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)products/batch-get".*?-d '([^']*)'\n# (\{[^\n]*\})\n`).FindSubmatch(guide)
	require.NotNil(t, m, "the guide's batch-get example")
	body, shown := string(m[1]), string(m[2])

	e := newReplicaEnv(t, stack.Options{})
	e.Onboard("acme")
	c := fixtures.Catalog{"SKU-1001": fixtures.Row("first"), "SKU-1002": fixtures.Row("second"), "SKU-1003": fixtures.Row("gone tomorrow")}
	require.Equal(t, "applied", e.Upload("acme", c.CSV(nil)).State)
	delete(c, "SKU-1003")
	require.Equal(t, "applied", e.Upload("acme", c.CSV(nil)).State)
	e.syncReplicas()
	fromReplicas0, fromWriter0 := e.readStats()

	a := e.post("/v1/retailers/acme/products/batch-get", body)
	require.Equal(t, http.StatusOK, a.status, a.String())
	require.Equal(t, "no-store", a.header.Get("Cache-Control"))
	fromReplicas1, fromWriter1 := e.readStats()
	require.Equal(t, fromWriter0, fromWriter1, "read on the replica")
	require.Greater(t, fromReplicas1, fromReplicas0)
	var got struct {
		Items   []json.RawMessage `json:"items"`
		Missing []string          `json:"missing"`
	}
	require.NoError(t, json.Unmarshal(a.body, &got))
	// The guide elides the attributes ("..."): compare the ids it shows.
	ids := func(s string) (out []string) {
		for _, sm := range regexp.MustCompile(`"product_id":"([^"]+)"`).FindAllStringSubmatch(s, -1) {
			out = append(out, sm[1])
		}
		return out
	}
	require.Equal(t, ids(shown), ids(string(a.body)), "items as the guide shows them")
	require.Contains(t, shown, `"missing":["SKU-9999"]`)
	require.Equal(t, []string{"SKU-9999"}, got.Missing)
	for i, id := range ids(shown) {
		single := e.get("/v1/retailers/acme/products/" + id)
		require.Equal(t, http.StatusOK, single.status)
		require.Equal(t, string(bytes.TrimSuffix(single.body, []byte("\n"))), string(got.Items[i]))
		require.Equal(t, c[id], attrsOf(t, decode[apiclient.Product](t, single)))
	}

	a = e.post("/v1/retailers/acme/products/batch-get", `{"product_ids": ["SKU-1003", "SKU-1001"]}`)
	require.Equal(t, http.StatusOK, a.status)
	require.Equal(t, []string{"SKU-1001"}, ids(string(a.body)))
	require.Contains(t, string(a.body), `"missing":["SKU-1003"]`, "deleted: missing, never its tombstone")

	a = e.post("/v1/retailers/nobody/products/batch-get", `{"product_ids": ["SKU-1001"]}`)
	require.Equal(t, http.StatusOK, a.status)
	require.JSONEq(t, `{"items": [], "missing": ["SKU-1001"]}`, string(a.body))

	many, _ := json.Marshal(map[string][]string{"product_ids": strings.Split(strings.Repeat("SKU-1001,", 101), ",")[:101]})
	requireError(t, e.post("/v1/retailers/acme/products/batch-get", string(many)), 400, "invalid_product_ids")
	requireError(t, e.post("/v1/retailers/acme/products/batch-get", `{"product_ids": []}`), 400, "invalid_product_ids")
	requireError(t, e.post("/v1/retailers/acme/products/batch-get", `{"product_ids": ["a\u0001"]}`), 400, "invalid_product_id")
	requireError(t, e.post("/v1/retailers/bad!id/products/batch-get", `{"product_ids": ["a"]}`), 400, "invalid_retailer_id")
}
