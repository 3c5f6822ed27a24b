package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// why prints the checks as a readable list with the verdict first, or the
// API's object with --json; it needs the admin token.
func TestWhyAgainstTheStack(t *testing.T) {
	t.Parallel()
	_, admin := startStack(t)
	vars := onboard(t, admin, "w1")
	r := runTool(t, admin, "why", "w1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "verdict: no_uploads\n")
	require.Regexp(t, `(?m)^ok +retailer_exists +retailer w1 is registered`, r.stdout)
	require.Regexp(t, `(?m)^!! +newest_generation +no generation was ever reserved`, r.stdout)

	file := writeFile(t, "c.csv", []byte("product_id,price\nsku-1,10\nsku 2,20\n"))
	up := runTool(t, vars, "upload", "--retailer", "w1", file)
	require.Equal(t, 0, up.code, up.stderr)

	r = runTool(t, admin, "why", "w1", "sku 2")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "verdict: current\n")
	require.Regexp(t, `(?m)^ok +product +the catalog row \(generation 1, .*equal to generation 1's snapshot`, r.stdout)

	r = runTool(t, admin, "why", "--json", "w1", "nope")
	require.Equal(t, 0, r.code, r.stderr)
	var why struct {
		Verdict string
		Steps   []struct {
			Check string
			OK    bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &why))
	require.Equal(t, "not_in_snapshot", why.Verdict)
	require.Equal(t, "product", why.Steps[len(why.Steps)-2].Check)
	require.False(t, why.Steps[len(why.Steps)-2].OK)

	r = runTool(t, admin, "why", "nobody")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "retailer_not_found")
	r = runTool(t, map[string]string{apiVar: admin[apiVar], adminTokenVar: vars[tokenVar]}, "why", "w1")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is not the admin token")
	r = runTool(t, admin, "why")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "usage: catalogctl why [flags] R [P]")
}
