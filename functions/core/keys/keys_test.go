package keys_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
)

// Each key reads back as what made it, and only its own kind of key does.
func TestKeysRoundTrip(t *testing.T) {
	t.Parallel()
	up := keys.Upload("r_1-x", 12)
	require.Equal(t, "snapshots/r_1-x/12/upload", up)
	r, g, err := keys.ParseUpload(up)
	require.NoError(t, err)
	require.Equal(t, "r_1-x", r)
	require.EqualValues(t, 12, g)
	gen, ok := keys.UploadGeneration("r_1-x", up)
	require.True(t, ok)
	require.EqualValues(t, 12, gen)
	_, ok = keys.UploadGeneration("r_1", up)
	require.False(t, ok, "another retailer's prefix")

	ix := keys.Index("r1", 7)
	gen, ok = keys.IndexGeneration("r1", ix)
	require.True(t, ok)
	require.EqualValues(t, 7, gen)
	_, ok = keys.IndexGeneration("r1", up)
	require.False(t, ok, "an upload key is no index key")
	require.Equal(t, "chunks/r1/7/3", keys.Chunk("r1", 7, 3))
	require.NotEqual(t, keys.Chunk("r1", 7, 3), keys.Change("r1", 7, 3))
}

func TestParseUploadRejects(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"snapshots/a/0/upload", "snapshots/a/x/upload", "snapshots//1/upload", "snapshots/a/1/other", "chunks/a/1/2"} {
		_, _, err := keys.ParseUpload(k)
		require.Error(t, err, k)
	}
}
