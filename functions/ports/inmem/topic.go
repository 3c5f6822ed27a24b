package inmem

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/retailcatalog/catalog/functions/ports/topic"
)

// TopicMaxMessageBytes is the size limit of one message, SNS's.
const TopicMaxMessageBytes = 256 << 10

// Topic is a topic.Publisher that keeps what it is published, in order, for
// one subscriber with raw message delivery. Fail, when set, is asked before
// each message is kept: a non-nil error refuses that message (fault
// injection for the relay's tests).
type Topic struct {
	Fail func(m topic.Message) error

	mu        sync.Mutex
	msgs      []topic.Message
	published int
}

// NewTopic returns an empty topic.
func NewTopic() *Topic { return &Topic{} }

// Publish keeps each message under the size limit.
func (t *Topic) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(msgs) > topic.MaxBatch {
		return nil, fmt.Errorf("publish: %d messages, at most %d a call", len(msgs), topic.MaxBatch)
	}
	errs := make([]error, len(msgs))
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, m := range msgs {
		if len(m.Body) > TopicMaxMessageBytes {
			errs[i] = fmt.Errorf("message of %d bytes is over the limit of %d: %w", len(m.Body), TopicMaxMessageBytes, topic.ErrRefused)
			continue
		}
		if t.Fail != nil {
			if errs[i] = t.Fail(m); errs[i] != nil {
				continue
			}
		}
		t.msgs = append(t.msgs, topic.Message{Body: m.Body, Attributes: maps.Clone(m.Attributes)})
		t.published++
	}
	return errs, nil
}

// Published counts the messages accepted, duplicates included.
func (t *Topic) Published() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.published
}

// Take removes and returns what was published, oldest first.
func (t *Topic) Take() []topic.Message {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.msgs
	t.msgs = nil
	return out
}
