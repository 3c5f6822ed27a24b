package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// CATALOG_SHARD_READERS: one entry per shard, readers of a shard split by "|".
func TestParseReaders(t *testing.T) {
	got, err := ParseReaders("r0.example.com,r1.example.com", 2)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"r0.example.com"}, {"r1.example.com"}}, got)

	got, err = ParseReaders(" 10.0.0.5 | 10.0.0.6:5433 ,", 2)
	require.NoError(t, err)
	require.Equal(t, [][]string{{"10.0.0.5", "10.0.0.6:5433"}, nil}, got)

	got, err = ParseReaders("", 3)
	require.NoError(t, err)
	require.Nil(t, got)

	_, err = ParseReaders("a,b,c", 2)
	require.Error(t, err)

	env := map[string]string{
		"CATALOG_CONTROL_DB": "postgres://c", "CATALOG_SHARD_DBS": "postgres://s0,postgres://s1",
		"CATALOG_SHARD_READERS": "r0a|r0b,r1", "CATALOG_CONTROL_READER": "c1|c2",
	}
	c, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, [][]string{{"r0a", "r0b"}, {"r1"}}, c.ShardReaders)
	require.Equal(t, []string{"c1", "c2"}, c.ControlReaders)
	env["CATALOG_SHARD_READERS"] = "only-one"
	_, err = FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "one per shard")
}

func TestShardHostsOnePerShard(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://a/0,postgres://b/1",
		"CATALOG_SHARD_HOSTS": "p0.example,", "CATALOG_CONTROL_HOST": "pc.example"}
	c, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, []string{"p0.example", ""}, c.ShardHosts)
	require.Equal(t, "pc.example", c.ControlHost)
	env["CATALOG_SHARD_HOSTS"] = "p0.example"
	_, err = FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "CATALOG_SHARD_HOSTS")
}
