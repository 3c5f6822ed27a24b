package read_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// countingStore is the stores with replica fallbacks the test makes up.
type countingStore struct {
	*pgstore.Stores
	fallbacks atomic.Int64
}

func (s *countingStore) ReplicaFallbacks() int64 { return s.fallbacks.Load() }

// The storefront's fallbacks reach the metrics as deltas, at most once per
// interval, never per request.
func TestReplicaFallbacksFlushedAsDeltas(t *testing.T) {
	t.Parallel()
	store := &countingStore{Stores: pgstoretest.New(t)}
	var out metricstest.Capture
	h := read.New(store, slog.New(slog.DiscardHandler), nil)
	h.Metrics = metrics.New(&out, metrics.Options{Function: "read"})
	h.MetricsEvery = 20 * time.Millisecond
	ctx := context.Background()

	h.FlushMetrics(ctx) // starts the first interval
	store.fallbacks.Add(3)
	h.FlushMetrics(ctx)
	require.Empty(t, out.Lines(), "not before the interval has passed")
	time.Sleep(25 * time.Millisecond)
	h.FlushMetrics(ctx)
	store.fallbacks.Add(2)
	time.Sleep(25 * time.Millisecond)
	h.FlushMetrics(ctx)
	require.NoError(t, out.Validate())
	require.Len(t, out.Lines(), 2)
	require.Equal(t, 5.0, out.Sum(metrics.ReplicaFallbacks))
	require.Equal(t, 2.0, out.Lines()[1][metrics.ReplicaFallbacks])
}
