package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// holdingPublisher holds back the events of one retailer (the relay takes
// them as published) until release publishes them, newest generation first:
// the consumers see every generation's events after a newer one's.
type holdingPublisher struct {
	next     topic.Publisher
	retailer string
	mu       sync.Mutex
	holding  bool
	held     []topic.Message
}

func (p *holdingPublisher) Publish(ctx context.Context, msgs []topic.Message) ([]error, error) {
	errs := make([]error, len(msgs))
	var pass []topic.Message
	var at []int
	p.mu.Lock()
	for i, m := range msgs {
		if p.holding && m.Attributes[message.AttrRetailerID] == p.retailer {
			p.held = append(p.held, m)
			continue
		}
		pass, at = append(pass, m), append(at, i)
	}
	p.mu.Unlock()
	if len(pass) == 0 {
		return errs, nil
	}
	perrs, err := p.next.Publish(ctx, pass)
	if err != nil {
		return nil, err
	}
	for k, perr := range perrs {
		errs[at[k]] = perr
	}
	return errs, nil
}

// release publishes what was held, the newest generation's events first
// (each generation's in the order they were held), and holds no more.
func (p *holdingPublisher) release(ctx context.Context) (int, error) {
	p.mu.Lock()
	held := p.held
	p.holding, p.held = false, nil
	p.mu.Unlock()
	gen := func(m topic.Message) int64 {
		var env message.Envelope
		_ = json.Unmarshal([]byte(m.Body), &env)
		return env.Generation
	}
	slices.SortStableFunc(held, func(a, b topic.Message) int { return int(gen(b) - gen(a)) })
	for start := 0; start < len(held); start += topic.MaxBatch {
		batch := held[start:min(start+topic.MaxBatch, len(held))]
		errs, err := p.next.Publish(ctx, batch)
		if err != nil {
			return 0, err
		}
		for _, e := range errs {
			if e != nil {
				return 0, e
			}
		}
	}
	return len(held), nil
}

// Every generation's events reach the consumers only after a newer
// generation's (deletes and updates among them), and then the retailer's
// events are replayed twice: the analytics files still reconstruct the
// catalog, every event went out three times under one id and time, and the
// webhook got each generation's outcome once, under one id.
func TestOutOfOrderAndReplayedEvents(t *testing.T) {
	t.Parallel()
	hold := &holdingPublisher{retailer: "r1", holding: true}
	e := newEnv(t, stack.Options{ChunkRows: 10, SweepEvery: 200 * time.Millisecond, SweepAge: 300 * time.Millisecond,
		WrapPublisher: func(next topic.Publisher) topic.Publisher { hold.next = next; return hold }})
	ctx := context.Background()
	p := e.Subscribe("probe")
	e.Onboard("r1")
	rc := newHookReceiver(t, 0, false)
	e.setWebhook("r1", rc.srv.URL+"/hooks/catalog")
	start := time.Now()

	c := fixtures.Generate("p", 30)
	gens := map[int64]bool{}
	for i := range 3 {
		if i > 0 {
			for j := i; j < 30; j += 4 {
				if row := c[fmt.Sprintf("p-%05d", j)]; row != nil {
					row["price"] = fmt.Sprintf("%d.99", i)
				}
			}
			delete(c, fmt.Sprintf("p-%05d", 10*i))
			c[fmt.Sprintf("new-%d", i)] = fixtures.Row(fmt.Sprintf("added by upload %d", i))
		}
		s := e.Upload("r1", c.CSV(nil))
		require.Equal(t, "applied", s.State)
		gens[s.Generation] = true
	}
	e.WaitOutboxEmpty(10 * time.Second)
	require.Empty(t, p.Receive(), "every event of r1 is held back so far")
	n, err := hold.release(ctx)
	require.NoError(t, err)
	e.RequireAnalytics("r1", e.Catalog("r1"), 30*time.Second)

	for range 2 {
		r, err := e.API.Replay(ctx, e.Stack.AdminToken, "r1", start.Add(-time.Second))
		require.NoError(t, err)
		require.Equal(t, 3, r.Lifecycle)
		require.Equal(t, n-3, r.Changes, "every chunk with changes")
		e.WaitOutboxEmpty(30 * time.Second)
	}
	got := p.WaitFor(30*time.Second, "every event three times", func(envs []message.Envelope) bool { return len(envs) >= 3*n })
	e.WaitDrained(e.Stack.AnalyticsQueue)
	e.WaitDrained(e.Stack.WebhooksQueue)
	e.RequireAnalytics("r1", e.Catalog("r1"), 30*time.Second)

	byID := systemtest.ByID(got)
	require.Len(t, byID, n)
	for id, envs := range byID {
		require.Len(t, envs, 3, id)
		for _, env := range envs[1:] {
			require.True(t, env.Time.Equal(envs[0].Time), "%s keeps its time", id)
			require.Equal(t, envs[0].Object, env.Object, "%s refers to the same change object", id)
			require.Equal(t, envs[0].SHA256, env.SHA256, id)
		}
	}
	deliveries, envs := rc.snapshot()
	require.Len(t, deliveries, 3, "one outcome per generation")
	perGeneration := map[int64]string{}
	for id, d := range deliveries {
		require.Equal(t, []bool{true}, d, "%s: delivered once, signed; the replays sent nothing", id)
		gen := envs[id].Generation
		require.True(t, gens[gen])
		require.Empty(t, perGeneration[gen], "generation %d's outcome under two ids", gen)
		perGeneration[gen] = id
		require.Equal(t, message.EventID(message.TypeSnapshotApplied, "r1", gen, 0), id)
	}
}
