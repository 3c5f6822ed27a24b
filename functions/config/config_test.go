package config

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/secrets"
	"github.com/retailcatalog/catalog/functions/upload"

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
	dsn, err := c.literalDSN(c.ShardDBs[0])
	require.NoError(t, err)
	require.Equal(t, "postgres://catalog_read@s0.example:5432/catalog?sslmode=verify-full&sslrootcert=%2Fvar%2Ftask%2Fcerts%2Frds-ca-bundle.pem", dsn)
	_, err = c.literalDSN("host=s0.example dbname=catalog")
	require.ErrorContains(t, err, "postgres:// URLs")

	env["CATALOG_DB_IAM_AUTH"] = "maybe"
	_, err = FromEnv(func(k string) string { return env[k] })
	require.ErrorContains(t, err, "CATALOG_DB_IAM_AUTH")

	local, err := FromEnv(func(k string) string {
		return map[string]string{"CATALOG_CONTROL_DB": "postgres://postgres@127.0.0.1:5433/c?sslmode=disable", "CATALOG_SHARD_DBS": "postgres://postgres@127.0.0.1:5433/s"}[k]
	})
	require.NoError(t, err)
	dsn, err = local.literalDSN(local.ControlDB)
	require.NoError(t, err)
	require.Equal(t, "postgres://postgres@127.0.0.1:5433/c?sslmode=disable", dsn, "local DSNs stay as they are")
	require.False(t, local.DBIAMAuth)
}

// The DSNs config builds make pgx verify the server: the shipped bundle as
// roots, the host name checked, and no plaintext or unverified fallback.
func TestVerifyFullDSNParsesStrict(t *testing.T) {
	t.Parallel()
	bundle := filepath.Join("..", "rdsca", "rds-ca-bundle.pem")
	c := Config{DBUser: "catalog_apply", DBRootCert: bundle}
	literal, err := c.literalDSN("postgres://s0.cluster-abc.us-east-1.rds.amazonaws.com:5432/catalog")
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

// The environment's endpoints and sizes reach the clients and the handlers;
// what it leaves unset takes the pipeline's defaults.
func TestHandlersAndEndpointsFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://s/0",
		"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:9324",
		"CATALOG_APPLY_SMALL_QUEUE_URL": "small", "CATALOG_APPLY_LARGE_QUEUE_URL": "large", "CATALOG_DIFF_QUEUE_URL": "diff"}
	c, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9000", c.S3Endpoint)
	require.Equal(t, "http://127.0.0.1:9324", c.SQSEndpoint)
	d := c.Diff()
	require.Equal(t, catalog.DefaultInflightCap, d.InflightCap)
	require.Equal(t, catalog.DefaultLargeThresholdRows, d.LargeThreshold)
	require.Equal(t, "small", d.SmallQueueURL)
	require.Equal(t, "large", d.LargeQueueURL)
	u := c.Upload()
	require.Equal(t, upload.DefaultUploadTTL, u.UploadTTL)
	require.Equal(t, "diff", u.DiffQueueURL)
}

// With CATALOG_QUEUE_URL_BASE, the ops function's queues not given one by
// one are the base and their names (a dead-letter queue: "-dlq" before
// ".fifo"); a URL given wins.
func TestQueueURLBase(t *testing.T) {
	t.Parallel()
	base := "https://sqs.us-east-1.amazonaws.com/123456789012/Catalog-"
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://s/0",
		"CATALOG_QUEUE_URL_BASE": base, "CATALOG_WEBHOOKS_DLQ_URL": "given"}
	c, err := FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	q := c.Ops().Queues
	require.Equal(t, base+"arrivals", q.Arrivals)
	require.Equal(t, base+"arrivals-dlq", q.ArrivalsDLQ)
	require.Equal(t, base+"diff-jobs-dlq.fifo", q.DiffJobsDLQ)
	require.Equal(t, base+"apply-small-dlq.fifo", q.ApplySmallDLQ)
	require.Equal(t, base+"apply-large-dlq.fifo", q.ApplyLargeDLQ)
	require.Equal(t, base+"reconcile-jobs", q.Reconcile)
	require.Equal(t, base+"reconcile-jobs-dlq", q.ReconcileDLQ)
	require.Equal(t, base+"analytics", q.Analytics)
	require.Equal(t, base+"analytics-dlq", q.AnalyticsDLQ)
	require.Equal(t, base+"webhooks", q.Webhooks)
	require.Equal(t, "given", q.WebhooksDLQ)

	delete(env, "CATALOG_QUEUE_URL_BASE")
	c, err = FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Empty(t, c.Ops().Queues.Arrivals, "no base: only the URLs given")
}
