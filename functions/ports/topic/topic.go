// Package topic is the publish boundary: the one interface the relay
// publishes change events through, whatever is behind it (the SNS adapter
// snstopic, or the in-memory one of package inmem). It imports no AWS
// package. The contract every implementation keeps is the suite in
// topictest.
package topic

import (
	"context"
	"errors"
)

// MaxBatch is the most messages one Publish call takes (SNS PublishBatch's
// limit).
const MaxBatch = 10

// Message is one message to publish: a body and string attributes that
// subscriptions can filter on.
type Message struct {
	Body       string
	Attributes map[string]string
}

// ErrRefused marks a message the topic refused for what it is (too large,
// invalid): publishing it again fails the same way. Other errors of a
// message may pass (throttling, a fault of the topic's side).
var ErrRefused = errors.New("refused by the topic")

// Publisher publishes messages to the change-events topic.
type Publisher interface {
	// Publish publishes up to MaxBatch messages. It returns one error per
	// message, nil for each the topic accepted (it will reach every
	// subscriber); a message with an error may or may not have been
	// published and is safe to publish again; the error wraps ErrRefused
	// when the message itself is at fault. A non-nil error of its own
	// means none may be taken as accepted.
	Publish(ctx context.Context, msgs []Message) ([]error, error)
}
