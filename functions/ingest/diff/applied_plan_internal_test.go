package diff

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// mergeRuns gives the entries of any number of sorted runs (a chunk's
// each, some empty) in product_id order.
func TestMergeRunsSorts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for runs := 0; runs <= 9; runs++ {
		var entries []catalog.PlanEntry
		var bounds []int
		for r := 0; r < runs; r++ {
			start := len(entries)
			for n := rng.IntN(40); n > 0; n-- {
				entries = append(entries, catalog.PlanEntry{ProductID: fmt.Sprintf("p%05d", rng.IntN(100000))})
			}
			slices.SortFunc(entries[start:], byProductID)
			bounds = append(bounds, len(entries))
		}
		want := slices.Clone(entries)
		slices.SortStableFunc(want, byProductID)
		got := mergeRuns(slices.Clone(entries), bounds)
		require.Equal(t, len(want), len(got), "%d runs", runs)
		for i := range want {
			require.Equal(t, want[i].ProductID, got[i].ProductID, "%d runs, entry %d", runs, i)
		}
	}
}
