package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The diff's sort budget and spill directory: defaults, values, bad values.
func TestSortMemoryAndSpillDir(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://a/0"}
	c, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, int64(256<<20), c.SortMemoryBytes)
	require.Equal(t, "", c.SpillDir, "the diff then spills to the system's temporary directory")

	env["CATALOG_SORT_MEMORY_MB"], env["CATALOG_SPILL_DIR"] = "512", "/tmp"
	c, err = FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, int64(512<<20), c.SortMemoryBytes)
	require.Equal(t, "/tmp", c.SpillDir)

	env["CATALOG_SORT_MEMORY_MB"] = "lots"
	_, err = FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "CATALOG_SORT_MEMORY_MB")
}
