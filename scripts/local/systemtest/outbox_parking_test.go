package systemtest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/platform/logging"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// refusingPublisher refuses, for what they are (as SNS refuses an invalid
// message), the events of one retailer while refusing is set, and
// publishes the others.
type refusingPublisher struct {
	next     topic.Publisher
	retailer string
	refusing *atomic.Bool
}

func (p refusingPublisher) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	var pass []topic.Message
	var at []int
	for i, m := range msgs {
		if p.refusing.Load() && m.Attributes[message.AttrRetailerID] == p.retailer {
			errs[i] = fmt.Errorf("sns refused the message: InvalidParameter: injected for %s: %w", p.retailer, topic.ErrRefused)
			continue
		}
		pass = append(pass, m)
		at = append(at, i)
	}
	if len(pass) == 0 {
		return errs, nil
	}
	perrs, err := p.next.Publish(ctx, pass)
	if err != nil {
		return nil, err
	}
	for k, e := range perrs {
		errs[at[k]] = e
	}
	return errs, nil
}

// eventIDs are the ids of a generation's events: its chunks' and its outcome's.
func eventIDs(retailer string, s interface{ Chunked() (int64, int) }) map[string]bool {
	gen, chunks := s.Chunked()
	ids := map[string]bool{message.EventID(message.TypeSnapshotApplied, retailer, gen, 0): true}
	for seq := range chunks {
		ids[message.EventID(message.TypeChanges, retailer, gen, seq)] = true
	}
	return ids
}

// countOf counts the envelopes whose id is in ids, once each.
func countOf(envs []message.Envelope, ids map[string]bool) int {
	n := 0
	for id := range systemtest.ByID(envs) {
		if ids[id] {
			n++
		}
	}
	return n
}

// 60 events SNS refuses (one retailer's: 59 chunks and the upload's
// outcome), written before another retailer's on the same shard, with
// every event left to the sweeper (no fast path): the other retailer's
// events reach the topic within a few of the sweeper's periods, the 60
// end parked (counted by OutboxParked, listed by the ops route), and once
// SNS takes them again `dlq redrive outbox` publishes them and the outbox
// empties. Before claim, publish, settle, the sweeper took the 50 oldest
// rows, all failed, and it stopped there: nothing behind them ever left.
func TestOutboxPoisonDoesNotStallTheShard(t *testing.T) {
	t.Parallel()
	var refusing atomic.Bool
	refusing.Store(true)
	var lines metricstest.Capture
	const sweepEvery = time.Second
	e := newEnv(t, stack.Options{Shards: 1, ChunkRows: 5, NoFastPath: true,
		SweepEvery: sweepEvery, SweepAge: 500 * time.Millisecond, Metrics: logging.NewSyncWriter(&lines),
		WrapPublisher: func(next topic.Publisher) topic.Publisher {
			return refusingPublisher{next: next, retailer: "poison", refusing: &refusing}
		}})
	ctx := context.Background()
	p := e.Subscribe("probe")
	e.Onboard("poison")
	e.Onboard("good")

	bad := e.Upload("poison", fixtures.Generate("p", 59*5).CSV(nil))
	require.Equal(t, "applied", bad.State)
	require.Equal(t, 59, bad.Chunks.Total)
	poisonIDs := eventIDs("poison", chunked{bad.Generation, bad.Chunks.Total})
	require.Len(t, poisonIDs, 60)
	good := e.Upload("good", fixtures.Generate("g", 12).CSV(nil))
	require.Equal(t, "applied", good.State)
	goodIDs := eventIDs("good", chunked{good.Generation, good.Chunks.Total})
	applied := time.Now()

	got := p.WaitFor(10*sweepEvery, "the good retailer's events, past the refused ones",
		func(envs []message.Envelope) bool { return countOf(envs, goodIDs) == len(goodIDs) })
	t.Logf("the good retailer's %d events arrived %s after its upload was applied", len(goodIDs), time.Since(applied))
	require.Zero(t, countOf(got, poisonIDs), "SNS refused every poison event")

	// Parked: counted, listed by the ops route, the metric's gauge.
	var parked int64
	require.Eventually(t, func() bool {
		list, err := e.API.ParkedOutbox(ctx, e.Stack.AdminToken, "", 100)
		parked = list.Parked
		return err == nil && list.Parked == 60
	}, 30*time.Second, 100*time.Millisecond, "the 60 refused events parked (%d so far)", parked)
	list, err := e.API.ParkedOutbox(ctx, e.Stack.AdminToken, "poison", 100)
	require.NoError(t, err)
	require.Len(t, list.Events, 60)
	for _, ev := range list.Events {
		require.True(t, poisonIDs[ev.EventID], ev.EventID)
		require.Equal(t, 1, ev.Attempts, "refused for what it is: parked at its first failure")
		require.Contains(t, ev.LastError, "InvalidParameter")
	}
	require.Eventually(t, func() bool {
		var last float64 = -1
		for _, l := range lines.Lines() {
			if v, ok := l[metrics.OutboxParked].(float64); ok {
				last = v
			}
		}
		return last == 60
	}, 10*sweepEvery, 100*time.Millisecond, "the sweeper's OutboxParked gauge says 60")
	require.NoError(t, lines.Validate())

	// The cause fixed, the redrive publishes them under their ids.
	refusing.Store(false)
	moved, err := e.API.RedriveOutbox(ctx, e.Stack.AdminToken, "", 0)
	require.NoError(t, err)
	require.Equal(t, 60, moved.Moved)
	require.Zero(t, moved.Left)
	e.WaitOutboxEmpty(30 * time.Second)
	p.WaitFor(30*time.Second, "every poison event, redriven",
		func(envs []message.Envelope) bool { return countOf(envs, poisonIDs) == len(poisonIDs) })
	list, err = e.API.ParkedOutbox(ctx, e.Stack.AdminToken, "", 100)
	require.NoError(t, err)
	require.Zero(t, list.Parked)
}

// chunked is a generation and its chunk count.
type chunked struct {
	gen    int64
	chunks int
}

func (c chunked) Chunked() (int64, int) { return c.gen, c.chunks }
