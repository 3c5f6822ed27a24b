// Package retry is the consumers' retry schedule (DESIGN 8): a message
// that failed is delivered again after an exponentially growing delay, set
// by changing its visibility timeout, until its queue's redrive policy
// parks it in the dead-letter queue. The schedule also says how many
// receives a queue's redrive count must allow for retries to go on for a
// given time (the webhooks queue's: at least 24 h).
package retry

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
)

// DefaultBase is the first delay (CATALOG_BACKOFF_BASE); DefaultCap the
// longest (each retry doubles the delay up to it).
const (
	DefaultBase = 30 * time.Second
	DefaultCap  = 15 * time.Minute
)

// Schedule is an exponential backoff: the delay after the nth failed
// delivery (n from 1) is Base * 2^(n-1), at most Cap.
type Schedule struct {
	Base, Cap time.Duration
}

// Delay is how long a message waits after its nth failed delivery.
func (s Schedule) Delay(n int) time.Duration {
	base, limit := s.Base, s.Cap
	if base <= 0 {
		base = DefaultBase
	}
	if limit <= 0 {
		limit = DefaultCap
	}
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// Receives is the smallest number of deliveries whose delays add up to at
// least window: a queue whose redrive count is this keeps retrying a
// message that always fails for window (plus the time of the attempts)
// before it parks it.
func (s Schedule) Receives(window time.Duration) int {
	var waited time.Duration
	n := 1
	for waited < window {
		waited += s.Delay(n)
		n++
	}
	return n
}

// Visibility changes how long until a received message is delivered again.
// sqsqueue.Visibility implements it.
type Visibility interface {
	// Delay makes the message of receiptHandle on queueURL visible again after d.
	Delay(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error
}

// ReceiveCount is the message's ApproximateReceiveCount (1 on the first delivery).
func ReceiveCount(msg lambdaevents.SQSMessage) int {
	n, err := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Failures collects the failed messages of one batch: each is delayed by
// the schedule and reported in the batch response, so the event source
// leaves it on the queue.
type Failures struct {
	Schedule Schedule
	Queue    Visibility
	QueueURL string
	Log      *slog.Logger

	resp lambdaevents.SQSEventResponse
}

// Fail reports msg failed because of err and delays its next delivery.
// Changing its visibility is best effort: if that fails, the message comes
// back after the queue's visibility timeout.
func (f *Failures) Fail(ctx context.Context, msg lambdaevents.SQSMessage, err error) {
	f.FailAfter(ctx, msg, err, 0)
}

// FailAfter is Fail with a delay of at least atLeast (the schedule's when
// that is longer).
func (f *Failures) FailAfter(ctx context.Context, msg lambdaevents.SQSMessage, err error, atLeast time.Duration) {
	n := ReceiveCount(msg)
	d := max(f.Schedule.Delay(n), atLeast)
	f.Log.WarnContext(ctx, "message failed; retrying later", "message_id", msg.MessageId, "receive", n, "retry_in", d.String(), "err", err)
	if f.Queue != nil && f.QueueURL != "" {
		if verr := f.Queue.Delay(ctx, f.QueueURL, msg.ReceiptHandle, d); verr != nil {
			f.Log.WarnContext(ctx, "delaying a failed message failed; it returns after the visibility timeout", "message_id", msg.MessageId, "err", verr)
		}
	}
	f.resp.BatchItemFailures = append(f.resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
}

// Response is the batch response listing every failed message.
func (f *Failures) Response() lambdaevents.SQSEventResponse { return f.resp }
