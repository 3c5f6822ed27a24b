package ops_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// moveSteps are a move's steps in order (pgstore/move.go).
var moveSteps = []string{"start", "copy_products", "copy_versions", "catch_up", "freeze", "drain", "switch", "wait_routes", "unfreeze", "cleanup"}

// attackSteps are the steps of a move at which a test acts: quick, or
// every step with CATALOG_ATTACK_MOVES set.
func attackSteps(quick ...string) []string {
	if os.Getenv("CATALOG_ATTACK_MOVES") != "" {
		return moveSteps
	}
	return quick
}

// newMoveFixture is the fixture on two shards, with small, fast moves.
func newMoveFixture(t *testing.T) *fixture {
	f := &fixture{t: t, store: pgstoretest.New(t, pgstoretest.Shards(2)), blobs: inmem.NewBlobs(), queue: inmem.NewQueue(), now: time.Now()}
	f.store.Moves = pgstore.MoveOptions{Batch: 2, Lease: 2 * time.Second, RouteGrace: 100 * time.Millisecond, CatchUpLeft: 1}
	log := slog.New(slog.DiscardHandler)
	f.diff = diff.New(diff.Config{ChunkRows: 2, SmallQueueURL: queues.ApplySmall, LargeQueueURL: queues.ApplyLarge},
		f.store, f.blobs, f.queue, log)
	f.apply = apply.New(f.store, f.blobs, log)
	f.ops = ops.New(ops.Config{AdminToken: adminToken, Queues: queues, Now: func() time.Time { return f.now }},
		f.store, f.blobs, f.queue, log)
	f.ops.Mover = f.store
	return f
}

// moveAt moves retailer r to shard 1, calling at (once) before the move's
// step runs, runs the moves until none is left, asserts that the move
// ended done, and returns at's error.
func (f *fixture) moveAt(ctx context.Context, step string, at func() error) error {
	f.t.Helper()
	var once sync.Once
	var hookErr error
	f.store.Moves.Hook = func(_, s string) error {
		if s == step {
			once.Do(func() { hookErr = at() })
		}
		return nil
	}
	moveID, err := f.store.StartMove(ctx, "r", 1)
	require.NoError(f.t, err)
	for {
		running, err := f.store.RunMoves(ctx, time.Now().Add(time.Minute))
		require.NoError(f.t, err)
		if running == 0 {
			break
		}
	}
	m, err := f.store.Move(ctx, moveID)
	require.NoError(f.t, err)
	require.Equal(f.t, catalog.MoveDone, m.State, "%+v", m)
	return hookErr
}

// isMoving: the write was refused because the retailer switches shards
// (429 retailer_moving for an API caller, the database's CM001 for the
// pipeline, whose message is retried).
func isMoving(err error) bool {
	var ce *catalog.Error
	if errors.As(err, &ce) && ce.Code == "retailer_moving" {
		return true
	}
	return err != nil && (errors.Is(err, catalog.ErrRateLimited) || containsCM001(err))
}

func containsCM001(err error) bool { return err != nil && strings.Contains(err.Error(), "CM001") }

// offboarding drives a retailer's offboarding through the pipeline as the
// control function, S3's arrival, the diff and the apply queues do; each
// stage that the move refuses is left where it is and tried again by the
// next call (the queues' redelivery).
type offboarding struct {
	f       *fixture
	id      string
	gen     int64
	stage   int // 0 offboard, 1 arrive, 2 diff, 3 apply, 4 done
	pending []message.ChunkMessage
	refused int
}

// advance runs the stages until one is refused by the move or all ran.
func (o *offboarding) advance(ctx context.Context) error {
	f := o.f
	for o.stage < 4 {
		var err error
		switch o.stage {
		case 0:
			o.gen, err = f.store.Offboard(ctx, o.id, []byte("revoked-"+o.id), time.Now().Add(time.Hour))
		case 1:
			if err = f.blobs.Put(ctx, keys.Upload(o.id, o.gen), nil); err == nil {
				_, err = f.store.MarkArrived(ctx, o.id, o.gen, time.Now(), time.Hour)
			}
		case 2:
			err = f.diff.Diff(ctx, message.DiffJob{RetailerID: o.id, Generation: o.gen, Key: keys.Upload(o.id, o.gen)})
			if err == nil {
				for _, q := range []string{queues.ApplySmall, queues.ApplyLarge} {
					for _, m := range f.queue.Take(q) {
						var msg message.ChunkMessage
						require.NoError(f.t, json.Unmarshal([]byte(m.Body), &msg))
						o.pending = append(o.pending, msg)
					}
				}
			}
		case 3:
			for len(o.pending) > 0 {
				if err = f.apply.Apply(ctx, o.pending[0]); err != nil {
					break
				}
				o.pending = o.pending[1:]
			}
		}
		if err != nil {
			if isMoving(err) {
				o.refused++
				return nil
			}
			return fmt.Errorf("offboarding stage %d: %w", o.stage, err)
		}
		o.stage++
	}
	return nil
}

// A retailer offboarded at each step of its move between shards (before
// the step runs: while the catalog is copied, frozen for the switch,
// switched, after the switch before the old shard is cleaned up): the move
// ends done, and the offboarding, refused (429 retailer_moving) while the
// move switches and asked again after, ends applied, the catalog empty on
// the shard the control database names, and nothing of the retailer left
// on the other.
func TestOffboardingAtEachStepOfAMove(t *testing.T) {
	t.Parallel()
	for _, at := range attackSteps("copy_products", "drain", "cleanup") { // copying, frozen, switched
		t.Run(at, func(t *testing.T) {
			t.Parallel() // mostly the moves' route waits
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			f := newMoveFixture(t)
			f.onboard("r")
			f.upload("r", "product_id,price\na,1\nb,2\nc,3\nd,4\ne,5\nf,6\ng,7\n")
			f.upload("r", "product_id,price\na,1\nb,2\nc,3\nd,4\ne,9\nf,6\nh,8\n")
			o := &offboarding{f: f, id: "r"}
			require.NoError(t, f.moveAt(ctx, at, func() error { return o.advance(ctx) }))
			require.NoError(t, o.advance(ctx))
			require.Equal(t, 4, o.stage, "the offboarding ran to its end after the move")
			t.Logf("offboarding at %s: refused %d times while moving", at, o.refused)

			r, err := f.store.Control.Retailer(ctx, "r")
			require.NoError(t, err)
			require.Equal(t, 1, r.Shard)
			on := f.store.Shards[1].Pool()
			var state string
			require.NoError(t, on.QueryRow(ctx, `SELECT state FROM generations WHERE retailer_id = 'r' AND generation = $1`, o.gen).Scan(&state))
			require.Equal(t, "applied", state)
			var live, unfinished int
			require.NoError(t, on.QueryRow(ctx, `SELECT count(*) FROM products WHERE retailer_id = 'r' AND NOT deleted`).Scan(&live))
			require.Zero(t, live, "the offboarded catalog is empty")
			require.NoError(t, on.QueryRow(ctx, `SELECT count(*) FROM generations WHERE retailer_id = 'r' AND state NOT IN ('applied', 'superseded', 'rejected', 'expired')`).Scan(&unfinished))
			require.Zero(t, unfinished, "every generation ended")
			for _, table := range []string{"products", "consumer_versions", "retailer_state", "generations", "applied_chunks", "outbox", "usage_daily", "move_changes"} {
				var n int
				require.NoError(t, f.store.Shards[0].Pool().QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE retailer_id = 'r'").Scan(&n))
				require.Zero(t, n, "rows of the retailer in %s on the old shard", table)
			}
		})
	}
}
