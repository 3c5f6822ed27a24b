package systemtest_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
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
		tags, err := e.Stack.Blobs.Tags(ctx, keys.Index("r1", gen))
		require.NoError(t, err, "generation %d", gen)
		// The last diff (gens[3]) merged with gens[2]: everything before is retired.
		if i < 2 {
			require.Equal(t, keys.SupersededTagValue, tags[keys.SupersededTagKey], "index of generation %d", gen)
			body, err := e.Stack.Blobs.Get(ctx, keys.Index("r1", gen))
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

// Uploads are retired like indexes, but the one the applied generation's
// content was read from stays untagged, for as long as it is (an undo
// reads it, I10): after an undo, the baseline is the undo, whose content is
// an older generation's upload, which stays.
func TestUploadsRetiredButTheBaselines(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	ctx := context.Background()
	tagged := func(gen int64) bool {
		t.Helper()
		tags, err := e.Stack.Blobs.Tags(ctx, keys.Upload("r1", gen))
		require.NoError(t, err, "upload of generation %d", gen)
		return tags[keys.SupersededTagKey] == keys.SupersededTagValue
	}
	c := fixtures.Generate("p", 30)
	g1 := e.Upload("r1", c.CSV(nil)).Generation
	c["p-00001"]["price"] = "2"
	g2 := e.Upload("r1", c.CSV(nil)).Generation
	c["p-00001"]["price"] = "3"
	g3 := e.Upload("r1", c.CSV(nil)).Generation
	require.True(t, tagged(g1), "older than the baseline g3's diff merged with")
	require.False(t, tagged(g2), "the baseline then")
	require.False(t, tagged(g3), "the newest")

	// g4 is refused half way and undone: the undo's content is g3's upload.
	e.refuseTitle("r1", "poison")
	bad := c.Clone()
	for id := range bad {
		bad[id]["price"] = "4"
	}
	bad["p-00015"]["title"] = "poison"
	s4 := e.Upload("r1", bad.CSV(nil))
	require.Equal(t, "rejected", s4.State)
	undo := e.undoOf("r1", s4.Generation)
	require.Equal(t, g3, *undo.SourceGeneration)
	// Two more uploads: their diffs merge with the undo, then with g6.
	c["p-00002"]["price"] = "6"
	g6 := e.Upload("r1", c.CSV(nil)).Generation
	require.False(t, tagged(g3), "the undo's content, read from g3's upload, while the undo is the baseline")
	c["p-00002"]["price"] = "7"
	e.Upload("r1", c.CSV(nil))
	require.True(t, tagged(g3), "retired once the baseline moved past the undo")
	require.True(t, tagged(s4.Generation))
	require.False(t, tagged(g6))
	e.RequireCatalog("r1", c)
}
