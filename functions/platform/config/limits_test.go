package config_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/ingest/diff/diffwiring"
	"github.com/retailcatalog/catalog/functions/platform/config"

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

// The meters' variables are read once by FromEnv; unset, each function's
// own defaults apply; CATALOG_METER_FLUSH=0s is a value, not "unset".
func TestMeteringFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://s/0"}
	c, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, config.Metering{RetentionDays: config.DefaultObjectRetentionDays}, c.Metering)

	env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"], env["CATALOG_METER_FLUSH"] = "1769", "0s"
	env["CATALOG_OBJECT_RETENTION_DAYS"], env["CATALOG_COST_DEPLOYMENT"] = "7", "shards=4"
	c, err = config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, config.Metering{MemoryMB: 1769, FlushSet: true, RetentionDays: 7, CostDeployment: "shards=4"}, c.Metering)

	for name, bad := range map[string]string{"CATALOG_METER_FLUSH": "-1s", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "lots", "CATALOG_OBJECT_RETENTION_DAYS": "0"} {
		was := env[name]
		env[name] = bad
		_, err = config.FromEnv(func(k string) string { return env[k] })
		require.ErrorContains(t, err, name)
		env[name] = was
	}
}
