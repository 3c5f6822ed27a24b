// Package queue is the queue boundary: the one interface the handlers send
// messages through, whatever is behind it (the SQS adapter sqsqueue, or the
// in-memory one of package inmem). It imports no AWS package. The contract
// every implementation keeps is the suite in queuetest.
package queue

import (
	"context"
	"strings"
	"time"
)

// DeadLetterQueueName is the name of a queue's dead-letter queue, on AWS and
// in the local stack: the queue's name with "-dlq", before ".fifo" for a
// FIFO queue (whose dead-letter queue must be FIFO too).
func DeadLetterQueueName(queue string) string {
	if name, ok := strings.CutSuffix(queue, ".fifo"); ok {
		return name + "-dlq.fifo"
	}
	return queue + "-dlq"
}

// Sender sends messages to queues.
type Sender interface {
	// Send sends body to queueURL. For a FIFO queue groupID orders the
	// messages of one group (one in flight at a time) and dedupID drops a
	// repeat of the same message; for a standard queue both are "".
	Send(ctx context.Context, queueURL, body, groupID, dedupID string) error
}

// Peeked is a message read from a queue without consuming it.
type Peeked struct {
	ID      string
	Body    string
	GroupID string    // FIFO queues
	SentAt  time.Time // when it was first sent (SQS keeps it when a message moves to a dead-letter queue)
	// Receives is how many times it has been received, peeks included.
	Receives int
}

// Inspector reads what a queue holds without consuming it: what an
// operator looks at in a dead-letter queue.
type Inspector interface {
	// Peek returns up to max messages of queueURL, oldest first as far as
	// the queue tells, and leaves every one of them there: nothing is
	// deleted, and each is visible again when Peek returns. Every peek
	// counts as a receive, so peek only at dead-letter queues (which send
	// nowhere on). A FIFO queue may show only the first message of each
	// message group (the others wait behind it, as for any receiver).
	Peek(ctx context.Context, queueURL string, max int) ([]Peeked, error)
	// Depth is the approximate number of messages queueURL holds, visible
	// or in flight.
	Depth(ctx context.Context, queueURL string) (int, error)
}

// Redriver moves the messages of a dead-letter queue back to the queue they
// came from, after an operator has fixed what made them fail (catalogctl
// dlq redrive). Each message is sent to the work queue before it is
// deleted from the dead-letter queue, so a crash between the two leaves a
// duplicate, never a loss: every consumer is idempotent. A message keeps
// its body, its message attributes and, on a FIFO queue, its group; it
// gets a deduplication id of its own, so that the move is not dropped as a
// repeat of its first send. Its receive count starts again (the whole
// retry schedule of the work queue applies once more).
type Redriver interface {
	// Redrive moves up to max messages from dlqURL to queueURL, oldest
	// first as far as the queue tells, and returns how many it moved.
	Redrive(ctx context.Context, dlqURL, queueURL string, max int) (int, error)
}
