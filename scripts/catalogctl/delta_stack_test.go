package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// The guide's "Delta uploads" example, on the local stack as a retailer
// would run it: the CSV sample applied, then docs/samples/delta.csv and
// delta.jsonl uploaded with --mode delta, each with the changes the guide
// shows (mode delta), the storefront serving the merged products, the
// deleted ones gone and the attributes a delta does not give kept. The
// guide shows the sample files as they are.
func TestGuideDeltaSamples(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	sec := g.sections["Delta uploads"]
	require.NotEmpty(t, sec, `docs/RETAILERS.md has a "Delta uploads" section`)
	for _, sample := range []string{"delta.csv", "delta.jsonl"} {
		raw, err := os.ReadFile("../../docs/samples/" + sample)
		require.NoError(t, err)
		require.Contains(t, sec, string(raw), "the guide shows %s as it is", sample)
	}
	shown := regexp.MustCompile("`\\{\"inserted\": (\\d+), \"updated\": (\\d+), \"deleted\": (\\d+), \"unchanged\": (\\d+)\\}`").FindAllStringSubmatch(sec, -1)
	require.Len(t, shown, 1, "the JSON Lines example's changes")

	_, admin := startStack(t)
	vars := onboard(t, admin, "acme")
	api := apiclient.New(admin[apiVar])
	attributes := func(productID string) map[string]any {
		t.Helper()
		p, err := api.Product(context.Background(), "acme", productID)
		if err != nil {
			var ae *apiclient.APIError
			require.True(t, errors.As(err, &ae), "%s: %v", productID, err)
			return nil
		}
		var attrs map[string]any
		require.NoError(t, json.Unmarshal(p.Attributes, &attrs))
		return attrs
	}
	r := runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/catalog.csv")
	require.Equal(t, 0, r.code, r.stderr)

	r = runTool(t, vars, "upload", "--retailer", "acme", "--mode", "delta", "../../docs/samples/delta.csv")
	require.Equal(t, 0, r.code, r.stderr)
	st := statusOf(t, r)
	require.Equal(t, "applied", st.State)
	require.Equal(t, "delta", st.Mode)
	require.Equal(t, [4]int64{1, 2, 1, 0}, [4]int64{st.Changes.Inserted, st.Changes.Updated, st.Changes.Deleted, st.Changes.Unchanged})
	require.Contains(t, sec, `"changes":`+"\n"+`{"inserted": 1, "updated": 2, "deleted": 1, "unchanged": 0}`)
	p := attributes("SKU-1001")
	require.Equal(t, "8.99", p["price"])
	require.Equal(t, "95", p["stock"])
	require.Equal(t, "USB-C cable 2 m", p["title"], "an attribute the delta does not give is kept")
	require.Nil(t, attributes("SKU-1007"), "deleted")
	require.Equal(t, map[string]any{"price": "12.00", "stock": "40"}, attributes("SKU-1011"))

	r = runTool(t, vars, "upload", "--retailer", "acme", "--mode", "delta", "../../docs/samples/delta.jsonl")
	require.Equal(t, 0, r.code, r.stderr)
	st = statusOf(t, r)
	require.Equal(t, "applied", st.State)
	require.Equal(t, "delta", st.Mode)
	got := [4]int64{st.Changes.Inserted, st.Changes.Updated, st.Changes.Deleted, st.Changes.Unchanged}
	require.Equal(t, shown[0][1:], []string{itoa(got[0]), itoa(got[1]), itoa(got[2]), itoa(got[3])}, "the guide's changes vs the server's")
	p = attributes("SKU-1002")
	require.Equal(t, "299.00", p["price"])
	require.NotContains(t, p, "color", "null removes the attribute")
	require.Equal(t, `Monitor 27" 4K, IPS`, p["title"])
	require.Nil(t, attributes("SKU-1006"))
	require.NotContains(t, attributes("SKU-1012"), "color")

	r = runTool(t, vars, "upload", "--retailer", "acme", "--mode", "patch", "../../docs/samples/delta.jsonl")
	require.Equal(t, 1, r.code, "an unknown mode is refused before anything is reserved")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
