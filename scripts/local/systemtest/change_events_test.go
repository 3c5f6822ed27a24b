package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// Every applied chunk and every upload's outcome leaves as an event, right
// after its commit (the fast path), and the outbox empties.
func TestEventsPublishedRightAfterCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10, SweepEvery: time.Hour})
	p := e.Subscribe("probe")
	e.Onboard("r1")
	c := fixtures.Generate("p", 25)
	s1 := e.Upload("r1", c.CSV(nil))
	require.Equal(t, "applied", s1.State)
	s2 := e.Upload("r1", []byte("product_id,title\nsame,1\nsame,2\n"))
	require.Equal(t, "rejected", s2.State)

	got := p.WaitFor(30*time.Second, "3 chunks, applied and rejected", func(envs []message.Envelope) bool { return len(systemtest.ByID(envs)) == 5 })
	ids := systemtest.ByID(got)
	applied := ids[message.EventID(message.TypeSnapshotApplied, "r1", s1.Generation, 0)]
	require.Len(t, applied, 1)
	require.Equal(t, "applied", applied[0].Status.State)
	require.Equal(t, message.Chunks{Total: 3, Applied: 3}, applied[0].Status.Chunks)
	rejected := ids[message.EventID(message.TypeSnapshotRejected, "r1", s2.Generation, 0)]
	require.Len(t, rejected, 1)
	require.Equal(t, "duplicate_product_id", rejected[0].Status.Error.Code)
	count := 0
	for seq := range 3 {
		ch := ids[message.EventID(message.TypeChanges, "r1", s1.Generation, seq)]
		require.Len(t, ch, 1, "chunk %d", seq)
		require.Equal(t, keys.Chunk("r1", s1.Generation, seq), ch[0].Object)
		count += ch[0].Count
	}
	require.Equal(t, 25, count)
	e.WaitOutboxEmpty(10 * time.Second)
}

// failingPublisher fails the publishes fail says to fail: before publishing
// (the relay crashed between the commit and the publish) or after (between
// the publish and the delete).
type failingPublisher struct {
	next topic.Publisher
	mu   sync.Mutex
	fail func() (before, after bool)
}

func (f *failingPublisher) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	f.mu.Lock()
	before, after := f.fail()
	f.mu.Unlock()
	if before {
		return nil, errors.New("injected crash before publish")
	}
	errs, err := f.next.Publish(ctx, msgs)
	if err == nil && after {
		return nil, errors.New("injected crash after publish, before delete")
	}
	return errs, err
}

// The relay crashes between commit and publish (the sweeper publishes
// later) and between publish and delete (the event goes out twice, with
// one id): every event arrives, none is lost, and the analytics consumer
// ends equal to the catalog.
func TestRelayCrashesLoseNothing(t *testing.T) {
	t.Parallel()
	calls := 0
	e := newEnv(t, stack.Options{ChunkRows: 10, SweepEvery: 200 * time.Millisecond, SweepAge: 500 * time.Millisecond,
		WrapPublisher: func(next topic.Publisher) topic.Publisher {
			return &failingPublisher{next: next, fail: func() (bool, bool) {
				calls++
				return calls%3 == 1, calls%3 == 2
			}}
		}})
	p := e.Subscribe("probe")
	e.Onboard("r1")
	want := map[string]bool{}
	for i := range 3 {
		c := fixtures.Generate("p", 15+i*10)
		delete(c, fmt.Sprintf("p-%05d", i))
		s := e.Upload("r1", c.CSV(nil))
		require.Equal(t, "applied", s.State)
		want[message.EventID(message.TypeSnapshotApplied, "r1", s.Generation, 0)] = true
		for seq := range s.Chunks.Total {
			want[message.EventID(message.TypeChanges, "r1", s.Generation, seq)] = true
		}
	}
	p.WaitFor(30*time.Second, "every event", func(envs []message.Envelope) bool { return len(systemtest.ByID(envs)) == len(want) })
	e.WaitOutboxEmpty(10 * time.Second)
	got := p.Receive()
	for id := range systemtest.ByID(got) {
		require.True(t, want[id], "unexpected event %s", id)
	}
	require.Greater(t, len(got), len(want), "some events went out twice (a crash after the publish), under one id")
	e.RequireAnalytics("r1", e.Catalog("r1"), 30*time.Second)
}
