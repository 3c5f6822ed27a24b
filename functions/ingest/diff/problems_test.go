package diff_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// A rejection lists every problem of the file (up to 100) in line order,
// the parser's and the duplicates the sorter finds alike, so a retailer
// fixes the file in one round; the first is the error's code and line.
func TestRejectionListsEveryProblem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g := f.upload([]byte("product_id,price\na,1\nb,1,extra\nc\na,2\n,5\nd,4\nd,5\n"))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	var lines []int
	var codes []string
	for _, p := range st.Problems {
		lines = append(lines, p.Line)
		codes = append(codes, p.Code)
		require.NotEmpty(t, p.Message)
	}
	require.Equal(t, []int{3, 4, 5, 6, 8}, lines, "%v", st.Problems)
	require.Equal(t, "duplicate_product_id", codes[2])
	require.Equal(t, "duplicate_product_id", codes[4])
	require.Equal(t, st.Problems[0].Code, st.ErrorCode)
	require.Equal(t, 3, st.ErrorLine)
	require.False(t, st.MoreProblems)
	require.Empty(t, f.take(), "nothing sent")

	// Only duplicates: listed too, both lines named.
	g = f.upload([]byte("product_id,price\nx,1\ny,1\nx,2\ny,2\n"))
	f.diff(g)
	st = f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Len(t, st.Problems, 2)
	require.Contains(t, st.Problems[0].Message, `duplicate product_id "x", first on line 2`)
	require.Equal(t, 4, st.ErrorLine)
}
