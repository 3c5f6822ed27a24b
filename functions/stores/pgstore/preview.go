package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/finance/usage"
)

// ReserveDryRun reserves the retailer's next generation as a dry run
// (DESIGN 13): a slot like any other, counted against perHour and refused
// for an offboarded retailer as ReserveGeneration's, that supersedes no
// older slot (a preview stops nothing).
func (s *Shard) ReserveDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	return s.reserveDryRun(ctx, retailerID, format, expires, perHour, "insert_dry_run")
}

// ReserveDeltaDryRun reserves the retailer's next generation as the dry
// run of a delta (DESIGN 13): ReserveDryRun's slot, of mode delta. Its
// diff lays the delta over the catalog's live values when the file
// arrives, waits for no older generation and makes no delta wait.
func (s *Shard) ReserveDeltaDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	return s.reserveDryRun(ctx, retailerID, format, expires, perHour, "insert_delta_dry_run")
}

// reserveDryRun reserves a dry run's slot with query insert: under the
// reservation lock and limit, superseding nothing.
func (s *Shard) reserveDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int, insert string) (int64, error) {
	var gen int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockForReservation(ctx, tx, retailerID, perHour); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q("reserve_generation"), retailerID).Scan(&gen); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q(insert), retailerID, gen, format, keys.Upload(retailerID, gen), expires)
		return err
	})
	var de *catalog.Error
	if errors.As(err, &de) {
		return 0, err
	}
	if err != nil {
		return 0, fmt.Errorf("reserve a dry run for %s: %w", retailerID, err)
	}
	return gen, nil
}

// beginDryRun is BeginDiff for a dry run, in its transaction: the preview
// is read against the applied generation of now; the upload's version is
// pinned as any upload's; no fence is raised, nothing is superseded.
func beginDryRun(ctx context.Context, tx pgx.Tx, d *catalog.DiffDecision, retailerID string, gen int64, etag, pinned string,
	st catalog.State, applied, appliedProducts int64) error {
	if etag != "" && pinned != "" && etag != pinned {
		d.Reason = fmt.Sprintf("another version of the upload (%s) refused: the generation holds %s", etag, pinned)
		return nil
	}
	if pinned == "" && etag != "" {
		if err := tx.QueryRow(ctx, q("pin_upload"), retailerID, gen, etag).Scan(&pinned); err != nil {
			return err
		}
	}
	firstArrival := st == catalog.StateAwaitingUpload || st == catalog.StateReceived
	if _, err := tx.Exec(ctx, q("mark_diffing"), retailerID, gen); err != nil {
		return err
	}
	if err := tx.QueryRow(ctx, q("start_diff_run"), retailerID, gen).Scan(&d.Format, &d.ObjectKey, &d.Attempt, &d.Undoes, &d.Offboarding, &d.LastFailure); err != nil {
		return err
	}
	if firstArrival {
		// A preview reads the whole file: one upload (DESIGN 10).
		if err := addShardUsage(ctx, tx, retailerID, usage.Usage{Uploads: 1}); err != nil {
			return err
		}
	}
	var err error
	// Its mode: a delta's preview is laid over the live values (it waits
	// for no older generation: a preview blocks nothing and is blocked by
	// nothing).
	if d.Mode, d.Source, err = generationSource(ctx, tx, retailerID, gen); err != nil {
		return err
	}
	if d.BaselineNames, err = attributeNames(ctx, tx, retailerID, applied); err != nil {
		return err
	}
	d.Proceed, d.Baseline, d.BaselineProducts, d.ETag = true, applied, appliedProducts, pinned
	return nil
}

// Preview ends a dry run read whole (DESIGN 13): previewed, with its
// counts, the hold a real upload would meet (code "" when none) and its
// plan (pages computed against applied generation baseline; pages < 0:
// none was kept, past the plan's bounds). Nothing else
// changes; a generation that is not a dry run being diffed is left as it is.
func (s *Shard) Preview(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts, pages int, baseline int64) error {
	var codeArg, messageArg *string
	if code != "" {
		m := catalog.BoundMessage(message)
		codeArg, messageArg = &code, &m
	}
	var pagesArg *int // NULL: no plan kept (pages < 0, past its bounds)
	if pages >= 0 {
		pagesArg = &pages
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, q("mark_previewed"), retailerID, gen, codeArg, messageArg,
			c.Inserted, c.Updated, c.Deleted, c.Unchanged, c.Products, pagesArg, baseline, c.AttributeNames)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		// The preview read the snapshot whole (DESIGN 10).
		return addShardUsage(ctx, tx, retailerID, usage.Usage{BytesUploaded: c.Bytes, RowsReceived: c.Products})
	})
	if err != nil {
		return fmt.Errorf("record the preview of %s/%d: %w", retailerID, gen, err)
	}
	return nil
}

// RecordPlan records that a held (or about to be held) generation's plan
// was written in pages, computed against applied generation baseline.
func (s *Shard) RecordPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error {
	if _, err := s.pool.Exec(ctx, q("record_plan"), retailerID, gen, pages, baseline); err != nil {
		return fmt.Errorf("record the plan of %s/%d: %w", retailerID, gen, err)
	}
	return nil
}

// RecordAppliedPlan records that an applying or applied generation's plan,
// written as its chunks were sent, is in pages, computed against applied
// generation baseline; a generation that has a plan keeps it.
func (s *Shard) RecordAppliedPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error {
	if _, err := s.pool.Exec(ctx, q("record_applied_plan"), retailerID, gen, pages, baseline); err != nil {
		return fmt.Errorf("record the applied plan of %s/%d: %w", retailerID, gen, err)
	}
	return nil
}

// ReserveDryRun routes Shard.ReserveDryRun to the retailer's shard.
func (s *Stores) ReserveDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	gen, err := sh.ReserveDryRun(ctx, retailerID, format, expires, perHour)
	return gen, movingError(err) // 429 retailer_moving while it switches shards, as any reservation
}

// ReserveDeltaDryRun routes Shard.ReserveDeltaDryRun to the retailer's shard.
func (s *Stores) ReserveDeltaDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	gen, err := sh.ReserveDeltaDryRun(ctx, retailerID, format, expires, perHour)
	return gen, movingError(err) // 429 retailer_moving while it switches shards, as any reservation
}

// Preview routes Shard.Preview to the retailer's shard.
func (s *Stores) Preview(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts, pages int, baseline int64) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.Preview(ctx, retailerID, gen, code, message, c, pages, baseline)
}

// RecordPlan routes Shard.RecordPlan to the retailer's shard.
func (s *Stores) RecordPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.RecordPlan(ctx, retailerID, gen, pages, baseline)
}

// RecordAppliedPlan routes Shard.RecordAppliedPlan to the retailer's shard.
func (s *Stores) RecordAppliedPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.RecordAppliedPlan(ctx, retailerID, gen, pages, baseline)
}
