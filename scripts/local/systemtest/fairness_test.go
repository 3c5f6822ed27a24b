package systemtest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// I9: one apply queue shared by a 200,000-row retailer (200 chunks of 1,000
// rows) and 50 small ones (a chunk each), the big one's chunks all queued
// first, the worst order for the small ones. At most 20 of the big one's chunks are in
// flight at any time, and every small upload is applied while the big one
// is still applying, within smallBound of the chunks' release.
func TestI9Fairness(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	t.Parallel()
	const bigChunks, smalls, smallBound = 200, 50, time.Minute
	var mu sync.Mutex
	inflight, maxInflight := map[string]int{}, map[string]int{}
	gate := &systemtest.HeldQueue{Hold: func(message.ChunkMessage) bool { return true }}
	e := newEnv(t, stack.Options{
		// Everything on apply-small; more workers than a retailer's 20 FIFO groups.
		ChunkRows: 1000, LargeThreshold: 1 << 30, ApplyConcurrency: 32, DiffConcurrency: 4,
		HandlerTimeout: 60 * time.Second, VisibilityTimeout: 70 * time.Second,
		WrapDiffQueue: gate.Wrap,
		ApplyObserve: func(m message.ChunkMessage, start bool) {
			mu.Lock()
			defer mu.Unlock()
			if start {
				inflight[m.RetailerID]++
				maxInflight[m.RetailerID] = max(maxInflight[m.RetailerID], inflight[m.RetailerID])
			} else {
				inflight[m.RetailerID]--
			}
		},
	})
	ctx := systemtest.Context(t, 5*time.Minute)

	// The big retailer's diff runs; its chunk messages are held back.
	e.Onboard("big")
	big := fixtures.Generate("b", 200000)
	bigGen, err := e.API.Upload(ctx, e.Token("big"), "big", "csv", big.CSV(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return gate.Len() == bigChunks }, 2*time.Minute, 20*time.Millisecond, "the big diff's chunks")

	// Then the small ones', also held back.
	small := map[string]fixtures.Catalog{}
	gens := map[string]int64{}
	for i := range smalls {
		id := fmt.Sprintf("small%02d", i)
		e.Onboard(id)
		small[id] = fixtures.Generate(id, 100)
		gens[id], err = e.API.Upload(ctx, e.Token(id), id, "", small[id].CSV(nil))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return gate.Len() == bigChunks+smalls }, 2*time.Minute, 20*time.Millisecond, "the small diffs' chunks")

	// Release: the big one's chunks reach the queue first, then the small ones'.
	gate.Hold = nil
	released := time.Now()
	require.NoError(t, gate.Release(ctx))

	var slowest time.Duration
	appliedAt := map[string]time.Time{}
	for id, gen := range gens {
		s := e.Wait(id, gen)
		require.Equal(t, "applied", s.State, id)
		took := s.AppliedAt.Sub(released)
		slowest = max(slowest, took)
		require.Less(t, took, smallBound, "%s applied %s after the release", id, took)
		appliedAt[id] = *s.AppliedAt
	}
	b := e.Wait("big", bigGen)
	require.Equal(t, "applied", b.State)
	require.Equal(t, bigChunks, b.Chunks.Total)
	t.Logf("big retailer: applied %s after the release, at most %d chunks in flight; small ones: the slowest applied after %s",
		b.AppliedAt.Sub(released).Round(time.Millisecond), maxInflight["big"], slowest.Round(time.Millisecond))
	for id, at := range appliedAt {
		require.True(t, at.Before(*b.AppliedAt), "%s applied at %s, after the big one (%s): starved", id, at, b.AppliedAt)
	}
	mu.Lock()
	require.LessOrEqual(t, maxInflight["big"], 20)
	require.Greater(t, maxInflight["big"], 1, "a big retailer is applied in parallel")
	mu.Unlock()
	require.Len(t, e.Catalog("big"), 200000)
	for id, c := range small {
		e.RequireCatalog(id, c)
	}
}
