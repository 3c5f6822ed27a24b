package apply

import (
	"context"
	"slices"
	"sync"
	"time"
)

// flushMargin is how long before its deadline an invocation stops waiting
// for its flushes: what is not published by then stays in the outbox for
// the sweeper, and the invocation returns in time.
const flushMargin = 500 * time.Millisecond

// backgroundFlush is one invocation's fast path: each committed chunk hands
// its retailer to it, and one goroutine publishes while the invocation's
// next message applies, so that the publish of a chunk's events overlaps
// the next chunk's work instead of adding to it. It coalesces: a retailer
// already queued is not queued again (its flush, when it runs, takes every
// event committed by then); a retailer whose flush is running is queued
// once more, because that flush may have read the outbox before the newest
// commit. wait ends it before the invocation returns: Lambda freezes the
// process after the return, so nothing of an invocation may run on.
type backgroundFlush struct {
	events Flusher

	ctx    context.Context // the flushes' context: the invocation's, cancelled by wait
	cancel context.CancelFunc

	mu      sync.Mutex
	queued  []string       // retailers to flush, in the order their chunks committed
	running bool           // a goroutine is running
	started sync.WaitGroup // every goroutine started
}

func newBackgroundFlush(ctx context.Context, events Flusher) *backgroundFlush {
	ctx, cancel := context.WithCancel(ctx)
	return &backgroundFlush{events: events, ctx: ctx, cancel: cancel}
}

// add queues a flush of retailerID, starting the goroutine if it is not
// running.
func (b *backgroundFlush) add(retailerID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.Contains(b.queued, retailerID) {
		return
	}
	b.queued = append(b.queued, retailerID)
	if b.running {
		return
	}
	b.running = true
	b.started.Add(1)
	go b.run()
}

func (b *backgroundFlush) run() {
	defer b.started.Done()
	for {
		b.mu.Lock()
		if len(b.queued) == 0 || b.ctx.Err() != nil {
			b.queued, b.running = nil, false
			b.mu.Unlock()
			return
		}
		r := b.queued[0]
		b.queued = b.queued[1:]
		b.mu.Unlock()
		b.events.Flush(b.ctx, r) // best effort: it logs its failures
	}
}

// wait waits for the queued flushes, at most until flushMargin before ctx's
// deadline or ctx's end; then it cancels what still runs and waits for the
// goroutines to return (the flushes honour their context), so that nothing
// is left running. What was not published stays in the outbox: the
// sweeper's. It is called once, after the last add.
func (b *backgroundFlush) wait(ctx context.Context) {
	defer b.cancel()
	b.mu.Lock()
	running := b.running
	b.mu.Unlock()
	if !running {
		b.started.Wait() // a goroutine that has emptied the queue may still be returning
		return
	}
	done := make(chan struct{})
	go func() {
		b.started.Wait()
		close(done)
	}()
	var stop <-chan time.Time
	if deadline, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(deadline.Add(-flushMargin)))
		defer t.Stop()
		stop = t.C
	}
	select {
	case <-done:
		return
	case <-ctx.Done():
	case <-stop:
	}
	b.cancel()
	<-done
}
