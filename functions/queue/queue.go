// Package queue is the queue boundary: the one interface the handlers send
// messages through, whatever is behind it (the SQS adapter sqsqueue, or the
// in-memory one of package inmem). It imports no AWS package. The contract
// every implementation keeps is the suite in queuetest.
package queue

import "context"

// Sender sends messages to queues.
type Sender interface {
	// Send sends body to queueURL. For a FIFO queue groupID orders the
	// messages of one group (one in flight at a time) and dedupID drops a
	// repeat of the same message; for a standard queue both are "".
	Send(ctx context.Context, queueURL, body, groupID, dedupID string) error
}
