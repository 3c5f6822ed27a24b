package diff_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// The diff writes every problem of a file it read (DESIGN 13): past the
// status's 100, the parser's and the duplicates merged in line order; an
// empty file when there were none; nothing for a generation not read.
func TestDiffWritesEveryProblem(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	ctx := context.Background()
	var b strings.Builder
	b.WriteString("product_id,price\n")
	want := []string{}
	line := 1
	for i := range 300 {
		line++
		fmt.Fprintf(&b, "p%d,1,extra\n", i) // malformed_csv
		want = append(want, fmt.Sprintf("malformed_csv@%d", line))
		line++
		fmt.Fprintf(&b, "d%d,1\n", i%150) // a duplicate from the 151st on
		if i >= 150 {
			want = append(want, fmt.Sprintf("duplicate_product_id@%d", line))
		}
	}
	g := f.upload([]byte(b.String()))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Len(t, st.Problems, 100)
	require.True(t, st.MoreProblems)

	body, err := f.blobs.Get(ctx, keys.Problems("r1", g))
	require.NoError(t, err)
	var got []string
	dec := snapshot.NewProblemDecoder(bytes.NewReader(body))
	for {
		p, err := dec.Next()
		if err != nil {
			break
		}
		got = append(got, fmt.Sprintf("%s@%d", p.Code, p.Line))
	}
	require.Equal(t, want, got)
	require.NotContains(t, string(body), snapshot.TruncatedLine)
	for i, p := range st.Problems {
		require.Equal(t, want[i], fmt.Sprintf("%s@%d", p.Code, p.Line), "the status lists the file's first 100")
	}

	// A good file: an empty problems file.
	g = f.upload([]byte("product_id,price\na,1\n"))
	f.diff(g)
	require.Equal(t, catalog.StateApplying, f.status(g).State)
	body, err = f.blobs.Get(ctx, keys.Problems("r1", g))
	require.NoError(t, err)
	require.Empty(t, body)

	// Not read yet: none.
	g = f.upload([]byte("product_id,price\na,2\n"))
	_, err = f.blobs.Get(ctx, keys.Problems("r1", g))
	require.ErrorIs(t, err, blob.ErrNotFound)
}
