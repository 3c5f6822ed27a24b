package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// The sample files of docs/samples pass check and are applied when
// uploaded with catalogctl as docs/RETAILERS.md shows (the JSON Lines one
// gzipped on the way), each replacing the catalog before it; the storefront
// then serves them, an id with "/" and a space included.
func TestSamplesApplied(t *testing.T) {
	t.Parallel()
	for _, sample := range []string{"../../docs/samples/catalog.csv", "../../docs/samples/catalog.jsonl"} {
		r := runTool(t, nil, "check", sample)
		require.Equal(t, 0, r.code, "%s: %s%s", sample, r.stdout, r.stderr)
	}
	_, admin := startStack(t)
	vars := onboard(t, admin, "acme")

	r := runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/catalog.csv")
	require.Equal(t, 0, r.code, r.stderr)
	st := statusOf(t, r)
	require.Equal(t, "applied", st.State)
	require.EqualValues(t, 10, st.Changes.Inserted)

	api := apiclient.New(admin[apiVar])
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
}
