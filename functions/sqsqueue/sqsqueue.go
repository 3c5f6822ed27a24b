// Package sqsqueue is the queue adapter over Amazon SQS (or the local
// SQS-compatible emulator): it sends chunk messages and diff jobs to FIFO
// queues, and brings a failed message back sooner than its visibility timeout.
package sqsqueue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/retailcatalog/catalog/functions/metering"
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
