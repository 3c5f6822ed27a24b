package catalog

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The sorter yields every entry sorted by (id, line), whatever the input
// order and batch size, and finds the smallest duplicate with its first two lines.
func TestSorterProperty(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 3))
		n := rng.IntN(300)
		var in []Ref
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("p%04d", rng.IntN(2000))
			if rng.IntN(4) == 0 { // runs of sorted input
				id = fmt.Sprintf("p%04d", 500+i)
			}
			in = append(in, Ref{ID: []byte(id), Hash: h(id), Line: int32(i + 2)})
		}
		if seed%3 == 0 {
			slices.SortStableFunc(in, func(a, b Ref) int { return bytes.Compare(a.ID, b.ID) })
			for i := range in {
				in[i].Line = int32(i + 2)
			}
		}
		s := newSorter(1 + rng.IntN(40))
		for _, r := range in {
			s.Add(r.ID, r.Hash, r.Line)
		}
		dupID, first, second, err := s.Finish()
		require.NoError(t, err)
		want := slices.Clone(in)
		slices.SortStableFunc(want, func(a, b Ref) int { return bytes.Compare(a.ID, b.ID) })
		wantDup, wantFirst, wantSecond := "", 0, 0
		for i := 1; i < len(want); i++ {
			if bytes.Equal(want[i].ID, want[i-1].ID) {
				wantDup, wantFirst, wantSecond = string(want[i].ID), int(want[i-1].Line), int(want[i].Line)
				break
			}
		}
		require.Equal(t, []any{wantDup, wantFirst, wantSecond}, []any{dupID, first, second}, "seed %d", seed)
		for walk := 0; walk < 2; walk++ {
			it := s.Iter()
			var got []Ref
			for {
				r, err := it.NextRef()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
				got = append(got, Ref{ID: bytes.Clone(r.ID), Hash: r.Hash, Line: r.Line})
			}
			if len(want) == 0 {
				require.Empty(t, got)
				continue
			}
			require.Equal(t, want, got, "seed %d", seed)
		}
		require.Equal(t, int64(n), s.Len())
	}
}
