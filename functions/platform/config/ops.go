package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/ports/queue"
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
	// TombstoneAfter (CATALOG_TOMBSTONE_AFTER): how long after the deleting
	// generation was applied collection may remove tombstones (DESIGN 14)
	// [0: the ops function's default, the chunk objects' 19 days].
	TombstoneAfter time.Duration
}

// Queue names under CATALOG_QUEUE_URL_BASE (the stack's, and the local
// stack's): a work queue's dead-letter queue is its name with "-dlq"
// (before ".fifo").
const (
	queueArrivals      = "arrivals"
	queueReconcileJobs = "reconcile-jobs"
	queueAnalytics     = "analytics"
	queueWebhooks      = "webhooks"
	queueDiffJobs      = "diff-jobs.fifo"
	queueApplySmall    = "apply-small.fifo"
	queueApplyLarge    = "apply-large.fifo"
)

// deriveQueueURLs fills the operations' queue URLs that were not given
// from base, the URL of the queues' names without the name
// (CATALOG_QUEUE_URL_BASE, "https://sqs.<region>.amazonaws.com/<account>/<stack>-"):
// the ops function reads every queue, and one base keeps its environment
// within Lambda's 4 KB at the most shards.
func (c *Config) deriveQueueURLs(base string) {
	if base == "" {
		return
	}
	for _, q := range []struct {
		url  *string
		name string
	}{
		{&c.ArrivalsQueueURL, queueArrivals}, {&c.ArrivalsDLQURL, queue.DeadLetterQueueName(queueArrivals)},
		{&c.DiffDLQURL, queue.DeadLetterQueueName(queueDiffJobs)},
		{&c.ApplySmallDLQURL, queue.DeadLetterQueueName(queueApplySmall)}, {&c.ApplyLargeDLQURL, queue.DeadLetterQueueName(queueApplyLarge)},
		{&c.ReconcileQueueURL, queueReconcileJobs}, {&c.ReconcileDLQURL, queue.DeadLetterQueueName(queueReconcileJobs)},
		{&c.AnalyticsQueueURL, queueAnalytics}, {&c.AnalyticsDLQURL, queue.DeadLetterQueueName(queueAnalytics)},
		{&c.WebhooksQueueURL, queueWebhooks}, {&c.WebhooksDLQURL, queue.DeadLetterQueueName(queueWebhooks)},
	} {
		if *q.url == "" {
			*q.url = base + q.name
		}
	}
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
	if v := strings.TrimSpace(getenv("CATALOG_TOMBSTONE_AFTER")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return o, fmt.Errorf("CATALOG_TOMBSTONE_AFTER %q: want a positive duration like 456h", v)
		}
		o.TombstoneAfter = d
	}
	var err error
	if o.StuckMaxRedrives, err = intVar(getenv, "CATALOG_STUCK_MAX_REDRIVES", 3); err != nil {
		return o, err
	}
	return o, nil
}
