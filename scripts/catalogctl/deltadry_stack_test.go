package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// The guide's delta dry run, run as it shows: the quick start's catalog
// applied and the day-2 sample previewed (generation 2), then `upload
// --dry-run --mode delta` of docs/samples/delta.jsonl exits 0 with the
// counts and the field changes the guide's text block shows, `plan acme 3`
// prints the JSON Lines the guide shows, and the catalog is unchanged; the
// same file uploaded with --mode delta then changes what the plan said.
func TestGuideDeltaDryRun(t *testing.T) {
	t.Parallel()
	_, admin := startStack(t)
	vars := onboard(t, admin, "acme")
	api := apiclient.New(admin[apiVar])
	catalogNow := func() map[string]map[string]any {
		t.Helper()
		products, err := api.Catalog(context.Background(), "acme")
		require.NoError(t, err)
		out := map[string]map[string]any{}
		for _, p := range products {
			var attrs map[string]any
			require.NoError(t, json.Unmarshal(p.Attributes, &attrs))
			out[p.ProductID] = attrs
		}
		return out
	}
	r := runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/catalog.csv")
	require.Equal(t, 0, r.code, r.stderr)
	r = runTool(t, vars, "upload", "--dry-run", "--retailer", "acme", "../../docs/samples/catalog-day2.csv")
	require.Equal(t, 0, r.code, r.stderr)
	before := catalogNow()

	r = runTool(t, vars, "upload", "--dry-run", "--mode", "delta", "--retailer", "acme", "../../docs/samples/delta.jsonl")
	t.Logf("stderr:\n%s", r.stderr)
	require.Equal(t, 0, r.code, r.stderr)
	st := statusOf(t, r)
	require.Equal(t, "previewed", st.State)
	require.Equal(t, int64(3), st.Generation)
	require.True(t, st.DryRun)
	require.Equal(t, "delta", st.Mode)
	require.Equal(t, [4]int64{1, 1, 1, 1}, [4]int64{st.Changes.Inserted, st.Changes.Updated, st.Changes.Deleted, st.Changes.Unchanged})
	plan := runTool(t, vars, "plan", "acme", "3")
	t.Logf("plan:\n%s", plan.stdout)
	require.Equal(t, 0, plan.code, plan.stderr)
	require.Equal(t, before, catalogNow(), "a dry run changes nothing")

	g := readGuide(t)
	section := g.sections["A delta's dry run"]
	require.NotEmpty(t, section, `docs/RETAILERS.md has a "### A delta's dry run" section`)
	text := fenced(section, "text")
	require.Len(t, text, 1, "the section shows upload --dry-run --mode delta's output in a ```text block")
	shown := 0
	for _, line := range strings.Split(strings.TrimSpace(text[0]), "\n") {
		if strings.HasPrefix(line, "acme/3: previewed") || strings.HasPrefix(line, "  ") {
			require.Contains(t, r.stderr, line+"\n", "the guide's output vs the tool's")
			shown++
		}
	}
	require.Equal(t, 4, shown, "the counts and the three changes")
	jsonl := fenced(section, "jsonl")
	require.Len(t, jsonl, 1, "the section shows plan's output in a ```jsonl block")
	require.Equal(t, jsonl[0], plan.stdout, "the guide's plan vs the tool's")

	// For real: the catalog changes as the plan said, and only so.
	r = runTool(t, vars, "upload", "--mode", "delta", "--retailer", "acme", "../../docs/samples/delta.jsonl")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "applied", statusOf(t, r).State)
	want := before
	for _, line := range strings.Split(strings.TrimSpace(plan.stdout), "\n") {
		var it apiclient.PlanItem
		require.NoError(t, json.Unmarshal([]byte(line), &it))
		if it.Op == "delete" {
			delete(want, it.ProductID)
			continue
		}
		if want[it.ProductID] == nil {
			want[it.ProductID] = map[string]any{}
		}
		for name, f := range it.Fields {
			var to any
			require.NoError(t, json.Unmarshal(f.To, &to))
			if to == nil {
				delete(want[it.ProductID], name)
			} else {
				want[it.ProductID][name] = to
			}
		}
	}
	require.Equal(t, want, catalogNow())
}
