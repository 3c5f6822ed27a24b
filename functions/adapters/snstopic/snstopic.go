// Package snstopic is the topic adapter over Amazon SNS (or the local
// emulator's SNS): it publishes change events to the change-events topic
// with PublishBatch, ten messages a call.
package snstopic

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/retailcatalog/catalog/functions/ports/topic"
)

// MaxMessageBytes is SNS's limit on one message, and on the sum of the
// messages of one PublishBatch call (body and attributes together).
const MaxMessageBytes = 256 << 10

// NewClient builds an SNS client from an AWS configuration; endpoint, when
// set, is an SNS-compatible server (the local emulator).
func NewClient(cfg aws.Config, endpoint string) *sns.Client {
	return sns.NewFromConfig(cfg, func(so *sns.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// Publisher publishes to one SNS topic.
type Publisher struct {
	client   *sns.Client
	topicARN string
}

// New wraps a client and the topic's ARN.
func New(client *sns.Client, topicARN string) *Publisher {
	return &Publisher{client: client, topicARN: topicARN}
}

// TopicARN is the topic published to.
func (p *Publisher) TopicARN() string { return p.topicARN }

// Publish publishes msgs with as few PublishBatch calls as SNS's limits
// allow (ten messages and 256 KiB a call). A message over 256 KiB is refused
// without a call; it and those SNS fails as the sender's fault wrap
// topic.ErrRefused.
func (p *Publisher) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	if len(msgs) > topic.MaxBatch {
		return nil, fmt.Errorf("publish: %d messages, at most %d a call", len(msgs), topic.MaxBatch)
	}
	errs := make([]error, len(msgs))
	var batch []int
	var batchBytes int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := p.publishBatch(ctx, msgs, batch, errs)
		batch, batchBytes = batch[:0], 0
		return err
	}
	for i, m := range msgs {
		size := messageBytes(m)
		if size > MaxMessageBytes {
			errs[i] = fmt.Errorf("message of %d bytes is over SNS's limit of %d: %w", size, MaxMessageBytes, topic.ErrRefused)
			continue
		}
		if batchBytes+size > MaxMessageBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
		batch = append(batch, i)
		batchBytes += size
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return errs, nil
}

// messageBytes is what SNS counts of a message: its body and its attributes'
// names, types and values.
func messageBytes(m topic.Message) int {
	n := len(m.Body)
	for k, v := range m.Attributes {
		n += len(k) + len("String") + len(v)
	}
	return n
}

func (p *Publisher) publishBatch(ctx context.Context, msgs []topic.Message, batch []int, errs []error) error {
	entries := make([]types.PublishBatchRequestEntry, len(batch))
	for k, i := range batch {
		e := types.PublishBatchRequestEntry{Id: aws.String("m" + strconv.Itoa(i)), Message: aws.String(msgs[i].Body)}
		if len(msgs[i].Attributes) > 0 {
			e.MessageAttributes = make(map[string]types.MessageAttributeValue, len(msgs[i].Attributes))
			for name, v := range msgs[i].Attributes {
				e.MessageAttributes[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
		}
		entries[k] = e
	}
	out, err := p.client.PublishBatch(ctx, &sns.PublishBatchInput{TopicArn: aws.String(p.topicARN), PublishBatchRequestEntries: entries})
	if err != nil {
		return fmt.Errorf("publish %d messages to %s: %w", len(batch), p.topicARN, err)
	}
	ok := make(map[string]bool, len(out.Successful))
	for _, s := range out.Successful {
		ok[aws.ToString(s.Id)] = true
	}
	failed := make(map[string]types.BatchResultErrorEntry, len(out.Failed))
	for _, f := range out.Failed {
		failed[aws.ToString(f.Id)] = f
	}
	for _, i := range batch {
		id := "m" + strconv.Itoa(i)
		switch f, isFailed := failed[id]; {
		case ok[id]:
		case isFailed && f.SenderFault:
			// The message is at fault (InvalidParameter, ...): it fails again.
			errs[i] = fmt.Errorf("sns refused the message: %s: %s: %w", aws.ToString(f.Code), aws.ToString(f.Message), topic.ErrRefused)
		case isFailed:
			errs[i] = fmt.Errorf("sns refused the message: %s: %s", aws.ToString(f.Code), aws.ToString(f.Message))
		default:
			errs[i] = errors.New("sns answered neither success nor failure for the message")
		}
	}
	return nil
}
