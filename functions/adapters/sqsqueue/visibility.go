package sqsqueue

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// Visibility changes the visibility timeout of received messages: how a
// consumer delays the next delivery of a message it failed.
type Visibility struct {
	client *sqs.Client
}

// NewVisibility wraps a client.
func NewVisibility(client *sqs.Client) *Visibility { return &Visibility{client: client} }

// Delay makes the message visible again after d (whole seconds, rounded
// up, at most 12 h).
func (v *Visibility) Delay(ctx context.Context, queueURL, receiptHandle string, d time.Duration) error {
	secs := int32(min(math.Ceil(d.Seconds()), 43200))
	_, err := v.client.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String(receiptHandle), VisibilityTimeout: secs,
	})
	if err != nil {
		return fmt.Errorf("delay message on %s by %s: %w", queueURL, d, err)
	}
	return nil
}
