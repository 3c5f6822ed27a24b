package pgstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// A target shard that fails mid-copy (its products table gone: every
// statement on it fails, the move's undo too) while the retailer's writes
// go on: the move fails its step until it is undone; the source takes the
// retailer's writes again at once, while the undo itself waits for the
// target; once the target is back the undo ends, the move failed, the
// retailer whole on its old shard, the target holding nothing of it; and
// a new move then succeeds.
func TestMoveToATargetThatFailsMidCopy(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	dst := f.s.Shards[1].Pool()
	var batches atomic.Int64
	f.s.Moves.Hook = func(_, step string) error {
		if step == "copy_products" && batches.Add(1) == 3 { // two batches copied
			_, err := dst.Exec(ctx, `ALTER TABLE products RENAME TO products_away`)
			require.NoError(t, err)
		}
		return nil
	}
	stop := make(chan struct{})
	writes := f.writeUntil(ctx, stop)
	id, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	var m catalog.Move
	for range 40 {
		_, err := f.s.RunMoves(ctx, time.Now().Add(time.Minute))
		require.Error(t, err)
		m, err = f.s.Move(ctx, id)
		require.NoError(t, err)
		if m.Step == "abort" {
			break
		}
	}
	require.Equal(t, "abort", m.Step, "%+v", m)
	for range 3 { // the undo waits for the target
		_, err := f.s.RunMoves(ctx, time.Now().Add(time.Minute))
		require.Error(t, err)
	}
	m, err = f.s.Move(ctx, id)
	require.NoError(t, err)
	require.True(t, m.Running(), "%+v", m)
	gen := func() int64 { f.mu.Lock(); defer f.mu.Unlock(); return f.gen }
	before, refused := gen(), f.refused.Load()
	for gen() < before+3 {
		time.Sleep(20 * time.Millisecond) // the source takes the writes while the undo waits
	}
	require.Equal(t, refused, f.refused.Load())

	_, err = dst.Exec(ctx, `ALTER TABLE products_away RENAME TO products`)
	require.NoError(t, err)
	f.runMoves(ctx)
	m, err = f.s.Move(ctx, id)
	require.NoError(t, err)
	require.Equal(t, catalog.MoveFailed, m.State, "%+v", m)
	require.Contains(t, m.Error, "products")
	close(stop)
	require.NoError(t, <-writes)
	f.requireWhole(ctx, 0)
	require.Zero(t, f.count(ctx, 1, "shard_moves"))
	require.Zero(t, f.count(ctx, 0, "shard_moves"))

	f.s.Moves.Hook = nil
	stop = make(chan struct{})
	writes = f.writeUntil(ctx, stop)
	id, err = f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	f.runMoves(ctx)
	close(stop)
	require.NoError(t, <-writes)
	m, err = f.s.Move(ctx, id)
	require.NoError(t, err)
	require.Equal(t, catalog.MoveDone, m.State, "%+v", m)
	f.requireWhole(ctx, 1)
}
