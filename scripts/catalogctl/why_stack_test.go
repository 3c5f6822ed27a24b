package main

import (
	"context"
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

// reconcile finds rows changed behind the pipeline's back (exit 2), repairs
// them with --repair (exit 0), and shows a run with --run.
func TestReconcileAgainstTheStack(t *testing.T) {
	t.Parallel()
	st, admin := startStack(t)
	vars := onboard(t, admin, "k1")
	file := writeFile(t, "c.csv", []byte("product_id,price\na,1\nb,2\nc,3\n"))
	up := runTool(t, vars, "upload", "--retailer", "k1", file)
	require.Equal(t, 0, up.code, up.stderr)

	r := runTool(t, admin, "reconcile", "--retailer", "k1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "1 of 1 retailers checked, 0 divergent")

	_, err := st.Stores.Shards[0].Pool().Exec(context.Background(),
		`UPDATE products SET attributes = '{"price": "999"}' WHERE retailer_id = 'k1' AND product_id = 'b'`)
	require.NoError(t, err)
	r = runTool(t, admin, "reconcile")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stdout, "k1 (generation 1): 0 missing, 0 extra, 1 different; e.g. b")
	require.Contains(t, r.stdout, "repair with: catalogctl reconcile --repair")

	r = runTool(t, admin, "reconcile", "--repair", "--retailer", "k1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	var rep struct {
		RunID     string `json:"run_id"`
		Divergent []struct{ Repaired int }
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, 1, rep.Divergent[0].Repaired)

	r = runTool(t, admin, "reconcile", "--run", rep.RunID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "repaired 1")
	r = runTool(t, admin, "reconcile", "--run", "rc-0000000000000000")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "run_not_found")
}
