// Package topictest is the contract of a topic: one suite that every
// topic.Publisher (snstopic.Publisher on the emulator's SNS, inmem.Topic)
// must pass, so that what the relay assumes of one holds of the other.
package topictest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/ports/topic"
)

// Harness is one test's topic: a publisher, and a way to take back what
// a subscriber of the topic received (with raw message delivery).
type Harness struct {
	Publisher topic.Publisher
	// Receive removes and returns what the subscriber received, in any
	// order, waiting (briefly) until there are at least want messages.
	Receive func(t *testing.T, want int) []topic.Message
}

// Run runs the suite; newHarness makes a fresh topic and subscriber for one test.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"DeliversBodyAndAttributes", testDelivers},
		{"BatchOfTen", testBatch},
		{"RefusesMoreThanABatch", testTooMany},
		{"RefusesOversizedMessageAlone", testOversized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newHarness(t))
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func publish(t *testing.T, h Harness, msgs ...topic.Message) []error {
	t.Helper()
	errs, err := h.Publisher.Publish(ctx(t), msgs)
	if err != nil {
		t.Fatalf("publish %d messages: %v", len(msgs), err)
	}
	if len(errs) != len(msgs) {
		t.Fatalf("publish %d messages: %d results", len(msgs), len(errs))
	}
	return errs
}

// A subscriber gets the body byte for byte and the attributes.
func testDelivers(t *testing.T, h Harness) {
	body := `{"id":"r1:1:applied","type":"catalog.snapshot.applied","note":"ü \u0000 <&>"}`
	errs := publish(t, h, topic.Message{Body: body, Attributes: map[string]string{"type": "catalog.snapshot.applied", "retailer_id": "r1"}})
	if errs[0] != nil {
		t.Fatalf("message refused: %v", errs[0])
	}
	got := h.Receive(t, 1)
	if len(got) != 1 || got[0].Body != body {
		t.Fatalf("received %+v, want exactly the body %q", got, body)
	}
	if got[0].Attributes["type"] != "catalog.snapshot.applied" || got[0].Attributes["retailer_id"] != "r1" {
		t.Fatalf("received attributes %v, want type and retailer_id", got[0].Attributes)
	}
}

// Ten messages in one call all arrive.
func testBatch(t *testing.T, h Harness) {
	var msgs []topic.Message
	for i := range topic.MaxBatch {
		msgs = append(msgs, topic.Message{Body: fmt.Sprintf(`{"n":%d}`, i)})
	}
	for i, err := range publish(t, h, msgs...) {
		if err != nil {
			t.Fatalf("message %d refused: %v", i, err)
		}
	}
	got := h.Receive(t, topic.MaxBatch)
	var bodies []string
	for _, m := range got {
		bodies = append(bodies, m.Body)
	}
	sort.Strings(bodies)
	if len(bodies) != topic.MaxBatch || bodies[0] != `{"n":0}` || bodies[9] != `{"n":9}` {
		t.Fatalf("received %v, want the ten messages once each", bodies)
	}
}

// More than MaxBatch messages in one call is the caller's error.
func testTooMany(t *testing.T, h Harness) {
	msgs := make([]topic.Message, topic.MaxBatch+1)
	for i := range msgs {
		msgs[i] = topic.Message{Body: "{}"}
	}
	if _, err := h.Publisher.Publish(ctx(t), msgs); err == nil {
		t.Fatal("a batch of 11 messages was accepted")
	}
}

// A message over the topic's size limit (256 KiB) is refused alone, as a
// message at fault (topic.ErrRefused: the relay parks it); the others of
// its batch are published.
func testOversized(t *testing.T, h Harness) {
	big := `{"x":"` + strings.Repeat("a", 256<<10) + `"}`
	errs := publish(t, h, topic.Message{Body: `{"n":1}`}, topic.Message{Body: big}, topic.Message{Body: `{"n":2}`})
	if errs[0] != nil || errs[2] != nil || errs[1] == nil {
		t.Fatalf("results %v, want only the oversized message refused", errs)
	}
	if !errors.Is(errs[1], topic.ErrRefused) {
		t.Fatalf("the oversized message's error %v does not say it is refused for what it is (topic.ErrRefused)", errs[1])
	}
	got := h.Receive(t, 2)
	if len(got) != 2 {
		t.Fatalf("received %d messages, want the two small ones", len(got))
	}
}
