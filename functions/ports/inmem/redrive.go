package inmem

import (
	"context"
	"crypto/rand"
	"fmt"
)

// Redrive moves up to max messages from dlqURL to queueURL, oldest first
// (queue.Redriver). A FIFO message keeps its group and gets a deduplication
// id of its own, so that the move is never dropped as a repeat of its first
// send (nor a second redrive of it as a repeat of the first).
func (q *Queue) Redrive(ctx context.Context, dlqURL, queueURL string, max int) (int, error) {
	q.mu.Lock()
	msgs := q.queues[dlqURL]
	n := min(max, len(msgs))
	moving := append([]Message(nil), msgs[:n]...)
	q.queues[dlqURL] = msgs[n:]
	q.mu.Unlock()
	for i, m := range moving {
		dedup := m.DedupID
		if dedup != "" {
			dedup = fmt.Sprintf("%s:redrive:%s", dedup, rand.Text())
		}
		if err := q.Send(ctx, queueURL, m.Body, m.GroupID, dedup); err != nil {
			// The messages not moved go back to the front of the dead-letter queue.
			q.mu.Lock()
			q.queues[dlqURL] = append(moving[i:len(moving):len(moving)], q.queues[dlqURL]...)
			q.mu.Unlock()
			return i, err
		}
	}
	return n, nil
}
