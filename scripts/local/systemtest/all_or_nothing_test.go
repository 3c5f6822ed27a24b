package systemtest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// I7: bad files are rejected whole with a reason and a line; the catalog keeps
// the previous generation.
func TestI7BadSnapshotsRejectedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	good := fixtures.Generate("p", 20)
	require.Equal(t, "applied", e.Upload("r1", good.CSV(nil)).State)
	gz := fixtures.Gzip(good.CSV(nil))
	cases := []struct {
		name, code string
		data       []byte
		line       int
	}{
		{"malformed csv", "malformed_csv", []byte("product_id,title\na,1\nb,\"open\n"), 3},
		{"duplicate id", "duplicate_product_id", []byte("product_id,title\na,1\nb,2\na,3\n"), 4},
		{"missing column", "missing_product_id_column", []byte("sku,title\na,1\n"), 1},
		{"missing id", "missing_product_id", []byte("product_id,title\na,1\n,2\n"), 3},
		{"bad json", "malformed_json", []byte("{\"product_id\":\"a\"}\n{\"product_id\":\n"), 2},
		{"invalid utf8", "invalid_utf8", []byte("product_id,title\na,\xff\xfe\n"), 2},
		{"truncated gzip", "bad_gzip", gz[:len(gz)/2], 0},
	}
	for _, c := range cases {
		s := e.Upload("r1", c.data)
		require.Equal(t, "rejected", s.State, c.name)
		require.NotNil(t, s.Error, c.name)
		require.Equal(t, c.code, s.Error.Code, c.name)
		require.NotEmpty(t, s.Error.Message, c.name)
		if c.line > 0 {
			require.NotNil(t, s.Error.Line, c.name)
			require.Equal(t, c.line, *s.Error.Line, c.name)
		}
	}
	e.RequireCatalog("r1", good)
}
