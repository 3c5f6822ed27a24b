package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/ops"
)

// Operations is what the ops function is told beyond the pipeline's
// queues: the arrivals queue and the dead-letter queues it reads and
// re-drives from, and when a generation counts as stuck.
type Operations struct {
	ArrivalsQueueURL  string        // CATALOG_ARRIVALS_QUEUE_URL
	ArrivalsDLQURL    string        // CATALOG_ARRIVALS_DLQ_URL
	DiffDLQURL        string        // CATALOG_DIFF_DLQ_URL
	ApplySmallDLQURL  string        // CATALOG_APPLY_SMALL_DLQ_URL
	ApplyLargeDLQURL  string        // CATALOG_APPLY_LARGE_DLQ_URL
	ReconcileQueueURL string        // CATALOG_RECONCILE_QUEUE_URL: reconcile-jobs
	ReconcileDLQURL   string        // CATALOG_RECONCILE_DLQ_URL: its dead-letter queue
	StuckAfter        time.Duration // CATALOG_STUCK_AFTER: no progress for this long is stuck [10m]
	StuckMaxRedrives  int           // CATALOG_STUCK_MAX_REDRIVES: re-drives of a stuck generation before it is left to an operator [3]
}

func operationsFromEnv(getenv func(string) string) (Operations, error) {
	o := Operations{
		ArrivalsQueueURL:  strings.TrimSpace(getenv("CATALOG_ARRIVALS_QUEUE_URL")),
		ArrivalsDLQURL:    strings.TrimSpace(getenv("CATALOG_ARRIVALS_DLQ_URL")),
		DiffDLQURL:        strings.TrimSpace(getenv("CATALOG_DIFF_DLQ_URL")),
		ApplySmallDLQURL:  strings.TrimSpace(getenv("CATALOG_APPLY_SMALL_DLQ_URL")),
		ApplyLargeDLQURL:  strings.TrimSpace(getenv("CATALOG_APPLY_LARGE_DLQ_URL")),
		ReconcileQueueURL: strings.TrimSpace(getenv("CATALOG_RECONCILE_QUEUE_URL")),
		ReconcileDLQURL:   strings.TrimSpace(getenv("CATALOG_RECONCILE_DLQ_URL")),
	}
	if v := strings.TrimSpace(getenv("CATALOG_STUCK_AFTER")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("CATALOG_STUCK_AFTER %q: want a positive duration like 10m", v)
		}
		o.StuckAfter = d
	}
	var err error
	if o.StuckMaxRedrives, err = intVar(getenv, "CATALOG_STUCK_MAX_REDRIVES", 3); err != nil {
		return o, err
	}
	return o, nil
}

// Ops is the ops function's configuration.
func (c *Config) Ops() ops.Config {
	return ops.Config{
		AdminToken: c.AdminToken, StallAfter: c.StuckAfter, MaxRedrives: c.StuckMaxRedrives,
		LargeThreshold: c.LargeThresholdRows, InflightCap: c.InflightCap, Region: c.Region,
		Queues: ops.Queues{
			Analytics: c.AnalyticsQueueURL, AnalyticsDLQ: c.AnalyticsDLQURL, Webhooks: c.WebhooksQueueURL, WebhooksDLQ: c.WebhooksDLQURL,

			Arrivals: c.ArrivalsQueueURL, ArrivalsDLQ: c.ArrivalsDLQURL,
			DiffJobs: c.DiffQueueURL, DiffJobsDLQ: c.DiffDLQURL,
			ApplySmall: c.ApplySmallQueueURL, ApplySmallDLQ: c.ApplySmallDLQURL,
			ApplyLarge: c.ApplyLargeQueueURL, ApplyLargeDLQ: c.ApplyLargeDLQURL,
			Reconcile: c.ReconcileQueueURL, ReconcileDLQ: c.ReconcileDLQURL,
		},
	}
}
