package config_test

import (
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ingest/diff/diffwiring"
	"github.com/retailcatalog/catalog/functions/operate/ops/opswiring"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/publish/relay/relaywiring"
	"github.com/retailcatalog/catalog/functions/publish/webhooks/webhookswiring"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/functions/serve/upload/uploadwiring"

	"github.com/stretchr/testify/require"
)

// The defaults config holds itself (it imports no handler) are the
// handlers' and the cost model's own.
func TestDefaultsAreTheHandlers(t *testing.T) {
	t.Parallel()
	require.Equal(t, diff.DefaultMaxAttempts, config.DefaultDiffAttempts)
	require.Equal(t, apply.DefaultMaxAttempts, config.DefaultApplyAttempts)
	require.Equal(t, upload.DefaultUploadTTL, config.DefaultUploadTTL)
	require.Equal(t, int(costs.DefaultFigures().V(costs.FigChunkRetentionDays)), config.DefaultObjectRetentionDays)
}

// The environment's endpoints and sizes reach the clients and the handlers;
// what it leaves unset takes the pipeline's defaults.
func TestHandlersAndEndpointsFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://s/0",
		"AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9000", "AWS_ENDPOINT_URL_SQS": "http://127.0.0.1:9324",
		"CATALOG_APPLY_SMALL_QUEUE_URL": "small", "CATALOG_APPLY_LARGE_QUEUE_URL": "large", "CATALOG_DIFF_QUEUE_URL": "diff"}
	c, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Equal(t, "http://127.0.0.1:9000", c.S3Endpoint)
	require.Equal(t, "http://127.0.0.1:9324", c.SQSEndpoint)
	d := diffwiring.Config(&c)
	require.Equal(t, catalog.DefaultInflightCap, d.InflightCap)
	require.Equal(t, catalog.DefaultLargeThresholdRows, d.LargeThreshold)
	require.Equal(t, "small", d.SmallQueueURL)
	require.Equal(t, "large", d.LargeQueueURL)
	u := uploadwiring.Config(&c)
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
	c, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	q := opswiring.Config(&c).Queues
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
	c, err = config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Empty(t, opswiring.Config(&c).Queues.Arrivals, "no base: only the URLs given")
}

// The knobs only the local stack sets reach the handlers' settings through
// the same Config functions the Lambdas use; the environment leaves them
// zero, so the Lambdas keep the handlers' defaults.
func TestStackKnobsReachHandlers(t *testing.T) {
	t.Parallel()
	var c config.Config
	c.MaxRowBytes, c.DiffRetryBackoff, c.RelaySweepAge, c.WebhookTimeout = 4096, time.Second, 2*time.Second, 3*time.Second
	d := diffwiring.Config(&c)
	require.Equal(t, 4096, d.MaxRowBytes)
	require.Equal(t, time.Second, d.RetryBackoff)
	require.Equal(t, 2*time.Second, relaywiring.Config(&c).SweepAge)
	require.Equal(t, 3*time.Second, webhookswiring.Config(&c, nil).Timeout)

	env := map[string]string{"CATALOG_CONTROL_DB": "postgres://c/x", "CATALOG_SHARD_DBS": "postgres://s/0"}
	fromEnv, err := config.FromEnv(func(k string) string { return env[k] })
	require.NoError(t, err)
	require.Zero(t, fromEnv.MaxRowBytes)
	require.Zero(t, fromEnv.DiffRetryBackoff)
	require.Zero(t, fromEnv.RelaySweepAge)
	require.Zero(t, fromEnv.WebhookTimeout)
}
