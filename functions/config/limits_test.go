package config_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/config"
	"github.com/retailcatalog/catalog/functions/diff/diffwiring"

	"github.com/stretchr/testify/require"
)

// The snapshot limits: 50 GiB decompressed and 50 million products by
// default (DESIGN 4), set by CATALOG_MAX_INFLATED_BYTES and
// CATALOG_MAX_PRODUCTS, carried to the diff.
func TestSnapshotLimitsFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://s/0"}
	c, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.EqualValues(t, int64(50)<<30, c.MaxInflatedBytes)
	require.EqualValues(t, 50_000_000, c.MaxProducts)
	d := diffwiring.Config(&c)
	require.Equal(t, c.MaxInflatedBytes, d.MaxInflatedBytes)
	require.Equal(t, c.MaxProducts, d.MaxProducts)

	env["CATALOG_MAX_INFLATED_BYTES"] = "1048576"
	env["CATALOG_MAX_PRODUCTS"] = "1000"
	c, err = config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.EqualValues(t, 1<<20, diffwiring.Config(&c).MaxInflatedBytes)
	require.EqualValues(t, 1000, diffwiring.Config(&c).MaxProducts)

	for _, bad := range []string{"0", "-1", "lots"} {
		env["CATALOG_MAX_PRODUCTS"] = bad
		_, err = config.FromEnv(func(k string) string { return env[k] })
		require.ErrorContains(t, err, "CATALOG_MAX_PRODUCTS", bad)
	}
}
