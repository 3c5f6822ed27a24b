package systemtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// Each diff tags the indexes older than the applied baseline it merged
// with, for the bucket's lifecycle rule to expire; the baseline and newer
// indexes stay untagged, and the catalog stays right.
func TestOldIndexesRetired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	var gens []int64
	for i := range 4 {
		c := fixtures.Generate("p", 50+i) // a new product each time
		s := e.Upload("r1", c.CSV(nil))
		require.Equal(t, "applied", s.State, "%+v", s.Error)
		gens = append(gens, s.Generation)
	}
	ctx := context.Background()
	for i, gen := range gens {
		tags, err := e.Stack.Blobs.Tags(ctx, events.IndexKey("r1", gen))
		require.NoError(t, err, "generation %d", gen)
		// The last diff (gens[3]) merged with gens[2]: everything before is retired.
		if i < 2 {
			require.Equal(t, events.SupersededTagValue, tags[events.SupersededTagKey], "index of generation %d", gen)
			body, err := e.Stack.Blobs.Get(ctx, events.IndexKey("r1", gen))
			require.NoError(t, err)
			require.NotContains(t, string(body), "Tagging", "tagging leaves the object as it was")
		} else {
			require.Empty(t, tags, "index of generation %d is still needed", gen)
		}
	}
	// The next diff reads its baseline as usual.
	s := e.Upload("r1", fixtures.Generate("p", 60).CSV(nil))
	require.Equal(t, "applied", s.State, "%+v", s.Error)
	require.Len(t, e.Catalog("r1"), 60)
}
