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

	"github.com/retailcatalog/catalog/functions/ports/queue"
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
	// Inspector reads the same queues without consuming them.
	Inspector queue.Inspector
	// Redriver moves messages from the dead-letter queues below back to
	// StandardURL and FIFOURL (nil: the redrive test is skipped).
	Redriver                   queue.Redriver
	StandardDLQURL, FIFODLQURL string
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
		{"PeekLeavesMessages", testPeek},
		{"RedriveMovesMessagesBack", testRedrive},
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

// Peeking shows what a queue holds, with its groups and send times, and
// leaves every message there for the next receiver. (A FIFO queue may show
// only the first message of each group: the messages here have a group each.)
func testPeek(t *testing.T, h Harness) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := time.Now().Add(-time.Minute)
	for i := range 3 {
		send(t, h, h.StandardURL, fmt.Sprintf("s%d", i), "", "")
		send(t, h, h.FIFOURL, fmt.Sprintf("f%d", i), fmt.Sprintf("g%d", i), fmt.Sprintf("d%d", i))
	}
	for _, url := range []string{h.StandardURL, h.FIFOURL} {
		peeked, err := h.Inspector.Peek(ctx, url, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(peeked) != 3 {
			t.Fatalf("peeked %d messages of %s, want 3", len(peeked), url)
		}
		ids := map[string]bool{}
		for _, p := range peeked {
			ids[p.ID] = true
			if p.SentAt.Before(before) || p.SentAt.After(time.Now().Add(time.Minute)) {
				t.Fatalf("message %q sent at %s", p.Body, p.SentAt)
			}
			if url == h.FIFOURL && p.GroupID == "" {
				t.Fatalf("message %q of a FIFO queue without its group", p.Body)
			}
		}
		if len(ids) != 3 {
			t.Fatalf("peeked ids %v: want 3 distinct", ids)
		}
		if limited, err := h.Inspector.Peek(ctx, url, 2); err != nil || len(limited) != 2 {
			t.Fatalf("peek of at most 2: %d messages, %v", len(limited), err)
		}
		depth, err := h.Inspector.Depth(ctx, url)
		if err != nil || depth != 3 {
			t.Fatalf("depth of %s: %d, %v; want 3", url, depth, err)
		}
		if got := h.Receive(t, url, 3); len(got) != 3 {
			t.Fatalf("after peeking, received %v from %s: want all 3", bodies(got), url)
		}
	}
}

// Redriving moves a dead-letter queue's messages back to their work queue,
// with their groups, up to the number asked for; a FIFO message is
// delivered again although the work queue has seen its deduplication id
// (its first send, which then failed); the dead-letter queue ends empty.
func testRedrive(t *testing.T, h Harness) {
	if h.Redriver == nil {
		t.Skip("this queue has no Redriver")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	send(t, h, h.FIFOURL, "chunk 0", "r1#0", "r1:1:0")
	if got := h.Receive(t, h.FIFOURL, 1); len(got) != 1 {
		t.Fatalf("received %v, want the first send", bodies(got))
	}
	send(t, h, h.FIFODLQURL, "chunk 0", "r1#0", "r1:1:0")
	send(t, h, h.FIFODLQURL, "chunk 1", "r1#1", "r1:1:1")
	for i := range 3 {
		send(t, h, h.StandardDLQURL, fmt.Sprintf("s%d", i), "", "")
	}
	moved, err := h.Redriver.Redrive(ctx, h.FIFODLQURL, h.FIFOURL, 100)
	if err != nil || moved != 2 {
		t.Fatalf("redrive of the FIFO dead-letter queue: moved %d, %v; want 2", moved, err)
	}
	got := h.Receive(t, h.FIFOURL, 2)
	groups := map[string]string{}
	for _, m := range got {
		groups[m.Body] = m.GroupID
	}
	if fmt.Sprint(groups) != "map[chunk 0:r1#0 chunk 1:r1#1]" {
		t.Fatalf("after the redrive the FIFO queue delivered %v (body: group), want both chunks in their groups", groups)
	}
	if moved, err := h.Redriver.Redrive(ctx, h.StandardDLQURL, h.StandardURL, 2); err != nil || moved != 2 {
		t.Fatalf("redrive of at most 2: moved %d, %v", moved, err)
	}
	if moved, err := h.Redriver.Redrive(ctx, h.StandardDLQURL, h.StandardURL, 100); err != nil || moved != 1 {
		t.Fatalf("redrive of the rest: moved %d, %v; want 1", moved, err)
	}
	if moved, err := h.Redriver.Redrive(ctx, h.StandardDLQURL, h.StandardURL, 100); err != nil || moved != 0 {
		t.Fatalf("redrive of an empty dead-letter queue: moved %d, %v", moved, err)
	}
	std := bodies(h.Receive(t, h.StandardURL, 3))
	sort.Strings(std)
	if fmt.Sprint(std) != "[s0 s1 s2]" {
		t.Fatalf("after the redrive the standard queue delivered %v, want s0 s1 s2", std)
	}
	for _, dlq := range []string{h.StandardDLQURL, h.FIFODLQURL} {
		if depth, err := h.Inspector.Depth(ctx, dlq); err != nil || depth != 0 {
			t.Fatalf("depth of %s after the redrive: %d, %v; want 0", dlq, depth, err)
		}
	}
}
