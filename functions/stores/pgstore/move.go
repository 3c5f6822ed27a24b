package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// A move of a retailer between shards (DESIGN 14), in steps, each
// checkpointed in the control database's retailer_moves row and fenced by
// its lease (one runner at a time; a runner that died leaves the lease to
// run out). docs/ARCHITECTURE.md "Moving a retailer between shards" says
// what each step's transactions are and what runs around them:
//
//	start          target: leftovers of an earlier try removed, its record (incoming);
//	               source: its record (copying), taken under the move lock, so every
//	               write from then on is logged (move_changes)
//	copy_products  keyset batches of products, COPY between the databases
//	copy_versions  the same for consumer_versions
//	catch_up       the logged changes copied again, until few are left
//	freeze         source: record frozen under the move lock: writes of the retailer
//	               are refused (CM001) and retried by the pipeline (held back)
//	drain          the last logged changes, and the retailer's small tables whole;
//	               the target's replicas caught up
//	switch         control: the retailer's shard and the step, one transaction
//	wait_routes    control's replicas caught up, then RouteTTL and a grace pass:
//	               no process reads or writes through the old route any more
//	unfreeze       target: its record removed (it takes writes); source: moved
//	cleanup        source: every row of the retailer removed, in batches
//
// Before the switch a move that fails (MaxAttempts failures of one step)
// is undone (abort): the source's record removed, the target's copy
// removed: the retailer stays, whole, on its old shard. After the switch
// it only goes forward.

// MoveOptions are the settings of the moves a process runs.
type MoveOptions struct {
	// Batch is the rows of one copy transaction [20,000].
	Batch int
	// MaxAttempts is how many times in a row a step may fail before a move
	// that has not switched yet is undone [5].
	MaxAttempts int
	// Lease is how long a runner holds a move between checkpoints [60s].
	Lease time.Duration
	// RouteGrace is added to RouteTTL before the new shard takes writes [3s].
	RouteGrace time.Duration
	// CatchUpLeft is the logged changes under which the copy freezes the
	// source [2,000].
	CatchUpLeft int64
	// Hook, when set, is called before each step (tests): ErrMoveAbandoned
	// stops the runner there as a crash would (the lease is kept until it
	// runs out); another error counts as the step's failure.
	Hook func(moveID, step string) error
}

// ErrMoveAbandoned is what a MoveOptions.Hook returns to stop a runner as
// if its process died.
var ErrMoveAbandoned = errors.New("move runner abandoned")

func (o MoveOptions) withDefaults() MoveOptions {
	if o.Batch <= 0 {
		o.Batch = 20_000
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Lease <= 0 {
		o.Lease = time.Minute
	}
	if o.RouteGrace <= 0 {
		o.RouteGrace = 3 * time.Second
	}
	if o.CatchUpLeft <= 0 {
		o.CatchUpLeft = 2_000
	}
	return o
}

// The steps of a move, in order.
const (
	stepStart        = "start"
	stepCopyProducts = "copy_products"
	stepCopyVersions = "copy_versions"
	stepCatchUp      = "catch_up"
	stepFreeze       = "freeze"
	stepDrain        = "drain"
	stepSwitch       = "switch"
	stepWaitRoutes   = "wait_routes"
	stepUnfreeze     = "unfreeze"
	stepCleanup      = "cleanup"
	stepDone         = "done"
	stepAbort        = "abort"
)

// moveSmallTables are the retailer's tables copied whole once the source is
// frozen (each is a retailer's uploads, chunks, events or days: small next
// to its catalog), in the order they are written on the target
// (generations before retailer_state: an offboarded retailer's state
// refuses a generation inserted after it).
var moveSmallTables = []string{"generations", "retailer_state", "applied_chunks", "outbox",
	"generation_redrives", "generation_repairs", "usage_daily"}

// moveAllTables are every table that holds rows of a retailer on a shard.
var moveAllTables = append([]string{"products", "consumer_versions"}, moveSmallTables...)

// StartMove records a move of a retailer to shard toShard and returns its
// id; the ops function's runner (RunMoves) does it. catalog.ErrNotFound for
// an unknown retailer, ErrInvalid for a shard that does not exist,
// ErrConflict for the shard it is on or while another move of it runs.
func (s *Stores) StartMove(ctx context.Context, retailerID string, toShard int) (string, error) {
	if toShard < 0 || toShard >= len(s.Shards) {
		return "", catalog.Errorf(catalog.ErrInvalid, "invalid_shard", "shard %d does not exist: shards are 0 to %d", toShard, len(s.Shards)-1)
	}
	r, err := s.Control.Retailer(ctx, retailerID)
	if err != nil {
		return "", err
	}
	if r.Shard == toShard {
		return "", catalog.Errorf(catalog.ErrConflict, "already_on_shard", "retailer %q is on shard %d already", retailerID, toShard)
	}
	id := "mv_" + randomToken()
	_, err = s.Control.pool.Exec(ctx, q("move_insert"), id, retailerID, r.Shard, toShard)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return "", catalog.Errorf(catalog.ErrConflict, "move_running", "a move of retailer %q is running: wait for it to end", retailerID)
	}
	if err != nil {
		return "", fmt.Errorf("start move of %s to shard %d: %w", retailerID, toShard, err)
	}
	return id, nil
}

// movingError is err, or, when the shard refused the write because the
// retailer is being switched to another shard (the guard's CM001, a few
// seconds), a catalog.ErrRateLimited the client retries after RetryAfter.
// The pipeline's own writes keep the database's error: their messages are
// retried.
func movingError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "CM001" {
		e := catalog.Errorf(catalog.ErrRateLimited, "retailer_moving", "the retailer's catalog is being moved to another shard: retry in a few seconds")
		e.RetryAfter = 5 * time.Second
		return e
	}
	return err
}

// moveRow is a move as its runner sees it: the answer and the checkpoint.
type moveRow struct {
	catalog.Move
	cursorConsumer, cursorID string
	cursorSeq                int64
	attempts                 int
}

func (s *Stores) loadMove(ctx context.Context, moveID string) (moveRow, error) {
	var m moveRow
	if !utf8.ValidString(moveID) || strings.ContainsRune(moveID, 0) {
		// PostgreSQL's text takes neither: no move has such an id (a query
		// would fail, and GET /v1/admin/moves/%00 answer 500).
		return m, catalog.Errorf(catalog.ErrNotFound, "move_not_found", "no move %q", strings.ToValidUTF8(moveID[:min(len(moveID), 32)], ""))
	}
	var state string
	err := s.Control.pool.QueryRow(ctx, q("move_get"), moveID).Scan(&m.ID, &state, &m.RetailerID, &m.FromShard, &m.ToShard,
		&m.Step, &m.RowsCopied, &m.RowsTotal, &m.Error, &m.CreatedAt, &m.UpdatedAt,
		&m.cursorConsumer, &m.cursorID, &m.cursorSeq, &m.attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return m, catalog.Errorf(catalog.ErrNotFound, "move_not_found", "no move %q", moveID)
	}
	if err != nil {
		return m, fmt.Errorf("read move %s: %w", moveID, err)
	}
	m.State = catalog.MoveState(state)
	return m, nil
}

// Move returns a move as it is now; catalog.ErrNotFound when unknown.
func (s *Stores) Move(ctx context.Context, moveID string) (catalog.Move, error) {
	m, err := s.loadMove(ctx, moveID)
	return m.Move, err
}

// RunMoves runs every running move, a step after another, until each ends
// or until is passed (a Lambda's slice: the next invocation resumes from
// the checkpoint), and returns how many are still running. A move another
// runner holds is left to it.
func (s *Stores) RunMoves(ctx context.Context, until time.Time) (running int, err error) {
	rows, err := s.Control.pool.Query(ctx, q("move_running"), 100)
	if err != nil {
		return 0, fmt.Errorf("list running moves: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, fmt.Errorf("list running moves: %w", err)
	}
	var errs []error
	for _, id := range ids {
		done, err := s.runMove(ctx, id, until)
		if err != nil {
			errs = append(errs, err)
		}
		if !done {
			running++
		}
	}
	return running, errors.Join(errs...)
}

// runMove runs one move's steps while it holds its lease; done when it ended.
func (s *Stores) runMove(ctx context.Context, moveID string, until time.Time) (done bool, err error) {
	o := s.Moves.withDefaults()
	token := randomToken()
	tag, err := s.Control.pool.Exec(ctx, q("move_lease"), moveID, token, o.Lease.Seconds())
	if err != nil {
		return false, fmt.Errorf("move %s: take the lease: %w", moveID, err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // another runner has it, or it ended
	}
	r := &moveRunner{s: s, o: o, token: token}
	defer func() {
		if !errors.Is(err, ErrMoveAbandoned) {
			_, _ = s.Control.pool.Exec(context.WithoutCancel(ctx), q("move_release"), moveID, token)
		}
	}()
	for {
		m, err := s.loadMove(ctx, moveID)
		if err != nil {
			return false, err
		}
		if !m.Running() {
			return true, nil
		}
		if time.Now().After(until) {
			return false, nil
		}
		r.m = m
		if o.Hook != nil {
			if err := o.Hook(m.ID, m.Step); errors.Is(err, ErrMoveAbandoned) {
				return false, err
			} else if err != nil {
				return r.failed(ctx, m.Step, err)
			}
		}
		if err := r.step(ctx); err != nil {
			if errors.Is(err, errLeaseLost) {
				return false, nil
			}
			return r.failed(ctx, m.Step, err)
		}
	}
}

var errLeaseLost = errors.New("the move's lease was taken by another runner")

// moveRunner runs the steps of one move while it holds its lease.
type moveRunner struct {
	s     *Stores
	o     MoveOptions
	token string
	m     moveRow
}

func (r *moveRunner) src() *Shard { return r.s.Shards[r.m.FromShard] }
func (r *moveRunner) dst() *Shard { return r.s.Shards[r.m.ToShard] }

// failed counts a step's failure; past MaxAttempts a move that has not
// switched is undone.
func (r *moveRunner) failed(ctx context.Context, step string, cause error) (bool, error) {
	err := fmt.Errorf("move %s of %s (shard %d to %d), step %s: %w", r.m.ID, r.m.RetailerID, r.m.FromShard, r.m.ToShard, step, cause)
	var attempts int
	if qerr := r.s.Control.pool.QueryRow(ctx, q("move_failure"), r.m.ID, r.token, err.Error()).Scan(&attempts); qerr != nil {
		return false, errors.Join(err, qerr)
	}
	if attempts >= r.o.MaxAttempts && r.beforeSwitch() {
		if aerr := r.abort(ctx, err.Error()); aerr != nil {
			return false, errors.Join(err, aerr)
		}
		return true, err
	}
	return false, err
}

func (r *moveRunner) beforeSwitch() bool {
	switch r.m.Step {
	case stepStart, stepCopyProducts, stepCopyVersions, stepCatchUp, stepFreeze, stepDrain, stepSwitch, stepAbort:
		return true
	}
	return false
}

// checkpoint records the move's next step and cursors, fenced by the lease.
func (r *moveRunner) checkpoint(ctx context.Context, state catalog.MoveState, step, cursorConsumer, cursorID string, cursorSeq, copied, total int64) error {
	tag, err := r.s.Control.pool.Exec(ctx, q("move_checkpoint"), r.m.ID, r.token, string(state), step,
		cursorConsumer, cursorID, cursorSeq, copied, total, r.o.Lease.Seconds())
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errLeaseLost
	}
	return nil
}

// renew keeps the lease between the transactions of a step of many (the
// cleanup, the undo, the start's removal of leftovers): a runner that lost
// it stops (errLeaseLost) instead of going on beside the one that took it.
func (r *moveRunner) renew(ctx context.Context) error {
	tag, err := r.s.Control.pool.Exec(ctx, q("move_renew"), r.m.ID, r.token, r.o.Lease.Seconds())
	if err != nil {
		return fmt.Errorf("renew the lease: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errLeaseLost
	}
	return nil
}

func (r *moveRunner) next(ctx context.Context, state catalog.MoveState, step string) error {
	return r.checkpoint(ctx, state, step, "", "", 0, r.m.RowsCopied, r.m.RowsTotal)
}

func (r *moveRunner) step(ctx context.Context) error {
	m := r.m
	switch m.Step {
	case stepStart:
		return r.start(ctx)
	case stepCopyProducts:
		return r.copyProducts(ctx)
	case stepCopyVersions:
		return r.copyVersions(ctx)
	case stepCatchUp:
		left, err := r.catchUp(ctx)
		if err != nil {
			return err
		}
		if left < r.o.CatchUpLeft {
			return r.checkpoint(ctx, catalog.MoveCopying, stepFreeze, "", "", r.m.cursorSeq, r.m.RowsCopied, r.m.RowsTotal)
		}
		return nil
	case stepFreeze:
		if err := r.onSource(ctx, true, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, q("move_set_source_state"), m.RetailerID, m.ID, "frozen")
			return err
		}); err != nil {
			return err
		}
		return r.checkpoint(ctx, catalog.MoveSwitching, stepDrain, "", "", m.cursorSeq, m.RowsCopied, m.RowsTotal)
	case stepDrain:
		return r.drain(ctx)
	case stepSwitch:
		return r.switchShard(ctx)
	case stepWaitRoutes:
		if rs := r.s.ControlReaders; rs != nil {
			if err := rs.WaitReplicas(ctx); err != nil {
				return fmt.Errorf("wait for the control database's replicas: %w", err)
			}
		}
		var wait float64
		if err := r.s.Control.pool.QueryRow(ctx, q("move_routes_wait"), m.ID, (RouteTTL + r.o.RouteGrace).Seconds()).Scan(&wait); err != nil {
			return fmt.Errorf("routes wait: %w", err)
		}
		if wait > 0 {
			t := time.NewTimer(time.Duration(wait * float64(time.Second)))
			defer t.Stop()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C:
			}
		}
		return r.next(ctx, catalog.MoveSwitching, stepUnfreeze)
	case stepUnfreeze:
		if _, err := r.dst().pool.Exec(ctx, q("move_unmark"), m.RetailerID, m.ID); err != nil {
			return fmt.Errorf("target: remove its record: %w", err)
		}
		if _, err := r.src().pool.Exec(ctx, q("move_set_source_state"), m.RetailerID, m.ID, "moved"); err != nil {
			return fmt.Errorf("source: record the move: %w", err)
		}
		return r.next(ctx, catalog.MoveSwitching, stepCleanup)
	case stepCleanup:
		// The lease renewed before each batch: a runner that lost it (a
		// cleanup of millions outlasts it) removes nothing more.
		if err := r.renew(ctx); err != nil {
			return err
		}
		more, err := r.removeRows(ctx, r.src())
		if err != nil {
			return fmt.Errorf("source: remove the retailer's rows: %w", err)
		}
		if more {
			return nil
		}
		return r.end(ctx, catalog.MoveDone, stepDone, "")
	case stepAbort:
		return r.abort(ctx, m.Error)
	}
	return fmt.Errorf("unknown step %q", m.Step)
}

func (r *moveRunner) end(ctx context.Context, state catalog.MoveState, step, why string) error {
	tag, err := r.s.Control.pool.Exec(ctx, q("move_end"), r.m.ID, r.token, string(state), step, why)
	if err != nil {
		return fmt.Errorf("end the move: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return errLeaseLost
	}
	r.s.forgetRoute(r.m.RetailerID)
	return nil
}

// onSource runs fn in a transaction of the source that passes the guard,
// under the retailer's move lock when lock (the writes in flight end first,
// and every later one sees what fn changed).
func (r *moveRunner) onSource(ctx context.Context, lock bool, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.src().pool, func(tx pgx.Tx) error {
		if lock {
			if _, err := tx.Exec(ctx, q("move_lock"), r.m.RetailerID); err != nil {
				return fmt.Errorf("source: move lock: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, q("move_bypass"), r.m.ID); err != nil {
			return err
		}
		return fn(tx)
	})
}

// onTarget runs fn in a transaction of the target that passes the guard,
// fenced by the target's record of this move.
func (r *moveRunner) onTarget(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, r.dst().pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("move_bypass"), r.m.ID); err != nil {
			return err
		}
		var one int
		err := tx.QueryRow(ctx, q("move_target_fence"), r.m.RetailerID, r.m.ID).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("target shard %d has no record of move %s: %w", r.m.ToShard, r.m.ID, errLeaseLost)
		}
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

func (r *moveRunner) start(ctx context.Context) error {
	m := r.m
	// The retailer must be on the move's source: a move recorded from a
	// shard it has left since (StartMove read its shard just before an
	// earlier move switched it) would take the shard it lives on as its
	// target, refuse its writes there and remove its catalog as leftovers.
	// Only this move can change its shard from here on (one runs at a time).
	now, err := r.s.Control.Retailer(ctx, m.RetailerID)
	if err != nil {
		return fmt.Errorf("control: %w", err)
	}
	if now.Shard != m.FromShard {
		return r.end(ctx, catalog.MoveFailed, stepAbort, fmt.Sprintf("retailer %s is on shard %d, not %d: nothing moved", m.RetailerID, now.Shard, m.FromShard))
	}
	// The target: what an earlier, failed try left, then its record.
	if err := pgx.BeginFunc(ctx, r.dst().pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("move_bypass"), m.ID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q("move_mark_target"), m.RetailerID, m.ID, m.FromShard)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("target shard %d has a record of another move of the retailer", m.ToShard)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("target: %w", err)
	}
	if err := r.removeAll(ctx, r.dst()); err != nil {
		return fmt.Errorf("target: remove what an earlier try left: %w", err)
	}
	var total int64
	if err := r.onSource(ctx, true, func(tx pgx.Tx) error {
		var state string
		err := tx.QueryRow(ctx, q("move_mark_source"), m.RetailerID, m.ID, m.ToShard).Scan(&state)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("source shard %d has a record of another move of the retailer", m.FromShard)
		}
		if err != nil {
			return err
		}
		return tx.QueryRow(ctx, q("move_count_rows"), m.RetailerID).Scan(&total)
	}); err != nil {
		return fmt.Errorf("source: %w", err)
	}
	return r.checkpoint(ctx, catalog.MoveCopying, stepCopyProducts, "", "", 0, 0, total)
}

// copyProducts copies the next batch of products (keyset on product_id),
// and checkpoints its last id.
func (r *moveRunner) copyProducts(ctx context.Context) error {
	m := r.m
	var end string
	if err := r.src().pool.QueryRow(ctx, q("move_products_end"), m.RetailerID, m.cursorID, r.o.Batch).Scan(&end); err != nil {
		return fmt.Errorf("source: next batch: %w", err)
	}
	where := "retailer_id = " + literal(m.RetailerID) + " AND product_id > " + literal(m.cursorID)
	if end != "" {
		where += " AND product_id <= " + literal(end)
	}
	var n int64
	err := r.onTarget(ctx, func(tx pgx.Tx) error {
		// A batch copied before a crash and not checkpointed: copied again.
		if _, err := tx.Exec(ctx, "DELETE FROM products WHERE retailer_id = $1 AND product_id > $2", m.RetailerID, m.cursorID); err != nil {
			return err
		}
		var err error
		n, err = copyBetween(ctx, r.src().pool, tx, "products", where+" ORDER BY product_id")
		return err
	})
	if err != nil {
		return fmt.Errorf("copy products after %q: %w", m.cursorID, err)
	}
	if end == "" {
		return r.checkpoint(ctx, catalog.MoveCopying, stepCopyVersions, "", "", 0, m.RowsCopied+n, m.RowsTotal)
	}
	return r.checkpoint(ctx, catalog.MoveCopying, stepCopyProducts, "", end, 0, m.RowsCopied+n, m.RowsTotal)
}

// copyVersions copies the next batch of consumer versions (keyset on
// consumer, product_id).
func (r *moveRunner) copyVersions(ctx context.Context) error {
	m := r.m
	var endC, endID string
	err := r.src().pool.QueryRow(ctx, q("move_versions_end"), m.RetailerID, m.cursorConsumer, m.cursorID, r.o.Batch).Scan(&endC, &endID)
	last := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !last {
		return fmt.Errorf("source: next batch: %w", err)
	}
	after := "(consumer, product_id) > (" + literal(m.cursorConsumer) + ", " + literal(m.cursorID) + ` COLLATE "C")`
	where := "retailer_id = " + literal(m.RetailerID) + " AND " + after
	if !last {
		where += " AND (consumer, product_id) <= (" + literal(endC) + ", " + literal(endID) + ` COLLATE "C")`
	}
	var n int64
	err = r.onTarget(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM consumer_versions WHERE retailer_id = $1 AND "+after, m.RetailerID); err != nil {
			return err
		}
		var err error
		n, err = copyBetween(ctx, r.src().pool, tx, "consumer_versions", where+" ORDER BY consumer, product_id")
		return err
	})
	if err != nil {
		return fmt.Errorf("copy consumer versions after %q/%q: %w", m.cursorConsumer, m.cursorID, err)
	}
	if last {
		return r.checkpoint(ctx, catalog.MoveCopying, stepCatchUp, "", "", 0, m.RowsCopied+n, m.RowsTotal)
	}
	return r.checkpoint(ctx, catalog.MoveCopying, stepCopyVersions, endC, endID, 0, m.RowsCopied+n, m.RowsTotal)
}

// catchUp copies again the rows the oldest batch of the log names (as the
// source has them now: a row gone there goes on the target too), removes
// those changes from the log, and returns how many logged changes are
// left. The log is read oldest first and emptied change by change, never
// skipped past by a cursor: a writer's seq is taken when it writes, so a
// change of a lower seq can commit after one of a higher seq was copied.
// The position checkpointed (cursor_seq) is the highest seq copied, for
// the status only.
func (r *moveRunner) catchUp(ctx context.Context) (left int64, err error) {
	m := r.m
	rows, err := r.src().pool.Query(ctx, q("move_changes_batch"), m.RetailerID, r.o.Batch)
	if err != nil {
		return 0, fmt.Errorf("source: read the log: %w", err)
	}
	seq := m.cursorSeq
	var seqs []int64
	var products, vc, vp []string
	seenP, seenV := map[string]bool{}, map[[2]string]bool{}
	for rows.Next() {
		var s int64
		var consumer, id string
		if err := rows.Scan(&s, &consumer, &id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("source: read the log: %w", err)
		}
		seq = max(seq, s)
		seqs = append(seqs, s)
		if consumer == "" {
			if !seenP[id] {
				seenP[id] = true
				products = append(products, id)
			}
		} else if k := [2]string{consumer, id}; !seenV[k] {
			seenV[k] = true
			vc, vp = append(vc, consumer), append(vp, id)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("source: read the log: %w", err)
	}
	if len(seqs) > 0 {
		err := r.onTarget(ctx, func(tx pgx.Tx) error {
			if len(products) > 0 {
				if _, err := tx.Exec(ctx, "DELETE FROM products WHERE retailer_id = $1 AND product_id = ANY($2::text[])", m.RetailerID, products); err != nil {
					return err
				}
				if _, err := copyBetween(ctx, r.src().pool, tx, "products",
					"retailer_id = "+literal(m.RetailerID)+" AND product_id = ANY("+textArray(products)+")"); err != nil {
					return err
				}
			}
			if len(vc) > 0 {
				if _, err := tx.Exec(ctx, `DELETE FROM consumer_versions WHERE retailer_id = $1
					AND (consumer, product_id) IN (SELECT u.c, u.p COLLATE "C" FROM unnest($2::text[], $3::text[]) AS u(c, p))`,
					m.RetailerID, vc, vp); err != nil {
					return err
				}
				if _, err := copyBetween(ctx, r.src().pool, tx, "consumer_versions",
					"retailer_id = "+literal(m.RetailerID)+` AND (consumer, product_id) IN (SELECT u.c, u.p COLLATE "C" FROM unnest(`+
						textArray(vc)+", "+textArray(vp)+") AS u(c, p))"); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("copy %d logged changes (up to seq %d): %w", len(seqs), seq, err)
		}
		if err := r.checkpoint(ctx, catalog.MoveState(m.State), m.Step, "", "", seq, m.RowsCopied, m.RowsTotal); err != nil {
			return 0, err
		}
		r.m.cursorSeq = seq
		// What was copied is not needed again (a crash before this copies
		// it again: the same rows, as the source has them then).
		if _, err := r.src().pool.Exec(ctx, q("move_changes_copied"), m.RetailerID, seqs); err != nil {
			return 0, fmt.Errorf("source: remove the copied changes from the log: %w", err)
		}
	}
	if err := r.src().pool.QueryRow(ctx, q("move_changes_left"), m.RetailerID).Scan(&left); err != nil {
		return 0, fmt.Errorf("source: the log left: %w", err)
	}
	return left, nil
}

// drain, with the source frozen: the log to its end, then the small tables
// whole, then the target's replicas caught up.
func (r *moveRunner) drain(ctx context.Context) error {
	for {
		left, err := r.catchUp(ctx)
		if err != nil {
			return err
		}
		if left == 0 {
			break
		}
		if r.m, err = r.s.loadMove(ctx, r.m.ID); err != nil {
			return err
		}
	}
	m := r.m
	err := r.onTarget(ctx, func(tx pgx.Tx) error {
		for _, t := range moveSmallTables {
			if _, err := tx.Exec(ctx, "DELETE FROM "+t+" WHERE retailer_id = $1", m.RetailerID); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			where := "retailer_id = " + literal(m.RetailerID)
			if t == "outbox" {
				where += " ORDER BY id" // new ids on the target, in the same order
			}
			if _, err := copyBetween(ctx, r.src().pool, tx, t, where); err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copy the retailer's tables: %w", err)
	}
	if rs := r.s.ShardReaders; m.ToShard < len(rs) && rs[m.ToShard] != nil {
		if err := rs[m.ToShard].WaitReplicas(ctx); err != nil {
			return fmt.Errorf("wait for the target's replicas: %w", err)
		}
	}
	return r.checkpoint(ctx, catalog.MoveSwitching, stepSwitch, "", "", m.cursorSeq, m.RowsCopied, m.RowsTotal)
}

// switchShard changes the retailer's shard and the move's step in one
// transaction of the control database.
func (r *moveRunner) switchShard(ctx context.Context) error {
	m := r.m
	err := pgx.BeginFunc(ctx, r.s.Control.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, q("move_switch_step"), m.ID, r.token)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return errLeaseLost
		}
		tag, err = tx.Exec(ctx, q("move_switch_retailer"), m.RetailerID, m.FromShard, m.ToShard)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("retailer %s is no longer on shard %d", m.RetailerID, m.FromShard)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("switch: %w", err)
	}
	r.s.forgetRoute(m.RetailerID)
	return nil
}

// abort undoes a move that has not switched: the source takes writes again
// (its record removed under the move lock), the target's copy goes. Each
// part is idempotent, and the move ends failed. A move whose switch
// committed is never undone, whatever its runner saw (move_begin_abort).
func (r *moveRunner) abort(ctx context.Context, why string) error {
	m := r.m
	if r.m.Step != stepAbort {
		var step string
		err := r.s.Control.pool.QueryRow(ctx, q("move_begin_abort"), m.ID, r.token, why, r.o.Lease.Seconds()).Scan(&step)
		if errors.Is(err, pgx.ErrNoRows) {
			var switched bool
			if err := r.s.Control.pool.QueryRow(ctx, q("move_switched"), m.ID).Scan(&switched); err != nil {
				return fmt.Errorf("undo: %w", err)
			}
			if switched {
				// Its switch committed (its runner saw it fail: the answer
				// lost): the retailer lives on the target, the move only
				// goes forward.
				return errors.New("not undone: the move has switched, it goes on from its checkpoint")
			}
			return errLeaseLost
		}
		if err != nil {
			return fmt.Errorf("undo: %w", err)
		}
		r.m.Step = stepAbort
	}
	if err := r.onSource(ctx, true, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("move_unmark"), m.RetailerID, m.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q("move_changes_prune"), m.RetailerID)
		return err
	}); err != nil {
		return fmt.Errorf("source: take writes again: %w", err)
	}
	// The target's record first: its removal waits for a stale runner's
	// copy transaction still open (it holds the record FOR UPDATE) and
	// fences out any later one, so no copied row lands after the removal.
	if _, err := r.dst().pool.Exec(ctx, q("move_unmark"), m.RetailerID, m.ID); err != nil {
		return fmt.Errorf("target: remove its record: %w", err)
	}
	if err := r.removeAll(ctx, r.dst()); err != nil {
		return fmt.Errorf("target: remove the copy: %w", err)
	}
	return r.end(ctx, catalog.MoveFailed, stepAbort, why)
}

// removeAll removes every row of the retailer on sh, a batch a
// transaction, the lease renewed between batches (a runner that lost it
// stops: errLeaseLost).
func (r *moveRunner) removeAll(ctx context.Context, sh *Shard) error {
	for {
		more, err := r.removeRows(ctx, sh)
		if err != nil || !more {
			return err
		}
		if err := r.renew(ctx); err != nil {
			return err
		}
	}
}

// removeRows removes up to a batch of the retailer's rows of each table on
// sh, passing the guard; more when some are left.
func (r *moveRunner) removeRows(ctx context.Context, sh *Shard) (more bool, err error) {
	tables := append(append([]string(nil), moveAllTables...), "move_changes")
	err = pgx.BeginFunc(ctx, sh.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("move_bypass"), r.m.ID); err != nil {
			return err
		}
		for _, t := range tables {
			tag, err := tx.Exec(ctx, "DELETE FROM "+t+" WHERE ctid = ANY (ARRAY(SELECT ctid FROM "+t+" WHERE retailer_id = $1 LIMIT $2))",
				r.m.RetailerID, r.o.Batch)
			if err != nil {
				return fmt.Errorf("%s: %w", t, err)
			}
			more = more || tag.RowsAffected() == int64(r.o.Batch)
		}
		return nil
	})
	return more, err
}

// copyBetween COPYs the rows of table on src that where selects (SQL with
// its values written in: COPY takes no parameters) into the same table in
// tx, in PostgreSQL's binary format (both shards run the same server and
// migrations): the values arrive exactly as they left. The outbox's rows
// get new ids on the target.
func copyBetween(ctx context.Context, src *pgxpool.Pool, tx pgx.Tx, table, where string) (int64, error) {
	cols, err := tableColumns(ctx, tx, table)
	if err != nil {
		return 0, err
	}
	if table == "outbox" {
		cols = cols[1:] // id
	}
	list := strings.Join(cols, ", ")
	conn, err := src.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		_, err := conn.Conn().PgConn().CopyTo(ctx, pw, "COPY (SELECT "+list+" FROM "+table+" WHERE "+where+") TO STDOUT (FORMAT binary)")
		pw.CloseWithError(err)
		done <- err
	}()
	tag, err := tx.Conn().PgConn().CopyFrom(ctx, pr, "COPY "+table+" ("+list+") FROM STDIN (FORMAT binary)")
	pr.CloseWithError(errors.New("copy ended"))
	srcErr := <-done
	if srcErr != nil {
		return 0, fmt.Errorf("read %s from the source: %w", table, srcErr)
	}
	if err != nil {
		return 0, fmt.Errorf("write %s on the target: %w", table, err)
	}
	return tag.RowsAffected(), nil
}

func tableColumns(ctx context.Context, tx pgx.Tx, table string) ([]string, error) {
	rows, err := tx.Query(ctx, q("move_columns"), table)
	if err != nil {
		return nil, err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("table %s has no columns this role may see", table)
	}
	for i, c := range cols {
		cols[i] = pgx.Identifier{c}.Sanitize()
	}
	return cols, nil
}

// literal is s as an SQL string literal (an escape string: whatever
// standard_conforming_strings says).
func literal(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// textArray is ss as an SQL text[] literal.
func textArray(ss []string) string {
	return literal(string(appendTextArray(nil, ss))) + "::text[]"
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
