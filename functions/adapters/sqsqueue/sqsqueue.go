// Package sqsqueue is the queue adapter over Amazon SQS (or the local
// SQS-compatible emulator): it sends chunk messages and diff jobs to FIFO
// queues, brings a failed message back sooner than its visibility timeout,
// and reads dead-letter queues without consuming them (Inspector).
package sqsqueue

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// NewClient builds an SQS client from an AWS configuration; endpoint, when
// set, is an SQS-compatible server (the local emulator).
func NewClient(cfg aws.Config, endpoint string) *sqs.Client {
	return sqs.NewFromConfig(cfg, func(so *sqs.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// Sender sends messages to SQS queues.
type Sender struct {
	client *sqs.Client
}

// NewSender wraps a client.
func NewSender(client *sqs.Client) *Sender { return &Sender{client: client} }

// Send sends body to queueURL; groupID and dedupID are set for FIFO queues
// (pass "" for a standard queue).
func (s *Sender) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	in := &sqs.SendMessageInput{QueueUrl: &queueURL, MessageBody: &body}
	if groupID != "" {
		in.MessageGroupId = &groupID
	}
	if dedupID != "" {
		in.MessageDeduplicationId = &dedupID
	}
	metering.SQSRequest(ctx, queueURL)
	if _, err := s.client.SendMessage(ctx, in); err != nil {
		return fmt.Errorf("send to %s: %w", queueURL, err)
	}
	return nil
}

// ChangeVisibility makes a received message visible again after timeout
// (whole seconds, rounded up, at most 12 hours): a handler that failed it
// has it retried then instead of after the queue's visibility timeout.
func (s *Sender) ChangeVisibility(ctx context.Context, queueURL, receiptHandle string, timeout time.Duration) error {
	secs := int32(min(math.Ceil(timeout.Seconds()), 43200))
	_, err := s.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &queueURL, ReceiptHandle: &receiptHandle, VisibilityTimeout: secs,
	})
	if err != nil {
		return fmt.Errorf("change visibility on %s: %w", queueURL, err)
	}
	return nil
}

// Inspector reads queues without consuming them (queue.Inspector).
type Inspector struct {
	client *sqs.Client
	// Hold is how long a peek keeps the messages it has seen out of sight
	// while it reads on [5s]: every one is made visible again as soon as
	// the peek ends, or after Hold if that fails.
	Hold time.Duration
}

// NewInspector wraps a client.
func NewInspector(client *sqs.Client) *Inspector { return &Inspector{client: client} }

// Peek receives up to max messages of queueURL and makes each visible
// again at once (ChangeMessageVisibility to 0): nothing is deleted. The
// messages are hidden while the peek reads, so that each receive returns
// new ones; another reader of the queue misses them for that long.
func (in *Inspector) Peek(ctx context.Context, queueURL string, max int) ([]queue.Peeked, error) {
	hold := in.Hold
	if hold <= 0 {
		hold = 5 * time.Second
	}
	var out []queue.Peeked
	var handles []types.ChangeMessageVisibilityBatchRequestEntry
	seen := map[string]bool{}
	defer func() {
		// Visible again, ten at a time; a failure leaves them hidden for hold at most.
		for len(handles) > 0 {
			n := min(len(handles), 10)
			in.client.ChangeMessageVisibilityBatch(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityBatchInput{
				QueueUrl: &queueURL, Entries: handles[:n]})
			handles = handles[n:]
		}
	}()
	for len(out) < max {
		resp, err := in.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: &queueURL, MaxNumberOfMessages: int32(min(10, max-len(out))),
			VisibilityTimeout: int32(math.Ceil(hold.Seconds())), WaitTimeSeconds: 0,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return out, fmt.Errorf("peek at %s: %w", queueURL, err)
		}
		if len(resp.Messages) == 0 {
			break
		}
		fresh := 0
		for _, m := range resp.Messages {
			id := aws.ToString(m.MessageId)
			handles = append(handles, types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(fmt.Sprint(len(handles))), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0})
			if seen[id] {
				continue
			}
			seen[id] = true
			fresh++
			p := queue.Peeked{ID: id, Body: aws.ToString(m.Body),
				GroupID: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]}
			if ms, err := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil {
				p.SentAt = time.UnixMilli(ms)
			}
			p.Receives, _ = strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			out = append(out, p)
		}
		if fresh == 0 {
			break
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].SentAt.Before(out[j].SentAt) })
	return out, nil
}

// Depth is the approximate number of messages queueURL holds, visible,
// in flight or delayed.
func (in *Inspector) Depth(ctx context.Context, queueURL string) (int, error) {
	resp, err := in.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: &queueURL,
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		return 0, fmt.Errorf("depth of %s: %w", queueURL, err)
	}
	n := 0
	for _, v := range resp.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n, nil
}
