package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The guide's section on dry runs, run as it shows: the quick start's
// catalog applied, then `upload --dry-run` of the day-2 sample exits 0
// with the counts and the field changes the guide's text block shows, and
// `plan` prints the JSON Lines the guide shows; the catalog is unchanged.
func TestGuideDryRunAndPlan(t *testing.T) {
	t.Parallel()
	_, admin := startStack(t)
	vars := onboard(t, admin, "acme")
	r := runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/catalog.csv")
	require.Equal(t, 0, r.code, r.stderr)

	r = runTool(t, vars, "upload", "--dry-run", "--retailer", "acme", "../../docs/samples/catalog-day2.csv")
	t.Logf("stderr:\n%s", r.stderr)
	require.Equal(t, 0, r.code, r.stderr)
	st := statusOf(t, r)
	require.Equal(t, "previewed", st.State)
	require.True(t, st.DryRun)

	plan := runTool(t, vars, "plan", "acme", "2")
	t.Logf("plan:\n%s", plan.stdout)
	require.Equal(t, 0, plan.code, plan.stderr)

	g := readGuide(t)
	section := g.sections["Trying a file first: dry runs and plans"]
	text := fenced(section, "text")
	require.Len(t, text, 1, "the section shows upload --dry-run's output in a ```text block")
	for _, line := range strings.Split(strings.TrimSpace(text[0]), "\n") {
		if strings.HasPrefix(line, "acme/2: previewed") || strings.HasPrefix(line, "  ") {
			require.Contains(t, r.stderr, line+"\n", "the guide's output vs the tool's")
		}
	}
	jsonl := fenced(section, "jsonl")
	require.Len(t, jsonl, 1, "the section shows plan's output in a ```jsonl block")
	require.Equal(t, jsonl[0], plan.stdout, "the guide's plan vs the tool's")

	// The first upload, applied: its plan inserts every product.
	r = runTool(t, vars, "plan", "acme", "1")
	require.Equal(t, 0, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.NotEmpty(t, lines)
	for _, line := range lines {
		require.Contains(t, line, `"op":"insert"`)
	}
	r = runTool(t, vars, "plan", "acme", "9")
	require.Equal(t, 1, r.code)
	require.NotContains(t, r.stderr, "panic")
	products := runTool(t, vars, "status", "acme", "1")
	require.Equal(t, 0, products.code, products.stderr)
}
