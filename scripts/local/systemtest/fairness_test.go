package systemtest_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// I9: a 200,000-row retailer interleaved with many small ones: at most 20 of
// its chunks in flight at any time, and the small ones are not starved.
func TestI9Fairness(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	t.Parallel()
	var mu sync.Mutex
	inflight := map[string]int{}
	maxInflight := map[string]int{}
	e := newEnv(t, stack.Options{
		ApplyConcurrency: 32, LargeThreshold: 50000, HandlerTimeout: 60 * time.Second, VisibilityTimeout: 70 * time.Second,
		ApplyObserve: func(m events.ChunkMessage, start bool) {
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
	e.Onboard("big")
	big := fixtures.Generate("b", 200000)
	ctx := systemtest.Context(t, 5*time.Minute)
	bigGen, err := e.API.Upload(ctx, e.Token("big"), "big", "csv", big.CSV(nil))
	require.NoError(t, err)

	small := map[string]fixtures.Catalog{}
	var smallGens sync.Map
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("small%d", i)
		e.Onboard(id)
		small[id] = fixtures.Generate(id, 100)
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen, err := e.API.Upload(ctx, e.Token(id), id, "", small[id].CSV(nil))
			require.NoError(t, err)
			smallGens.Store(id, gen)
		}()
	}
	wg.Wait()
	for id := range small {
		gen, _ := smallGens.Load(id)
		require.Equal(t, "applied", e.Wait(id, gen.(int64)).State)
	}
	s := e.Wait("big", bigGen)
	require.Equal(t, "applied", s.State)
	require.Equal(t, 40, s.Chunks.Total)
	mu.Lock()
	t.Logf("max chunks in flight for the big retailer: %d", maxInflight["big"])
	require.LessOrEqual(t, maxInflight["big"], 20)
	require.Greater(t, maxInflight["big"], 1, "a big retailer is applied in parallel")
	mu.Unlock()
	require.Len(t, e.Catalog("big"), 200000)
	for id, c := range small {
		e.RequireCatalog(id, c)
	}
}
