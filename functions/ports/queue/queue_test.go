package queue_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/ports/queue"
)

func TestDeadLetterQueueName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"webhooks":             "webhooks-dlq",
		"apply-small.fifo":     "apply-small-dlq.fifo",
		"stack-diff-jobs.fifo": "stack-diff-jobs-dlq.fifo",
	} {
		if got := queue.DeadLetterQueueName(in); got != want {
			t.Errorf("DeadLetterQueueName(%q) = %q, want %q", in, got, want)
		}
	}
}
