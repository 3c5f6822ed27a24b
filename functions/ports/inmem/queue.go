package inmem

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// Message is one message a Queue holds.
type Message struct {
	QueueURL, Body, GroupID, DedupID string
	SentAt                           time.Time
}

// Queue is a queue.Sender that keeps what it is sent, per queue URL, in
// order. A queue whose URL ends in ".fifo" behaves as an SQS FIFO queue: a
// message needs a group id, and a repeat of a deduplication id already sent
// to that queue is dropped (SQS drops it within five minutes; here, for the
// life of the Queue).
type Queue struct {
	mu     sync.Mutex
	queues map[string][]Message
	dedup  map[string]bool // queueURL + "\x00" + dedupID
	sent   int
}

// NewQueue returns an empty queue set.
func NewQueue() *Queue { return &Queue{} }

// Send keeps body on queueURL.
func (q *Queue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if queueURL == "" {
		return errors.New("send: no queue URL")
	}
	fifo := strings.HasSuffix(queueURL, ".fifo")
	if fifo && groupID == "" {
		return fmt.Errorf("send to %s: a FIFO queue needs a message group id", queueURL)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sent++
	if fifo && dedupID != "" {
		if q.dedup == nil {
			q.dedup = map[string]bool{}
		}
		k := queueURL + "\x00" + dedupID
		if q.dedup[k] {
			return nil
		}
		q.dedup[k] = true
	}
	if q.queues == nil {
		q.queues = map[string][]Message{}
	}
	q.queues[queueURL] = append(q.queues[queueURL], Message{QueueURL: queueURL, Body: body, GroupID: groupID, DedupID: dedupID, SentAt: time.Now()})
	return nil
}

// Sent counts the calls to Send that succeeded, duplicates included.
func (q *Queue) Sent() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sent
}

// Messages returns the messages queueURL holds, oldest first.
func (q *Queue) Messages(queueURL string) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]Message(nil), q.queues[queueURL]...)
}

// Take removes and returns the messages of queueURL, oldest first.
func (q *Queue) Take(queueURL string) []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.queues[queueURL]
	delete(q.queues, queueURL)
	return out
}

// TakeAll removes and returns the messages of every queue, each queue's
// oldest first, queues in no particular order.
func (q *Queue) TakeAll() []Message {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []Message
	for _, msgs := range q.queues {
		out = append(out, msgs...)
	}
	q.queues = nil
	return out
}

// Peek returns up to max messages of queueURL, oldest first, and keeps
// them (queue.Inspector).
func (q *Queue) Peek(ctx context.Context, queueURL string, max int) ([]queue.Peeked, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []queue.Peeked
	for i, m := range q.queues[queueURL] {
		if len(out) >= max {
			break
		}
		out = append(out, queue.Peeked{ID: fmt.Sprintf("%s#%d", queueURL, i), Body: m.Body, GroupID: m.GroupID, SentAt: m.SentAt, Receives: 1})
	}
	return out, nil
}

// Depth is the number of messages queueURL holds.
func (q *Queue) Depth(ctx context.Context, queueURL string) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queues[queueURL]), nil
}
