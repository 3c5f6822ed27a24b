package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// Collections and moves between the two shards in the property test's
// schedules (DESIGN 14): a schedule's first retailer, sometimes, is moved to
// the other shard (and sometimes back) while it uploads, each move's runner
// crashed (abandoned, its lease left to run out) at random steps and, now and
// then, failed at one step until the move is undone; collections of the
// retailer run at random points, with a tombstone retention of a nanosecond.
// A storefront reader beside each move reads the products the schedule never
// deletes: never a 404, never a generation lower than one it saw.

// Move settings of the property stack: small batches, so that a copy takes
// several transactions and catches up with uploads, a short lease, so that
// a crashed runner's move is resumed within seconds, and a short grace past
// the routes' TTL (one process, one clock: the TTL is what counts).
var propertyMoves = pgstore.MoveOptions{Batch: 8, CatchUpLeft: 5, Lease: 3 * time.Second, RouteGrace: 500 * time.Millisecond}

// stableProducts is how many of a moved retailer's first products are in
// every snapshot of its schedule (never deleted by a full snapshot or a
// delta), for the reader beside its moves.
const stableProducts = 4

// moveFaults are the faults of one move: the steps its runner crashes at
// (at most once each), and the step it fails at every time (doomed: after
// MaxAttempts failures the move is undone and ends failed).
type moveFaults struct {
	sc      *schedule
	doomed  string
	crashed sync.Map // steps crashed at
}

// moveHooks maps a move id to its faults, for the stack's one Hook.
type moveHooks struct{ m sync.Map }

// hook is the MoveOptions.Hook of the property stack.
func (h *moveHooks) hook(moveID, step string) error {
	v, ok := h.m.Load(moveID)
	if !ok {
		return nil
	}
	f := v.(*moveFaults)
	if f.doomed == step {
		return fmt.Errorf("injected failure of step %s", step)
	}
	if f.sc.rng.chance(8) {
		if _, again := f.crashed.LoadOrStore(step, true); !again {
			return pgstore.ErrMoveAbandoned
		}
	}
	return nil
}

// beforeSwitchSteps are the steps a failing move is undone at.
var beforeSwitchSteps = []string{"start", "copy_products", "copy_versions", "catch_up", "freeze", "drain", "switch"}

// retryMoving calls f until it answers anything but 429 retailer_moving (a
// reservation, a rollback or a collection that met a move's switch: the
// client retries after a few seconds, here half a second).
func retryMoving(ctx context.Context, f func() error) error {
	for {
		err := f()
		var ae *apiclient.APIError
		if !errors.As(err, &ae) || ae.Code != "retailer_moving" {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// collect runs a collection of the retailer through the admin route.
func (r *retailerRun) collect(ctx context.Context) {
	r.sc.t.Helper()
	err := retryMoving(ctx, func() error {
		_, err := r.sc.e.API.Collect(ctx, r.sc.e.Stack.AdminToken, r.id)
		return err
	})
	require.NoError(r.sc.t, err, "seed %d: collect %s", r.sc.seed, r.id)
}

// isStable reports whether a product is one the schedule never deletes.
func (r *retailerRun) isStable(id string) bool { return slices.Contains(r.stable, id) }

// moveResult is what a schedule's mover saw.
type moveResult struct {
	moves []catalog.Move
	reads int
	bad   []string // what the reader saw that it must not, and moves that ended wrong
}

// mover moves the retailer to the other shard once or twice, at random
// points of its uploads, a storefront reader beside each move; it runs
// runners of its own beside the stack's poller (as the ops function's
// invocations overlap on AWS), and waits for each move to end.
func (r *retailerRun) mover(ctx context.Context, hooks *moveHooks) moveResult {
	sc := r.sc
	var res moveResult
	seen := map[string]int64{} // the newest generation the reader saw, per product
	moves := 1
	if sc.rng.chance(40) { // and back
		moves = 2
	}
	for i := range moves {
		time.Sleep(time.Duration(sc.rng.IntN(1000)) * time.Millisecond)
		from := sc.e.ShardOf(r.id)
		reading, stopReading := context.WithCancel(ctx)
		var readWG sync.WaitGroup
		var readBad []string
		var reads int
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			reads, readBad = r.readStable(reading, seen)
		}()
		var started struct {
			MoveID string `json:"move_id"`
		}
		require.NoError(sc.t, sc.e.API.Do(ctx, http.MethodPost, "/v1/admin/retailers/"+r.id+"/move", sc.e.Stack.AdminToken,
			map[string]int{"to_shard": 1 - from}, &started), "seed %d: move %d of %s", sc.seed, i, r.id)
		f := &moveFaults{sc: sc}
		if sc.rng.chance(15) {
			f.doomed = beforeSwitchSteps[sc.rng.IntN(len(beforeSwitchSteps))]
		}
		hooks.m.Store(started.MoveID, f)
		running, stopRunning := context.WithCancel(ctx)
		var runWG sync.WaitGroup
		runWG.Add(1)
		go func() { // a runner beside the stack's poller
			defer runWG.Done()
			for running.Err() == nil {
				_, _ = sc.e.Stack.Stores.RunMoves(running, time.Now().Add(time.Minute))
				select {
				case <-running.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
		if sc.rng.chance(40) { // a collection while it moves
			time.Sleep(time.Duration(sc.rng.IntN(1000)) * time.Millisecond)
			r.collect(ctx)
		}
		var m catalog.Move
		for {
			require.NoError(sc.t, sc.e.API.Do(ctx, http.MethodGet, "/v1/admin/moves/"+started.MoveID, sc.e.Stack.AdminToken, nil, &m))
			if !m.Running() {
				break
			}
			select {
			case <-ctx.Done():
				sc.t.Fatalf("seed %d: move %s of %s never ended: %+v", sc.seed, started.MoveID, r.id, m)
			case <-time.After(150 * time.Millisecond):
			}
		}
		stopRunning()
		runWG.Wait()
		hooks.m.Delete(started.MoveID)
		stopReading()
		readWG.Wait()
		res.moves, res.reads, res.bad = append(res.moves, m), res.reads+reads, append(res.bad, readBad...)
		on := sc.e.ShardOf(r.id)
		switch {
		case f.doomed != "":
			if m.State != catalog.MoveFailed || on != from {
				res.bad = append(res.bad, fmt.Sprintf("move %s failing at %s ended %s with %s on shard %d (from %d): %s",
					m.ID, f.doomed, m.State, r.id, on, from, m.Error))
			}
		case m.State != catalog.MoveDone || on != 1-from:
			res.bad = append(res.bad, fmt.Sprintf("move %s ended %s with %s on shard %d (from %d): %s", m.ID, m.State, r.id, on, from, m.Error))
		}
	}
	return res
}

// readStable reads the stable products through the storefront, one after
// another, until ctx ends, and reports every 404 (or other failure) and
// every generation lower than one it saw before for that product.
func (r *retailerRun) readStable(ctx context.Context, seen map[string]int64) (int, []string) {
	var bad []string
	n := 0
	for ; ctx.Err() == nil; n++ {
		pid := r.stable[n%len(r.stable)]
		p, err := r.sc.e.API.Product(ctx, r.id, pid)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			bad = append(bad, fmt.Sprintf("read %d of %s: %v", n, pid, err))
		case p.Generation < seen[pid]:
			bad = append(bad, fmt.Sprintf("read %d of %s: generation %d after %d", n, pid, p.Generation, seen[pid]))
		default:
			seen[pid] = p.Generation
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	return n, bad
}

// arrivedDuring counts the retailer's generations that arrived while one
// of its moves ran (what the moves raced).
func (r *retailerRun) arrivedDuring(ctx context.Context, moves []catalog.Move) int {
	list, err := r.sc.e.API.List(ctx, r.token, r.id, 100)
	require.NoError(r.sc.t, err, "seed %d", r.sc.seed)
	n := 0
	for _, s := range list {
		for _, m := range moves {
			if s.ReceivedAt != nil && s.ReceivedAt.After(m.CreatedAt) && s.ReceivedAt.Before(m.UpdatedAt) {
				n++
				break
			}
		}
	}
	return n
}

// retailerTables are the shard tables that hold a retailer's rows.
var retailerTables = []string{"products", "consumer_versions", "retailer_state", "generations", "applied_chunks",
	"outbox", "generation_redrives", "generation_repairs", "usage_daily", "move_changes"}

// requireOnOneShard checks that the retailer's rows are all on the shard
// the control database names: none on the other but, at most, its
// forwarding record (shard_moves, moved), and no move record on its own.
func (r *retailerRun) requireOnOneShard(ctx context.Context) {
	t, seed := r.sc.t, r.sc.seed
	on := r.sc.e.ShardOf(r.id)
	for i, sh := range r.sc.e.Stack.Stores.Shards {
		var states []string
		rows, err := sh.Pool().Query(ctx, "SELECT role || ' ' || state FROM shard_moves WHERE retailer_id = $1", r.id)
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			states = append(states, s)
		}
		require.NoError(t, rows.Err())
		if i == on {
			require.Empty(t, states, "seed %d: %s's move records on its shard %d", seed, r.id, i)
			var n int64
			require.NoError(t, sh.Pool().QueryRow(ctx, "SELECT count(*) FROM retailer_state WHERE retailer_id = $1", r.id).Scan(&n))
			require.EqualValues(t, 1, n, "seed %d: %s's state on its shard %d", seed, r.id, i)
			continue
		}
		if len(states) > 0 {
			require.Equal(t, []string{"source moved"}, states, "seed %d: %s's move records on shard %d, not its own (%d)", seed, r.id, i, on)
		}
		for _, table := range retailerTables {
			var n int64
			require.NoError(t, sh.Pool().QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE retailer_id = $1", r.id).Scan(&n))
			require.Zero(t, n, "seed %d: rows of %s in %s on shard %d, not its own (%d)", seed, r.id, table, i, on)
		}
	}
}
