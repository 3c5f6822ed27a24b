package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/finance/costs"
)

// The read function's access-log sampling is read once, from 0 to 1
// (default 1%, the cost model's default), with its slow threshold; values
// out of range are refused at start, not clamped.
func TestStorefrontAccessLogConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://a/0"}
	read := func() (Storefront, error) {
		c, err := FromEnv(func(k string) string { return env[k] })
		return c.Storefront, err
	}
	s, err := read()
	require.NoError(t, err)
	require.Equal(t, Storefront{AccessLogSample: 0.01}, s)
	require.Equal(t, costs.DefaultReadLogSample, DefaultReadAccessLogSample, "the model prices the deployed default")
	env["CATALOG_READ_ACCESS_LOG_SAMPLE"], env["CATALOG_READ_SLOW_REQUEST"] = "0.25", "250ms"
	s, err = read()
	require.NoError(t, err)
	require.Equal(t, Storefront{AccessLogSample: 0.25, SlowRequest: 250 * time.Millisecond}, s)
	for _, bad := range []string{"1.5", "-0.1", "NaN", "a tenth"} {
		env["CATALOG_READ_ACCESS_LOG_SAMPLE"] = bad
		_, err = read()
		require.ErrorContains(t, err, "CATALOG_READ_ACCESS_LOG_SAMPLE", bad)
	}
	env["CATALOG_READ_ACCESS_LOG_SAMPLE"], env["CATALOG_READ_SLOW_REQUEST"] = "1", "0s"
	_, err = read()
	require.ErrorContains(t, err, "CATALOG_READ_SLOW_REQUEST")
}
