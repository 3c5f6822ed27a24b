package main

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// gc prints what a collection removed (every retailer, or one with
// --retailer; the API's answer with --json); it needs the admin token.
// Nothing goes until the deleting generation is older than the tombstone
// retention (19 days: here the generations are aged in SQL).
func TestGCAgainstTheStack(t *testing.T) {
	t.Parallel()
	st, admin := startStack(t)
	vars := onboard(t, admin, "gc1")
	for _, body := range []string{"product_id,price\na,1\nb,2\nc,3\n", "product_id,price\na,1\n"} {
		up := runTool(t, vars, "upload", "--retailer", "gc1", writeFile(t, "c.csv", []byte(body)))
		require.Equal(t, 0, up.code, up.stderr)
	}
	r := runTool(t, admin, "gc", "--retailer", "gc1")
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, "collected 1 retailers:\n  tombstones         0\n  directory entries  0\n  consumer versions  0\n"+
		"  chunk rows         0\n  outbox rows        0\n  move records       0\n", r.stdout)

	ctx := context.Background()
	_, sh, err := st.Stores.ForRetailer(ctx, "gc1")
	require.NoError(t, err)
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET applied_at = applied_at - interval '30 days',
		state_changed_at = state_changed_at - interval '30 days' WHERE retailer_id = 'gc1'`)
	require.NoError(t, err)
	r = runTool(t, admin, "gc", "--retailer", "gc1", "--json")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("catalogctl gc --json:\n%s", r.stdout)
	var got struct {
		Retailers        int   `json:"retailers"`
		Tombstones       int64 `json:"tombstones"`
		DirectoryEntries int64 `json:"directory_entries"`
		ChunkRows        int64 `json:"chunk_rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, 1, got.Retailers)
	require.EqualValues(t, 2, got.Tombstones, "b and c")
	require.EqualValues(t, 2, got.DirectoryEntries)
	require.EqualValues(t, 2, got.ChunkRows, "one chunk of each generation")

	r = runTool(t, admin, "gc")
	require.Equal(t, 0, r.code, r.stderr)
	t.Logf("catalogctl gc:\n%s", r.stdout)
	require.Contains(t, r.stdout, "  tombstones         0\n", "nothing is left of gc1, and no other retailer's is old enough")

	r = runTool(t, admin, "gc", "--retailer", "nobody")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "retailer_not_found")
	r = runTool(t, map[string]string{apiVar: admin[apiVar], adminTokenVar: vars[tokenVar]}, "gc")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "is not the admin token")
	r = runTool(t, admin, "gc", "extra")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "usage: catalogctl gc")
}
