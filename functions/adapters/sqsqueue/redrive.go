package sqsqueue

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Redriver moves messages of a dead-letter queue back to their work queue
// (queue.Redriver). SQS's own StartMessageMoveTask does much the same on
// AWS, but the local emulator does not have it, and this works the same on
// standard and FIFO queues and answers with what it moved. Each message is
// sent to the work queue, then deleted from the dead-letter queue: a crash
// between the two leaves a duplicate, never a loss. Messages received but
// not moved (a send that failed) are visible again in the dead-letter
// queue after a minute.
type Redriver struct {
	client *sqs.Client
}

// NewRedriver wraps a client.
func NewRedriver(client *sqs.Client) *Redriver { return &Redriver{client: client} }

// Redrive moves up to max messages from dlqURL to queueURL. A message keeps
// its body, its message attributes (the event type of a change event) and,
// on a FIFO queue, its group; its deduplication id gets a suffix of its
// own, so that the move is not dropped as a repeat of the first send. It
// returns how many messages it moved.
func (r *Redriver) Redrive(ctx context.Context, dlqURL, queueURL string, max int) (int, error) {
	fifo := strings.HasSuffix(queueURL, ".fifo")
	moved := 0
	for moved < max {
		out, err := r.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(dlqURL), MaxNumberOfMessages: int32(min(10, max-moved)), VisibilityTimeout: 60,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
			MessageAttributeNames:       []string{"All"},
		})
		if err != nil {
			return moved, fmt.Errorf("redrive: receive from %s: %w", dlqURL, err)
		}
		if len(out.Messages) == 0 {
			return moved, nil
		}
		send := make([]types.SendMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			e := types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: m.Body, MessageAttributes: m.MessageAttributes}
			if fifo {
				group := m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]
				if group == "" {
					group = "redrive"
				}
				dedup := m.Attributes[string(types.MessageSystemAttributeNameMessageDeduplicationId)]
				e.MessageGroupId = aws.String(group)
				e.MessageDeduplicationId = aws.String(redriveDedupID(dedup, aws.ToString(m.MessageId)))
			}
			send[i] = e
		}
		sent, err := r.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: send})
		if err != nil {
			return moved, fmt.Errorf("redrive: send to %s: %w", queueURL, err)
		}
		var del []types.DeleteMessageBatchRequestEntry
		for _, s := range sent.Successful {
			i, _ := strconv.Atoi(aws.ToString(s.Id))
			del = append(del, types.DeleteMessageBatchRequestEntry{Id: s.Id, ReceiptHandle: out.Messages[i].ReceiptHandle})
		}
		if len(del) > 0 {
			if _, err := r.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(dlqURL), Entries: del}); err != nil {
				return moved, fmt.Errorf("redrive: delete from %s (the moved messages are now in both queues): %w", dlqURL, err)
			}
		}
		moved += len(del)
		if len(sent.Failed) > 0 {
			f := sent.Failed[0]
			return moved, fmt.Errorf("redrive: %s refused %d messages: %s: %s", queueURL, len(sent.Failed), aws.ToString(f.Code), aws.ToString(f.Message))
		}
	}
	return moved, nil
}

// redriveDedupID is the deduplication id of a redriven FIFO message: its
// first one, made unique by the dead-letter message's id (a new one each
// time the message lands in a dead-letter queue), within SQS's 128 characters.
func redriveDedupID(first, messageID string) string {
	suffix := ":redrive:" + messageID
	if len(suffix) > maxDedupID {
		suffix = suffix[:maxDedupID]
	}
	if len(first)+len(suffix) > maxDedupID {
		first = first[:maxDedupID-len(suffix)]
	}
	return first + suffix
}

// maxDedupID is the longest MessageDeduplicationId SQS takes.
const maxDedupID = 128
