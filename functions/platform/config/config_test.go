package config

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retailcatalog/catalog/functions/adapters/secrets"

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

// On AWS a function logs in as its own role with IAM tokens, verifying the
// server against the shipped CA bundle; locally none of this is set and the
// DSNs stay as they are.
func TestDatabaseRoleAndTLS(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"CATALOG_CONTROL_DB": "postgres://control.example:5432/catalog", "CATALOG_SHARD_DBS": "postgres://s0.example:5432/catalog",
		"CATALOG_DB_USER": "catalog_read", "CATALOG_DB_IAM_AUTH": "true", "CATALOG_DB_SSLROOTCERT": "/var/task/certs/rds-ca-bundle.pem",
	}
	c, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "catalog_read", c.DBUser)
	require.True(t, c.DBIAMAuth)
	dsn, err := c.LiteralDSN(c.ShardDBs[0])
	require.NoError(t, err)
	require.Equal(t, "postgres://catalog_read@s0.example:5432/catalog?sslmode=verify-full&sslrootcert=%2Fvar%2Ftask%2Fcerts%2Frds-ca-bundle.pem", dsn)
	_, err = c.LiteralDSN("host=s0.example dbname=catalog")
	require.ErrorContains(t, err, "postgres:// URLs")

	env["CATALOG_DB_IAM_AUTH"] = "maybe"
	_, err = FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "CATALOG_DB_IAM_AUTH")

	local, err := FromEnv(func(k string) string {
		return map[string]string{"CATALOG_CONTROL_DB": "postgres://postgres@127.0.0.1:5433/c?sslmode=disable", "CATALOG_SHARD_DBS": "postgres://postgres@127.0.0.1:5433/s"}[k]
	})
	require.NoError(t, err)
	dsn, err = local.LiteralDSN(local.ControlDB)
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5433/c?sslmode=disable", dsn, "local DSNs stay as they are")
	require.False(t, local.DBIAMAuth)
}

// The DSNs config builds make pgx verify the server: the shipped bundle as
// roots, the host name checked, and no plaintext or unverified fallback.
func TestVerifyFullDSNParsesStrict(t *testing.T) {
	t.Parallel()
	bundle := filepath.Join("..", "..", "adapters", "rdsca", "rds-ca-bundle.pem")
	c := Config{Databases: Databases{DBUser: "catalog_apply", DBRootCert: bundle}}
	literal, err := c.LiteralDSN("postgres://s0.cluster-abc.us-east-1.rds.amazonaws.com:5432/catalog")
	require.NoError(t, err)
	fromSecret := secrets.DSN(`{"host":"s0.cluster-abc.us-east-1.rds.amazonaws.com","port":5432,"username":"catalog_admin","password":"pw","dbname":"catalog"}`, bundle)
	for _, dsn := range []string{literal, fromSecret} {
		cfg, err := pgconn.ParseConfig(dsn)
		require.NoError(t, err, dsn)
		require.NotNil(t, cfg.TLSConfig, dsn)
		require.False(t, cfg.TLSConfig.InsecureSkipVerify, dsn)
		require.Equal(t, "s0.cluster-abc.us-east-1.rds.amazonaws.com", cfg.TLSConfig.ServerName, dsn)
		require.NotNil(t, cfg.TLSConfig.RootCAs, dsn)
		for _, fb := range cfg.Fallbacks {
			require.NotNil(t, fb.TLSConfig, "%s: a fallback without TLS", dsn)
		}
	}
}

// Lambda's logging controls set AWS_LAMBDA_LOG_LEVEL; it wins over
// CATALOG_LOG_LEVEL, which applies elsewhere (the default is INFO).
func TestLogLevel(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://a/0"}
	level := func() (slog.Level, error) {
		c, err := FromEnv(func(k string) string { return env[k] })
		return c.LogLevel, err
	}
	l, err := level()
	require.NoError(t, err)
	require.Equal(t, slog.LevelInfo, l)
	env["CATALOG_LOG_LEVEL"] = "debug"
	l, _ = level()
	require.Equal(t, slog.LevelDebug, l)
	env["AWS_LAMBDA_LOG_LEVEL"] = "WARN"
	l, _ = level()
	require.Equal(t, slog.LevelWarn, l)
	env["AWS_LAMBDA_LOG_LEVEL"] = "TRACE"
	l, _ = level()
	require.Equal(t, slog.LevelDebug-4, l)
	env["AWS_LAMBDA_LOG_LEVEL"] = "chatty"
	_, err = level()
	require.ErrorContains(t, err, "AWS_LAMBDA_LOG_LEVEL")
}
