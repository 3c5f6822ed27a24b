// Package queuetest is the contract of a queue: one suite that every
// queue.Sender (sqsqueue.Sender on the SQS emulator, inmem.Queue) must
// pass, so that what the diff and upload handlers assume of one holds of
// the other.
package queuetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/queue"
)

// Harness is one test's queues: a standard queue and a FIFO queue of their
// own, and a way to take back what was sent to them.
type Harness struct {
	Sender      queue.Sender
	StandardURL string
	FIFOURL     string
	// Receive removes and returns the messages on queueURL, in delivery
	// order, waiting (briefly) until there are at least want.
	Receive func(t *testing.T, queueURL string, want int) []Message
}

// Message is a message taken off a queue.
type Message struct {
	Body, GroupID string
}

// Run runs the suite; newHarness makes fresh queues for one test.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"StandardQueueDelivers", testStandard},
		{"FIFOKeepsOrderWithinGroup", testFIFOOrder},
		{"FIFODropsRepeatedDeduplicationID", testFIFODedup},
		{"FIFONeedsGroup", testFIFONeedsGroup},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newHarness(t))
		})
	}
}

func send(t *testing.T, h Harness, url, body, group, dedup string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Sender.Send(ctx, url, body, group, dedup); err != nil {
		t.Fatalf("send %q to %s: %v", body, url, err)
	}
}

func bodies(msgs []Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Body
	}
	return out
}

// A standard queue delivers every message sent (in any order).
func testStandard(t *testing.T, h Harness) {
	send(t, h, h.StandardURL, `{"n":1}`, "", "")
	send(t, h, h.StandardURL, `{"n":2}`, "", "")
	got := bodies(h.Receive(t, h.StandardURL, 2))
	sort.Strings(got)
	if fmt.Sprint(got) != `[{"n":1} {"n":2}]` {
		t.Fatalf("received %v, want both messages", got)
	}
}

// A FIFO queue delivers the messages of one group in the order sent, with their group.
func testFIFOOrder(t *testing.T, h Harness) {
	for i := range 3 {
		send(t, h, h.FIFOURL, fmt.Sprintf("chunk %d", i), "r1#0", fmt.Sprintf("r1:1:%d", i))
	}
	got := h.Receive(t, h.FIFOURL, 3)
	if fmt.Sprint(bodies(got)) != "[chunk 0 chunk 1 chunk 2]" {
		t.Fatalf("received %v, want chunks 0, 1, 2 in order", bodies(got))
	}
	for _, m := range got {
		if m.GroupID != "r1#0" {
			t.Fatalf("message %q has group %q, want r1#0", m.Body, m.GroupID)
		}
	}
}

// A FIFO queue drops a message whose deduplication id it has seen (a chunk
// re-sent by a diff that ran twice is delivered once).
func testFIFODedup(t *testing.T, h Harness) {
	send(t, h, h.FIFOURL, "first", "g", "r1:1:0")
	send(t, h, h.FIFOURL, "repeat", "g", "r1:1:0")
	send(t, h, h.FIFOURL, "next", "g", "r1:1:1")
	got := bodies(h.Receive(t, h.FIFOURL, 2))
	if fmt.Sprint(got) != "[first next]" {
		t.Fatalf("received %v, want [first next]: the repeat dropped", got)
	}
}

// A FIFO queue refuses a message without a group.
func testFIFONeedsGroup(t *testing.T, h Harness) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Sender.Send(ctx, h.FIFOURL, "x", "", "d"); err == nil {
		t.Fatal("a FIFO message without a group was accepted")
	}
}
