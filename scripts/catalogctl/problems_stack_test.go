package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// The guide's worked example of "Every problem of a file": the sample bad
// file, uploaded with catalogctl, is rejected, and catalogctl problems
// prints exactly the JSON Lines the guide shows; a good upload has none;
// a generation not uploaded yet is refused (problems_unavailable).
func TestProblemsSample(t *testing.T) {
	t.Parallel()
	_, admin := startStack(t)
	vars := onboard(t, admin, "acme")
	r := runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/bad-catalog.csv")
	require.Equal(t, 2, r.code, r.stderr)
	st := statusOf(t, r)
	require.Equal(t, "rejected", st.State)

	r = runTool(t, vars, "problems", "acme", fmt.Sprint(st.Generation))
	require.Equal(t, 0, r.code, r.stderr)
	shown := fenced(readGuide(t).sections["Every problem of a file"], "ndjson")
	require.Len(t, shown, 1, "the guide shows the sample's problems in a ```ndjson block")
	require.Equal(t, shown[0], r.stdout, "catalogctl problems vs the guide")

	r = runTool(t, vars, "upload", "--retailer", "acme", "../../docs/samples/catalog.csv")
	require.Equal(t, 0, r.code, r.stderr)
	st = statusOf(t, r)
	r = runTool(t, vars, "problems", "acme", fmt.Sprint(st.Generation))
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stdout, "a file read without a problem")

	r = runTool(t, vars, "problems", "acme", fmt.Sprint(st.Generation+1))
	require.NotEqual(t, 0, r.code)
	require.Contains(t, r.stderr, "generation_not_found")
}
