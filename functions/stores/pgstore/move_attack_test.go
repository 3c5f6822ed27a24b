package pgstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
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

// Two retailers moved at the same time between the same two shards, each
// run by a runner of its own, both writing throughout; then each moved
// back at once (the forwarding records give way) and a third time: every
// move ends done, each retailer whole on the shard the control database
// names after each, none of its rows on the other, the other retailer's
// rows untouched.
func TestTwoRetailersMovedAtOnceThreeTimes(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	fs := []*moveFixture{newMoveFixtureNamed(t, s, "mover-a"), newMoveFixtureNamed(t, s, "mover-b")}
	stop := make(chan struct{})
	var writes []<-chan error
	for _, f := range fs {
		writes = append(writes, f.writeUntil(ctx, stop))
	}
	for i, to := range []int{1, 0, 1} {
		var ids []string
		for _, f := range fs {
			id, err := s.StartMove(ctx, f.id, to)
			require.NoError(t, err, "move %d of %s", i, f.id)
			ids = append(ids, id)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for range 2 { // two runners: each takes the move the other does not hold
			wg.Go(func() {
				deadline := time.Now().Add(2 * time.Minute)
				for time.Now().Before(deadline) {
					running, err := s.RunMoves(ctx, time.Now().Add(time.Minute))
					if running == 0 && err == nil {
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				errs <- errors.New("the moves did not end within 2 minutes")
			})
		}
		wg.Wait()
		close(errs)
		require.NoError(t, <-errs)
		for _, id := range ids {
			m, err := s.Move(ctx, id)
			require.NoError(t, err)
			require.Equal(t, catalog.MoveDone, m.State, "%+v", m)
		}
		time.Sleep(100 * time.Millisecond) // writes on the new shard
	}
	close(stop)
	for _, w := range writes {
		require.NoError(t, <-w)
	}
	for _, f := range fs {
		f.requireWhole(ctx, 1)
		t.Logf("%s: generations written %d, refused while frozen %d", f.id, f.gen, f.refused.Load())
	}
}

// One runner at a time holds a move, also through a cleanup of many
// batches that outlasts the lease (a catalog of millions on AWS: minutes,
// while the schedule starts a runner every minute): each batch renews the
// lease, so a second runner finds the move held and leaves it, instead of
// cleaning up beside the first (which it did: the cleanup renewed the
// lease only at its end). The lease is renewed after the hook, so a batch
// (the hook's sleep, the renewal, the delete, the next load) must fit in it
// on a loaded CI machine: the test's lease leaves a second of margin, and
// its small batches make the cleanup outlast it twice over.
func TestMoveCleanupLongerThanItsLeaseKeepsOneRunner(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	const batchSleep = 150 * time.Millisecond
	f.s.Moves.Lease = 8 * batchSleep
	f.s.Moves.Batch = 300 // 6,000 consumer versions: 20 batches of cleanup
	var in, most, batches atomic.Int64
	var first, last atomic.Int64 // unix nanoseconds of the first and the last batch
	f.s.Moves.Hook = func(_, step string) error {
		if step != "cleanup" {
			return nil
		}
		n := in.Add(1)
		defer in.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		batches.Add(1)
		now := time.Now().UnixNano()
		first.CompareAndSwap(0, now)
		last.Store(now)
		time.Sleep(batchSleep) // each batch slow: the cleanup outlasts the lease
		return nil
	}
	_, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				running, err := f.s.RunMoves(ctx, time.Now().Add(time.Minute))
				if running == 0 && err == nil {
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	require.Greater(t, batches.Load(), int64(5), "the cleanup ran in batches")
	require.Equal(t, int64(1), most.Load(), "runners of the cleanup at once")
	require.Greater(t, time.Duration(last.Load()-first.Load()), 2*f.s.Moves.Lease, "the cleanup outlasted the lease")
	f.requireWhole(ctx, 1)
}

// A switch that committed although its runner saw it fail (the commit's
// answer lost on the way: the connection dropped), after four failed tries
// of it, is its fifth failure: the move must not be undone then (the undo
// would let the old shard take writes again and remove the copy the
// retailer now lives on), it goes on: done, the retailer whole on the new
// shard.
func TestMoveNeverUndoneOnceSwitched(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	var once sync.Once
	f.s.Moves.Hook = func(moveID, step string) error {
		if step != "switch" {
			return nil
		}
		var lost error
		once.Do(func() {
			// What the switch's transaction does, committed; its answer lost.
			require.NoError(t, pgx.BeginFunc(ctx, f.s.Control.Pool(), func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `UPDATE retailer_moves SET step = 'wait_routes', switched_at = now(), attempts = 4 WHERE move_id = $1`, moveID); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, `UPDATE retailers SET shard = 1 WHERE retailer_id = $1`, f.id)
				return err
			}))
			lost = errors.New("unexpected EOF (test: the commit's answer lost)")
		})
		return lost
	}
	id, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	f.runMoves(ctx)
	m, err := f.s.Move(ctx, id)
	require.NoError(t, err)
	require.Equal(t, catalog.MoveDone, m.State, "%+v", m)
	f.requireWhole(ctx, 1)
}

// A move recorded from a shard the retailer has left (StartMove read its
// shard just before an earlier move switched it, and recorded the new one
// just after that move ended: from its old shard to the one it is on now)
// ends failed at its start, touching nothing: without the check its start
// took the retailer's own shard as its target, refused every write there
// and removed the whole catalog as leftovers.
func TestMoveFromAShardTheRetailerLeftTouchesNothing(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	_, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	f.runMoves(ctx)
	f.requireWhole(ctx, 1)
	_, err = f.s.Control.Pool().Exec(ctx, `INSERT INTO retailer_moves (move_id, retailer_id, from_shard, to_shard) VALUES ('mv_stale', $1, 0, 1)`, f.id)
	require.NoError(t, err)
	f.runMoves(ctx)
	m, err := f.s.Move(ctx, "mv_stale")
	require.NoError(t, err)
	require.Equal(t, catalog.MoveFailed, m.State, "%+v", m)
	f.requireWhole(ctx, 1)
	require.Contains(t, m.Error, "is on shard 1")
	var records int64
	require.NoError(t, f.s.Shards[1].Pool().QueryRow(ctx, `SELECT count(*) FROM shard_moves WHERE retailer_id = $1`, f.id).Scan(&records))
	require.Zero(t, records, "the retailer's shard takes its writes")
	rnd := rand.New(rand.NewPCG(3, 4))
	require.NoError(t, f.write(ctx, rnd))
	f.requireWhole(ctx, 1)
}
