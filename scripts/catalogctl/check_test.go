package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/fixtures"
)

// check reads a file as the diff does, on the user's machine: exit 0 and a
// summary for a good file (gzipped or not, the format from the name or
// sniffed), 2 and every problem with its code and line for a bad one
// (duplicates included), 3 for an empty one, 1 when the file cannot be read.
func TestCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o644))
		return path
	}
	good := write("good.csv.gz", fixtures.Gzip([]byte("product_id,title,price\nA,Lamp,1\nB,\"Desk, oak\",2\n")))
	r := runTool(t, nil, "check", good)
	require.Equal(t, 0, r.code, r.stderr)
	require.Equal(t, good+": csv, 2 products, attributes: price, title\n", r.stdout)

	bad := write("export.txt", []byte(`{"product_id": "A", "t": 1}`+"\n"+`{"product_id": 2}`+"\n"+`{"product_id": "A"}`+"\n"))
	r = runTool(t, nil, "check", bad)
	require.Equal(t, 2, r.code, r.stderr)
	require.Equal(t, []string{
		bad + `: missing_product_id: line 2: product_id is a number, not a string`,
		bad + `: duplicate_product_id: line 3: duplicate product_id "A", first on line 1`,
	}, strings.Split(strings.TrimSpace(r.stdout), "\n"))
	require.Contains(t, r.stderr, "2 problems")
	require.Contains(t, r.stderr, "docs/RETAILERS.md")

	r = runTool(t, nil, "check", "--json", bad)
	require.Equal(t, 2, r.code, r.stderr)
	var rep checkReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	require.Equal(t, "jsonl", string(rep.Format))
	require.Len(t, rep.Problems, 2)
	require.Equal(t, 3, rep.Problems[1].Line)

	r = runTool(t, nil, "check", write("empty.csv", []byte("product_id,title\n")))
	require.Equal(t, 3, r.code, r.stderr)
	require.Contains(t, r.stdout, "empty_snapshot")

	r = runTool(t, nil, "check", "--format", "jsonl", write("x.csv", []byte("product_id\nA\n")))
	require.Equal(t, 2, r.code, "the format given wins over the name")
	require.Contains(t, r.stdout, "malformed_json")

	r = runTool(t, nil, "check", filepath.Join(dir, "nope.csv"))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "no such file")
}
