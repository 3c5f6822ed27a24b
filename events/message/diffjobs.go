package message

import (
	"context"
	"fmt"
	"time"

	"github.com/retailcatalog/catalog/functions/core/keys"
)

// MessageSender sends one message to an SQS queue: queue.Sender (an
// sqsqueue.Sender, or the in-memory one) satisfies it. For a FIFO queue
// groupID orders the messages of one group and dedupID drops a repeat.
type MessageSender interface {
	Send(ctx context.Context, queueURL, body, groupID, dedupID string) error
}

// DiffJobs sends a generation's diff job to diff-jobs.fifo as the arrival
// function does: the object-created event of the generation's upload key,
// in the retailer's message group, deduplicated by its body (a new event
// time, so a job sent again goes through). A confirmation, the stuck
// sweeper's re-drive and the undo of a generation rejected half way (I10)
// send it.
type DiffJobs struct {
	Sender MessageSender
	URL    string // diff-jobs.fifo
	Region string // of the bucket, in the event
	Bucket string // the catalog bucket, in the event
	// Now is the event time [time.Now].
	Now func() time.Time
}

// SendDiffJob sends the diff job of gen.
func (j DiffJobs) SendDiffJob(ctx context.Context, retailerID string, gen int64) error {
	now := time.Now
	if j.Now != nil {
		now = j.Now
	}
	body := ObjectCreatedMessage(j.Region, j.Bucket, keys.Upload(retailerID, gen), now())
	if err := j.Sender.Send(ctx, j.URL, body, DiffJobGroupID(retailerID), DiffJobDedupID(body)); err != nil {
		return fmt.Errorf("send the diff job of %s/%d: %w", retailerID, gen, err)
	}
	return nil
}
