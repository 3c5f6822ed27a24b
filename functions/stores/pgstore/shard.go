package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// Shard is one shard database: generations, the fenced catalog and the
// outbox of change events of the retailers it holds.
type Shard struct {
	pool *pgxpool.Pool
}

// NewShard wraps a pool on a shard database.
func NewShard(pool *pgxpool.Pool) *Shard { return &Shard{pool: pool} }

// Pool is the underlying pool.
func (s *Shard) Pool() *pgxpool.Pool { return s.pool }

// ReserveGeneration reserves the retailer's next generation, in increasing
// order, and records it as awaiting its upload until expires. It supersedes
// the retailer's older slots still awaiting their upload. With perHour > 0,
// at most perHour reservations are made per rolling hour: one more is
// catalog.ErrRateLimited, with the time until a slot frees. Both checks,
// the hour's count and the offboarding (catalog.ErrConflict
// retailer_offboarded), are made under the retailer's fence row, in the
// transaction that reserves (I12).
func (s *Shard) ReserveGeneration(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	return s.reserve(ctx, retailerID, format, expires, perHour, "insert_generation")
}

// reserve is ReserveGeneration with the query that inserts the slot.
func (s *Shard) reserve(ctx context.Context, retailerID, format string, expires time.Time, perHour int, insert string) (int64, error) {
	var gen int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockForReservation(ctx, tx, retailerID, perHour); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q("reserve_generation"), retailerID).Scan(&gen); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q(insert), retailerID, gen, format, keys.Upload(retailerID, gen), expires); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q("supersede_awaiting"), retailerID, gen)
		return err
	})
	var de *catalog.Error
	if errors.As(err, &de) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("reserve generation for %s: %w", retailerID, err)
	}
	return gen, nil
}

// Rollback reserves the retailer's next generation as a rollback to
// source (DESIGN 13): mode rollback, its content source's upload at the
// version source read (none: the empty catalog), received now, so that its
// diff job can be sent at once; older slots still awaiting their upload
// are superseded by it, as by any reservation. It is a reservation of the
// retailer's: with perHour > 0, one over perHour in the rolling hour is
// catalog.ErrRateLimited. Decided in one transaction under the fence row:
// source not applied is catalog.ErrNotFound generation_not_applied, an
// offboarded retailer retailer_offboarded.
func (s *Shard) Rollback(ctx context.Context, retailerID string, source int64, perHour int) (int64, error) {
	var gen int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockForReservation(ctx, tx, retailerID, perHour); err != nil {
			return err
		}
		var format, key string
		var etag *string
		err := tx.QueryRow(ctx, q("rollback_source"), retailerID, source).Scan(&format, &key, &etag)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.NotApplied(retailerID, source)
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q("reserve_rollback"), retailerID, source, format, key, etag).Scan(&gen); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, q("supersede_awaiting"), retailerID, gen)
		return err
	})
	var de *catalog.Error
	if errors.As(err, &de) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("roll %s back to generation %d: %w", retailerID, source, err)
	}
	return gen, nil
}

// lockForReservation takes the retailer's fence row for a reservation in
// tx (lock_reservations) and refuses it there: an offboarded retailer
// (retailer_offboarded), or, with perHour > 0, a rolling hour that holds
// perHour reservations already (catalog.ErrRateLimited).
func lockForReservation(ctx context.Context, tx pgx.Tx, retailerID string, perHour int) error {
	if _, err := tx.Exec(ctx, q("ensure_retailer_state"), retailerID); err != nil {
		return err
	}
	var reserved, offboarding int64
	if err := tx.QueryRow(ctx, q("lock_reservations"), retailerID).Scan(&reserved, &offboarding); err != nil {
		return err
	}
	if offboarding > 0 {
		return catalog.Offboarded(retailerID)
	}
	if perHour <= 0 {
		return nil
	}
	var wait float64
	err := tx.QueryRow(ctx, q("reservation_window_full"), retailerID, perHour).Scan(&wait)
	if err == nil {
		return catalog.TooManyReservations(retailerID, perHour, time.Duration(wait*float64(time.Second)))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// MarkArrived records that gen's upload arrived at (the S3 event's time):
// a slot awaiting it becomes received, unless the upload came more than
// grace after the slot's expiry (then the slot ends expired). Once the
// retailer is offboarded (checked under its fence row, in this
// transaction), an older slot's upload ends superseded by the offboarding
// instead; the offboarding's own slot never expires. It returns the
// generation's state after; catalog.ErrNotFound when never reserved.
func (s *Shard) MarkArrived(ctx context.Context, retailerID string, gen int64, at time.Time, grace time.Duration) (catalog.State, error) {
	var state string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var offboarding int64
		err := tx.QueryRow(ctx, q("lock_state_for_arrival"), retailerID).Scan(&offboarding)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return tx.QueryRow(ctx, q("mark_arrived"), retailerID, gen, at, grace, offboarding).Scan(&state)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		st, err := s.Generation(ctx, retailerID, gen)
		return st.State, err
	}
	if err != nil {
		return "", fmt.Errorf("mark arrival of %s/%d: %w", retailerID, gen, err)
	}
	return catalog.State(state), nil
}

// NewerArrival returns the newest generation after gen whose upload has
// arrived (0: none); when there is one and gen has not started applying,
// gen ends superseded by it (an older upload stops for a newer one at
// once, even before the newer one is read).
func (s *Shard) NewerArrival(ctx context.Context, retailerID string, gen int64) (int64, error) {
	var newer int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		newer, err = supersedeForNewerArrival(ctx, tx, retailerID, gen)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("newer arrival than %s/%d: %w", retailerID, gen, err)
	}
	return newer, nil
}

func supersedeForNewerArrival(ctx context.Context, tx pgx.Tx, retailerID string, gen int64) (int64, error) {
	var newer int64
	if err := tx.QueryRow(ctx, q("newer_arrived"), retailerID, gen).Scan(&newer); err != nil {
		return 0, err
	}
	if newer > 0 {
		if _, err := tx.Exec(ctx, q("supersede_not_started"), retailerID, gen, newer); err != nil {
			return 0, err
		}
	}
	return newer, nil
}

func scanStatus(row pgx.Row) (catalog.GenerationStatus, error) {
	var g catalog.GenerationStatus
	var state string
	var problems []byte
	err := row.Scan(&g.RetailerID, &g.Generation, &state, &g.Format, &g.ObjectKey, &g.UploadExpires, &g.CreatedAt,
		&g.ReceivedAt, &g.AppliedAt, &g.SupersededBy, &g.ErrorCode, &g.ErrorMessage, &g.ErrorLine,
		&g.Inserted, &g.Updated, &g.Deleted, &g.Unchanged, &g.Products, &g.ChunksTotal, &g.ChunksApplied, &g.Confirmed,
		&problems, &g.MoreProblems, &g.Mode, &g.SourceGeneration, &g.Undoes, &g.DryRun, &g.PlanPages, &g.PlanBaseline)
	g.State = catalog.State(state)
	if err == nil && problems != nil {
		err = json.Unmarshal(problems, &g.Problems)
	}
	return g, err
}

// Generation returns the status of one generation; catalog.ErrNotFound when it was never reserved.
func (s *Shard) Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error) {
	g, err := scanStatus(s.pool.QueryRow(ctx, q("select_generation"), retailerID, gen))
	if errors.Is(err, pgx.ErrNoRows) {
		return g, catalog.Errorf(catalog.ErrNotFound, "generation_not_found", "retailer %q has no generation %d", retailerID, gen)
	}
	if err != nil {
		return g, fmt.Errorf("get generation %s/%d: %w", retailerID, gen, err)
	}
	return g, nil
}

// Generations lists a retailer's generations, newest first.
func (s *Shard) Generations(ctx context.Context, retailerID string, limit int) ([]catalog.GenerationStatus, error) {
	return s.GenerationsBefore(ctx, retailerID, 0, limit)
}

// GenerationsBefore lists a retailer's generations older than before (0:
// from the newest), newest first: the pages of the snapshot list.
func (s *Shard) GenerationsBefore(ctx context.Context, retailerID string, before int64, limit int) ([]catalog.GenerationStatus, error) {
	if before <= 0 {
		before = math.MaxInt64
	}
	rows, err := s.pool.Query(ctx, q("list_generations"), retailerID, limit, before)
	if err != nil {
		return nil, fmt.Errorf("list generations of %s: %w", retailerID, err)
	}
	defer rows.Close()
	out := []catalog.GenerationStatus{}
	for rows.Next() {
		g, err := scanStatus(rows)
		if err != nil {
			return nil, fmt.Errorf("list generations of %s: %w", retailerID, err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

// Confirm marks a held generation confirmed. It is a conflict when the
// retailer is offboarded (retailer_offboarded: checked under the fence row
// FOR NO KEY UPDATE, which conflicts with the offboarding's, so a hold
// confirmed first is superseded by the offboarding and never applied), or
// when the generation is not held or is no longer the retailer's latest.
func (s *Shard) Confirm(ctx context.Context, retailerID string, gen int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var latest, offboarding int64
		if err := tx.QueryRow(ctx, q("lock_state_for_confirm"), retailerID).Scan(&latest, &offboarding); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return catalog.Errorf(catalog.ErrNotFound, "generation_not_found", "retailer %q has no generation %d", retailerID, gen)
			}
			return fmt.Errorf("confirm %s/%d: %w", retailerID, gen, err)
		}
		if offboarding > 0 {
			return catalog.Offboarded(retailerID)
		}
		var state, pinned string
		var confirmed bool
		err := tx.QueryRow(ctx, q("select_generation_for_update"), retailerID, gen).Scan(&state, &confirmed, &pinned)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.Errorf(catalog.ErrNotFound, "generation_not_found", "retailer %q has no generation %d", retailerID, gen)
		}
		if err != nil {
			return fmt.Errorf("confirm %s/%d: %w", retailerID, gen, err)
		}
		if catalog.State(state) != catalog.StateHeld {
			return catalog.Errorf(catalog.ErrConflict, "not_held", "generation %d is %s, not held", gen, state)
		}
		var newer int64
		if err := tx.QueryRow(ctx, q("newer_arrived"), retailerID, gen).Scan(&newer); err != nil {
			return err
		}
		if latest > gen || newer > 0 {
			return catalog.Errorf(catalog.ErrConflict, "not_latest", "generation %d is no longer the latest: generation %d arrived", gen, max(latest, newer))
		}
		_, err = tx.Exec(ctx, q("confirm_generation"), retailerID, gen)
		return err
	})
}

// BeginDiff records that the upload of gen has arrived and decides whether to
// read it: an upload older than the newest one that took over is superseded
// (even when it arrives last); duplicates of finished or held work do
// nothing. Older generations keep applying while this one is read: only a
// snapshot that reads whole and is not held takes over (TakeOver), so a bad
// or held upload never stops good work (I7, I8).
//
// etag is the version of the object the event announces ("" when unknown,
// as in a re-sent job). The first version seen is pinned for the
// generation; another version is refused: ignored while the pinned one is
// being diffed or applied (that run reads only the pinned version and
// rejects the generation itself if it is gone), and a held generation,
// which can then never be confirmed as reviewed, is rejected
// (upload_changed).
func (s *Shard) BeginDiff(ctx context.Context, retailerID string, gen int64, etag string) (catalog.DiffDecision, error) {
	var d catalog.DiffDecision
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		d = catalog.DiffDecision{}
		var latest, applied, appliedProducts, offboarding int64
		err := tx.QueryRow(ctx, q("lock_state_for_update"), retailerID).Scan(&latest, &applied, &appliedProducts, &offboarding)
		if errors.Is(err, pgx.ErrNoRows) {
			d.Reason = "retailer has no reserved generation on this shard"
			return nil
		}
		if err != nil {
			return err
		}
		var state, pinned string
		err = tx.QueryRow(ctx, q("select_generation_for_update"), retailerID, gen).Scan(&state, &d.Confirmed, &pinned)
		if errors.Is(err, pgx.ErrNoRows) {
			d.Reason = "generation was never reserved"
			return nil
		}
		if err != nil {
			return err
		}
		st := catalog.State(state)
		if st.Terminal() {
			d.Reason = "generation is " + state
			return nil
		}
		if err := tx.QueryRow(ctx, q("select_dry_run"), retailerID, gen).Scan(&d.DryRun); err != nil {
			return err
		}
		if d.DryRun {
			// A preview (DESIGN 13): read against the applied generation
			// as it is now; it never takes over, is never superseded and
			// stops nothing, so none of the checks below apply to it.
			return beginDryRun(ctx, tx, &d, retailerID, gen, etag, pinned, st, applied, appliedProducts)
		}
		if offboarding > 0 && gen != offboarding {
			// The retailer is offboarded: nothing but its offboarding is
			// read (an older generation was superseded by it already; this
			// is the backstop).
			if _, err := tx.Exec(ctx, q("mark_superseded"), retailerID, gen, offboarding); err != nil {
				return err
			}
			d.Reason = fmt.Sprintf("the retailer is offboarded: superseded by its offboarding, generation %d", offboarding)
			return nil
		}
		if etag != "" && pinned != "" && etag != pinned {
			d.Reason = fmt.Sprintf("another version of the upload (%s) refused: the generation holds %s", etag, pinned)
			if st == catalog.StateHeld {
				d.Undo, err = rejectTx(ctx, tx, retailerID, gen, catalog.Rejection{Code: catalog.CodeUploadChanged,
					Message: "the held upload was replaced after it was read; upload it again to a new generation"})
				return err
			}
			return nil
		}
		if st == catalog.StateHeld && !d.Confirmed {
			d.Reason = "generation is held, awaiting confirmation"
			return nil
		}
		firstArrival := st == catalog.StateAwaitingUpload || st == catalog.StateReceived
		if latest > gen {
			if _, err := tx.Exec(ctx, q("mark_superseded"), retailerID, gen, latest); err != nil {
				return err
			}
			d.Reason = fmt.Sprintf("superseded by generation %d", latest)
			return nil
		}
		if st != catalog.StateApplying {
			// A newer upload has arrived: this one stops at once, before
			// a first pass that could only be superseded.
			newer, err := supersedeForNewerArrival(ctx, tx, retailerID, gen)
			if err != nil {
				return err
			}
			if newer > 0 {
				d.Reason = fmt.Sprintf("superseded by generation %d, which has arrived", newer)
				return nil
			}
		}
		d.Resumed = st == catalog.StateApplying
		if d.Mode, d.Source, err = generationSource(ctx, tx, retailerID, gen); err != nil {
			return err
		}
		if older, err := deltaWaitsFor(ctx, tx, retailerID, gen, d.Mode); err != nil {
			return err
		} else if older > 0 && st != catalog.StateApplying {
			// It stays received; the end of the older one starts it
			// (WaitingDelta), the sweeper's re-drive at the latest.
			d.Reason = fmt.Sprintf("a delta waits for generation %d to end", older)
			return nil
		}
		if pinned == "" && etag != "" {
			if err := tx.QueryRow(ctx, q("pin_upload"), retailerID, gen, etag).Scan(&pinned); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, q("mark_diffing"), retailerID, gen); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q("start_diff_run"), retailerID, gen).Scan(&d.Format, &d.ObjectKey, &d.Attempt, &d.Undoes, &d.Offboarding, &d.LastFailure); err != nil {
			return err
		}
		if d.Offboarding {
			d.ObjectKey = "" // the empty catalog, whatever the bucket holds
		}
		if firstArrival && d.Undoes == 0 {
			// The file's first arrival: one upload (DESIGN 10), counted
			// once; an undo is the pipeline's own, not an upload.
			if err := addShardUsage(ctx, tx, retailerID, usage.Usage{Uploads: 1}); err != nil {
				return err
			}
		}
		if d.BaselineNames, err = attributeNames(ctx, tx, retailerID, applied); err != nil {
			return err
		}
		d.Proceed, d.Baseline, d.BaselineProducts, d.ETag = true, applied, appliedProducts, pinned
		return nil
	})
	if err != nil {
		return d, fmt.Errorf("begin diff %s/%d: %w", retailerID, gen, err)
	}
	return d, nil
}

// attributeNames reads a generation's attribute names (nil: unknown, or gen 0).
func attributeNames(ctx context.Context, tx pgx.Tx, retailerID string, gen int64) ([]string, error) {
	if gen == 0 {
		return nil, nil
	}
	var names []string
	err := tx.QueryRow(ctx, q("attribute_names"), retailerID, gen).Scan(&names)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return names, err
}

// ReserveOffboarding reserves, once per retailer, the generation that
// removes its catalog: an empty snapshot confirmed in advance (its upload
// is written by the caller), past any reservation limit. Offboarding is
// final and decided here, on the shard, in one transaction under the
// retailer's fence row held FOR UPDATE (which waits for every transaction
// holding the row, applies in flight included): it records the offboarding
// in the retailer's state, which raises the fence to the offboarding
// generation (no chunk of an older generation writes from this commit), and
// supersedes every older generation that has not finished. Every later
// reservation, confirmation, arrival, diff and undo of the retailer checks
// that record in its own transaction under the same row and is refused or
// ends superseded by the offboarding. Offboarding again returns the same
// generation and changes nothing.
func (s *Shard) ReserveOffboarding(ctx context.Context, retailerID string, expires time.Time) (int64, error) {
	var gen int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("ensure_retailer_state"), retailerID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q("lock_state_for_offboarding"), retailerID).Scan(&gen); err != nil {
			return err
		}
		if gen > 0 {
			return nil // recorded: offboarding again changes nothing
		}
		// An offboarding generation reserved before the shard recorded
		// offboardings (migration 0082) is taken as it is unless a
		// reservation beat it; then it stays the superseded generation it
		// is, and a new one takes its place.
		var beaten bool
		err := tx.QueryRow(ctx, q("offboarding_generation"), retailerID).Scan(&gen, &beaten)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil && beaten {
			if _, err := tx.Exec(ctx, q("retire_offboarding"), retailerID); err != nil {
				return err
			}
		}
		if errors.Is(err, pgx.ErrNoRows) || beaten {
			if err := tx.QueryRow(ctx, q("reserve_generation"), retailerID).Scan(&gen); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, q("insert_offboarding_generation"), retailerID, gen, keys.Upload(retailerID, gen), expires); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, q("record_offboarding"), retailerID, gen); err != nil {
			return err
		}
		// Every older generation that has not finished stops here,
		// superseded by the offboarding (an unused slot past its expiry
		// ends expired, as at any reservation): its chunks find the fence
		// raised, its diff and its upload stop at the offboarding.
		if _, err := tx.Exec(ctx, q("supersede_awaiting"), retailerID, gen); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, q("supersede_older"), retailerID, gen)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reserve the offboarding of %s: %w", retailerID, err)
	}
	return gen, nil
}

// PinUpload records etag as the version of gen's upload unless one is
// pinned already, and returns the pinned version.
func (s *Shard) PinUpload(ctx context.Context, retailerID string, gen int64, etag string) (string, error) {
	var pinned string
	if err := s.pool.QueryRow(ctx, q("pin_upload"), retailerID, gen, etag).Scan(&pinned); err != nil {
		return "", fmt.Errorf("pin upload of %s/%d: %w", retailerID, gen, err)
	}
	return pinned, nil
}

// TakeOver makes gen, whose snapshot has been read whole and is not held,
// the retailer's latest: under the fence row's FOR UPDATE lock (which waits
// for every apply transaction in flight) it raises latest_generation to gen,
// marks every older unfinished generation superseded, and returns the
// baseline and the stopped generations newer than it whose chunks may have
// been applied (I5). catalog.ErrSuperseded when a newer generation took over first.
func (s *Shard) TakeOver(ctx context.Context, retailerID string, gen int64) (catalog.DiffDecision, error) {
	var d catalog.DiffDecision
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		d = catalog.DiffDecision{}
		var latest, offboarding int64
		if err := tx.QueryRow(ctx, q("lock_state_for_update"), retailerID).Scan(&latest, &d.Baseline, &d.BaselineProducts, &offboarding); err != nil {
			return err
		}
		var state, pinned string
		if err := tx.QueryRow(ctx, q("select_generation_for_update"), retailerID, gen).Scan(&state, &d.Confirmed, &pinned); err != nil {
			return err
		}
		supersededBy, superseded := latest, latest > gen
		if offboarding > 0 && gen != offboarding {
			// Once offboarded, only the offboarding takes over.
			supersededBy, superseded = offboarding, true
		}
		if superseded || (state != string(catalog.StateDiffing) && state != string(catalog.StateApplying)) {
			if _, err := tx.Exec(ctx, q("mark_superseded"), retailerID, gen, supersededBy); err != nil {
				return err
			}
			return catalog.ErrSuperseded
		}
		if state == string(catalog.StateDiffing) {
			if newer, err := supersedeForNewerArrival(ctx, tx, retailerID, gen); err != nil {
				return err
			} else if newer > 0 {
				return catalog.ErrSuperseded
			}
		}
		if _, err := tx.Exec(ctx, q("raise_fence"), retailerID, gen); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q("supersede_older"), retailerID, gen); err != nil {
			return err
		}
		var err error
		if d.BaselineNames, err = attributeNames(ctx, tx, retailerID, d.Baseline); err != nil {
			return err
		}
		if d.Baseline > 0 {
			if err := tx.QueryRow(ctx, q("object_key"), retailerID, d.Baseline).Scan(&d.BaselineObjectKey); err != nil {
				return err
			}
		}
		links, err := chainTx(ctx, tx, retailerID, d.Baseline)
		if err != nil {
			return fmt.Errorf("the baseline's chain: %w", err)
		}
		d.BaselineKeys = chainKeys(links)
		rows, err := tx.Query(ctx, q("stopped_generations"), retailerID, d.Baseline, gen)
		if err != nil {
			return err
		}
		d.Stopped, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		d.Proceed = err == nil
		return err
	})
	if err != nil && !errors.Is(err, catalog.ErrSuperseded) {
		return d, fmt.Errorf("take over %s/%d: %w", retailerID, gen, err)
	}
	return d, err
}

// Reject ends a generation that cannot be finished, from any unfinished
// state: a snapshot that cannot be read, with its problems (I7), or one
// that failed (catalog.FailureCodes). When the catalog would then keep a
// mix of generations (the rejected one, or one it stopped, may have written
// rows, and no newer upload is coming to repair them), the same transaction
// reserves the rollback that returns it to the applied generation (I10):
// its diff job is the caller's to send. An offboarding is never given up
// (nothing changes; Undo.Rejected is false), nor is a finished generation.
func (s *Shard) Reject(ctx context.Context, retailerID string, gen int64, rej catalog.Rejection) (catalog.Undo, error) {
	var undo catalog.Undo
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var latest int64
		if err := tx.QueryRow(ctx, q("lock_state_for_reject"), retailerID).Scan(&latest); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil // never reserved: nothing to reject
			}
			return err
		}
		var err error
		undo, err = rejectTx(ctx, tx, retailerID, gen, rej)
		return err
	})
	if err != nil {
		return catalog.Undo{}, fmt.Errorf("reject %s/%d: %w", retailerID, gen, err)
	}
	return undo, nil
}

// unfinishedStates are the states reject_generation moves from.
var unfinishedStates = []catalog.State{catalog.StateReceived, catalog.StateDiffing, catalog.StateApplying, catalog.StateHeld}

// rejectTx is Reject in tx, whose caller holds the retailer's fence row
// (FOR NO KEY UPDATE or stronger).
func rejectTx(ctx context.Context, tx pgx.Tx, retailerID string, gen int64, rej catalog.Rejection) (catalog.Undo, error) {
	var state string
	var offboarding bool
	var undoes int64
	var dryRun bool
	err := tx.QueryRow(ctx, q("select_generation_for_reject"), retailerID, gen).Scan(&state, &offboarding, &undoes, &dryRun)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Undo{}, nil
	}
	if err != nil {
		return catalog.Undo{}, err
	}
	if offboarding || !slices.Contains(unfinishedStates, catalog.State(state)) {
		return catalog.Undo{}, nil
	}
	var undo catalog.Undo
	if !dryRun { // a dry run wrote nothing: there is nothing to undo
		if undo, err = reserveUndoIfNeeded(ctx, tx, retailerID, gen); err != nil {
			return undo, err
		}
	}
	if undo.Generation > 0 {
		rej.Message = fmt.Sprintf("%s; generation %d returns the catalog to %s", rej.Message, undo.Generation, sourceName(undo.Source))
	}
	if err := execReject(ctx, tx, retailerID, gen, rej); err != nil {
		return undo, err
	}
	undo.Rejected = true
	return undo, nil
}

// sourceName names the generation an undo returns the catalog to.
func sourceName(gen int64) string {
	if gen == 0 {
		return "the empty catalog (no generation was applied before)"
	}
	return fmt.Sprintf("generation %d, the last applied", gen)
}

// reserveUndoIfNeeded reserves, in tx (whose caller holds the fence row),
// the rollback that returns the catalog to the applied generation when it
// would otherwise keep a mix once rejecting (0: nothing is being rejected)
// is final (undo_needed). Older slots still awaiting their upload are
// superseded by it, as by any reservation.
func reserveUndoIfNeeded(ctx context.Context, tx pgx.Tx, retailerID string, rejecting int64) (catalog.Undo, error) {
	var needed bool
	err := tx.QueryRow(ctx, q("undo_needed"), retailerID, rejecting).Scan(&needed)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !needed) {
		return catalog.Undo{}, nil
	}
	if err != nil {
		return catalog.Undo{}, fmt.Errorf("decide the undo: %w", err)
	}
	var undo catalog.Undo
	if err := tx.QueryRow(ctx, q("reserve_undo"), retailerID, rejecting).Scan(&undo.Generation, &undo.Source); err != nil {
		return catalog.Undo{}, fmt.Errorf("reserve the undo: %w", err)
	}
	if _, err := tx.Exec(ctx, q("supersede_awaiting"), retailerID, undo.Generation); err != nil {
		return catalog.Undo{}, fmt.Errorf("reserve the undo: %w", err)
	}
	return undo, nil
}

// execReject records a rejection; its problems are its list, or its one
// problem when it has no list. Every message is bounded and made fit for a
// text column (catalog.BoundMessage), so that a rejection can always be
// recorded whatever the file held, and the status stays within its bound.
func execReject(ctx context.Context, tx pgx.Tx, retailerID string, gen int64, rej catalog.Rejection) error {
	problems := rej.Problems
	if len(problems) == 0 {
		problems = []catalog.Problem{{Code: rej.Code, Line: rej.Line, Message: rej.Message}}
	}
	if len(problems) > catalog.MaxProblems {
		problems, rej.More = problems[:catalog.MaxProblems], true
	}
	bounded := make([]catalog.Problem, len(problems))
	for i, p := range problems {
		bounded[i] = catalog.Problem{Code: p.Code, Line: p.Line, Message: catalog.BoundMessage(p.Message)}
	}
	list, err := json.Marshal(bounded)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, q("reject_generation"), retailerID, gen, rej.Code, catalog.BoundMessage(rej.Message), rej.Line, list, rej.More)
	return err
}

// Hold parks a generation until the retailer confirms it (I8). A held
// upload waits on its retailer: when it was the one coming to repair what
// a rejected generation left (I10), the same transaction reserves the undo
// (see Reject), whose diff job is the caller's to send.
func (s *Shard) Hold(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts) (catalog.Undo, error) {
	var undo catalog.Undo
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		undo = catalog.Undo{}
		var latest int64
		if err := tx.QueryRow(ctx, q("lock_state_for_reject"), retailerID).Scan(&latest); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q("hold_generation"), retailerID, gen, code, catalog.BoundMessage(message),
			c.Inserted, c.Updated, c.Deleted, c.Unchanged, c.Products, c.AttributeNames)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		// The snapshot was read whole (its confirmation is not counted again).
		if err := addShardUsage(ctx, tx, retailerID, usage.Usage{BytesUploaded: c.Bytes, RowsReceived: c.Products}); err != nil {
			return err
		}
		undo, err = reserveUndoIfNeeded(ctx, tx, retailerID, 0)
		return err
	})
	if err != nil {
		return catalog.Undo{}, fmt.Errorf("hold %s/%d: %w", retailerID, gen, err)
	}
	return undo, nil
}

// RecordDiffFailure records why a diff run of gen failed (bounded): the
// message of its diff_failed rejection, should every attempt fail.
func (s *Shard) RecordDiffFailure(ctx context.Context, retailerID string, gen int64, reason string) error {
	if _, err := s.pool.Exec(ctx, q("record_diff_failure"), retailerID, gen, catalog.BoundMessage(reason)); err != nil {
		return fmt.Errorf("record the diff failure of %s/%d: %w", retailerID, gen, err)
	}
	return nil
}

// StartApplying records, under the fence, that gen's index is written and its
// chunks are about to be sent. With zero chunks the generation is applied at
// once. catalog.ErrSuperseded when a newer generation arrived meanwhile.
func (s *Shard) StartApplying(ctx context.Context, retailerID string, gen int64, c catalog.Counts, chunks int) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var latest int64
		if err := tx.QueryRow(ctx, q("lock_state_for_apply"), retailerID).Scan(&latest); err != nil {
			return err
		}
		if latest != gen {
			return catalog.ErrSuperseded
		}
		var state, pinned string
		var confirmed bool
		if err := tx.QueryRow(ctx, q("select_generation_for_update"), retailerID, gen).Scan(&state, &confirmed, &pinned); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return catalog.ErrSuperseded
			}
			return err
		}
		tag, err := tx.Exec(ctx, q("start_applying"), retailerID, gen,
			c.Inserted, c.Updated, c.Deleted, c.Unchanged, c.Products, chunks, c.AttributeNames)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return catalog.ErrSuperseded
		}
		if confirmed {
			// A held plan is what the confirmation changes only against
			// the baseline it was computed on (DESIGN 13).
			if _, err := tx.Exec(ctx, q("drop_stale_plan"), retailerID, gen); err != nil {
				return err
			}
		}
		if catalog.State(state) == catalog.StateDiffing {
			// The diff's state change, once per generation (a re-run of an
			// applying generation counts nothing): its changes, and what it
			// read unless a hold counted that before the confirmation.
			u := usage.Usage{RowsInserted: c.Inserted, RowsUpdated: c.Updated, RowsDeleted: c.Deleted}
			if !confirmed {
				u.BytesUploaded, u.RowsReceived = c.Bytes, c.Products
			}
			if err := addShardUsage(ctx, tx, retailerID, u); err != nil {
				return err
			}
		}
		if chunks == 0 {
			if c.EmptyPlan {
				if _, err := tx.Exec(ctx, q("record_empty_plan"), retailerID, gen); err != nil {
					return err
				}
			}
			return finishGeneration(ctx, tx, retailerID, gen, c.Products)
		}
		return nil
	})
	if err != nil && !errors.Is(err, catalog.ErrSuperseded) {
		return fmt.Errorf("start applying %s/%d: %w", retailerID, gen, err)
	}
	return err
}

func finishGeneration(ctx context.Context, tx pgx.Tx, retailerID string, gen, products int64) error {
	if _, err := tx.Exec(ctx, q("mark_applied"), retailerID, gen); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, q("advance_baseline"), retailerID, gen, products)
	return err
}

// IsLatest reports whether gen is still the retailer's newest arrived generation.
func (s *Shard) IsLatest(ctx context.Context, retailerID string, gen int64) (bool, error) {
	var latest int64
	if err := s.pool.QueryRow(ctx, q("select_latest"), retailerID).Scan(&latest); err != nil {
		return false, fmt.Errorf("latest generation of %s: %w", retailerID, err)
	}
	return latest <= gen, nil
}

// ApplyChunk writes one chunk of gen in one transaction: the fence check
// (I2, I4), the chunk count (exactly once), the fenced upserts and deletes,
// the chunk's change event (one outbox row, a claim check on the chunk
// object m.Key) and, for the last chunk, the generation's completion and the
// new baseline (whose catalog.snapshot.applied event the generations
// trigger writes).
func (s *Shard) ApplyChunk(ctx context.Context, m message.ChunkMessage, ops []message.ChunkOp) (catalog.ApplyResult, error) {
	retailerID, gen, seq := m.RetailerID, m.Generation, m.Seq
	var res catalog.ApplyResult
	staged, err := stageOps(ops)
	if err != nil {
		return res, fmt.Errorf("apply chunk %d of %s/%d: %w", seq, retailerID, gen, err)
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = catalog.ApplyResult{}
		var latest int64
		var insertsOnly bool
		err := tx.QueryRow(ctx, q("lock_state_for_chunk"), retailerID, gen).Scan(&latest, &insertsOnly)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && latest > gen) {
			res.Outcome = catalog.ChunkSuperseded
			return nil
		}
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, q("count_applied_chunk"), retailerID, gen, seq)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			res.Outcome = catalog.ChunkDuplicate
			return nil
		}
		written, unchanged, err := writeChunk(ctx, tx, retailerID, gen, staged, insertsOnly)
		if err != nil {
			return err
		}
		res.Written = written
		// The chunk's change event (DESIGN 8): its outbox row, in this
		// transaction. Written even when nothing changed (no event is
		// published then): the relay leaves an empty change object, so a
		// replay knows.
		if _, err := tx.Exec(ctx, q("insert_change_event"), retailerID, gen, seq, m.Key, m.SHA256, res.Written, unchanged); err != nil {
			return fmt.Errorf("change event: %w", err)
		}
		var applied, total int
		var products int64
		err = tx.QueryRow(ctx, q("count_chunk_progress"), retailerID, gen).Scan(&applied, &total, &products)
		if errors.Is(err, pgx.ErrNoRows) {
			// The generation is not applying: superseded, or never started.
			return errRollbackSuperseded
		}
		if err != nil {
			return err
		}
		// Counted with the chunk, so a duplicate delivery counts nothing:
		// the chunk, its product rows and their outbox rows.
		if err := addShardUsage(ctx, tx, retailerID, usage.Usage{Chunks: 1, DBRowsWritten: 2 * res.Written}); err != nil {
			return err
		}
		if applied >= total {
			res.GenerationApplied = true
			return finishGeneration(ctx, tx, retailerID, gen, products)
		}
		return nil
	})
	if errors.Is(err, errRollbackSuperseded) {
		return catalog.ApplyResult{Outcome: catalog.ChunkSuperseded}, nil
	}
	if refusedContent(err) {
		return res, fmt.Errorf("apply chunk %d of %s/%d: %w: %w", seq, retailerID, gen, catalog.ErrRefused, err)
	}
	if err != nil {
		return res, fmt.Errorf("apply chunk %d of %s/%d: %w", seq, retailerID, gen, err)
	}
	return res, nil
}

// refusedContent reports whether err is the database refusing what a
// statement writes, which another try cannot change: a data exception
// (class 22: a value jsonb cannot hold, out of range...), an integrity
// constraint (class 23: a CHECK, NOT NULL..., but not a unique violation)
// or a program limit (class 54:
// a value too large). Connections, locks, serialization and the rest are
// worth a retry.
func refusedContent(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	if pgErr.Code == "23505" {
		return false // a unique violation is a race with another write
	}
	switch pgErr.Code[:2] {
	case "22", "23", "54":
		return true
	}
	return false
}

var errRollbackSuperseded = errors.New("generation not applying")

// splitOps splits ops into the upserts' columns and the deleted ids (the
// reconciliation's repairs write them with arrays).
func splitOps(ops []message.ChunkOp) (ids, attrs []string, hashes [][]byte, deletes []string, err error) {
	ids, attrs, hashes = make([]string, 0, len(ops)), make([]string, 0, len(ops)), make([][]byte, 0, len(ops))
	for _, op := range ops {
		switch op.Op {
		case message.OpUpsert:
			h, err := decodeHash(op.Hash)
			if err != nil {
				return nil, nil, nil, nil, fmt.Errorf("product %q: %w", op.ProductID, err)
			}
			ids = append(ids, op.ProductID)
			attrs = append(attrs, string(op.Attributes))
			hashes = append(hashes, h)
		case message.OpDelete:
			deletes = append(deletes, op.ProductID)
		}
	}
	return ids, attrs, hashes, deletes, nil
}

// Unfinished lists generations still diffing or applying, or confirmed holds.
func (s *Shard) Unfinished(ctx context.Context) ([]catalog.UnfinishedGeneration, error) {
	rows, err := s.pool.Query(ctx, q("unfinished_generations"))
	if err != nil {
		return nil, fmt.Errorf("list unfinished generations: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[catalog.UnfinishedGeneration])
}
