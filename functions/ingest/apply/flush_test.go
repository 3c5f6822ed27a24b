package apply

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// blockingFlusher records its flushes; the first blocks until release is
// closed, after saying it started.
type blockingFlusher struct {
	started, release chan struct{}
	mu               sync.Mutex
	calls            []string
	active           int
}

func (f *blockingFlusher) Flush(ctx context.Context, retailerID string) {
	f.mu.Lock()
	f.calls = append(f.calls, retailerID)
	first := len(f.calls) == 1
	f.active++
	f.mu.Unlock()
	if first {
		close(f.started)
		select {
		case <-f.release:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	f.active--
	f.mu.Unlock()
}

// A retailer queued again while its flush is not started is not flushed
// twice; one whose flush is running is flushed once more after it (that
// flush may have read the outbox before the newest commit).
func TestBackgroundFlushCoalesces(t *testing.T) {
	t.Parallel()
	f := &blockingFlusher{started: make(chan struct{}), release: make(chan struct{})}
	b := newBackgroundFlush(context.Background(), f)
	b.add("r1")
	<-f.started // r1's first flush is running
	b.add("r1")
	b.add("r2")
	b.add("r1")
	b.add("r2")
	close(f.release)
	b.wait(context.Background())
	require.Equal(t, []string{"r1", "r1", "r2"}, f.calls)
	require.Zero(t, f.active)
}

// At its deadline (less flushMargin) wait cancels a flush that hangs and
// returns only once it returned: nothing is left running.
func TestBackgroundFlushWaitRespectsTheDeadline(t *testing.T) {
	t.Parallel()
	f := &blockingFlusher{started: make(chan struct{}), release: make(chan struct{})} // never released
	ctx, cancel := context.WithTimeout(context.Background(), flushMargin+100*time.Millisecond)
	defer cancel()
	b := newBackgroundFlush(ctx, f)
	b.add("r1")
	b.add("r2") // queued behind the hanging flush: never started
	b.wait(ctx)
	require.NoError(t, ctx.Err(), "returned before the deadline")
	require.Equal(t, []string{"r1"}, f.calls)
	require.Zero(t, f.active)
	require.False(t, slices.Contains(f.calls, "r2"))
}

// Without a commit there is nothing to wait for.
func TestBackgroundFlushWaitWithoutFlushes(t *testing.T) {
	t.Parallel()
	b := newBackgroundFlush(context.Background(), &blockingFlusher{})
	b.wait(context.Background())
}
