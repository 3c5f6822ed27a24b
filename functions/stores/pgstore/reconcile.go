package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Reconciliation (functions/operate/ops): runs and results on the control database;
// the catalog walk, attribute normalization and fenced repairs on a shard.

// RetailerIDs returns up to limit registered retailer ids after after, in order.
func (c *Control) RetailerIDs(ctx context.Context, after string, limit int) ([]string, error) {
	rows, err := c.pool.Query(ctx, q("retailer_ids"), after, limit)
	if err != nil {
		return nil, fmt.Errorf("list retailers: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CreateReconcileRun records a new run.
func (c *Control) CreateReconcileRun(ctx context.Context, run catalog.ReconcileRun) error {
	if _, err := c.pool.Exec(ctx, q("reconcile_run_create"), run.ID, run.RetailerID, run.Repair, run.Scheduled, run.Total); err != nil {
		return fmt.Errorf("create reconcile run %s: %w", run.ID, err)
	}
	return nil
}

// SetReconcileTotal records how many retailers a run checks, and finishes
// it when their results are all in already.
func (c *Control) SetReconcileTotal(ctx context.Context, runID string, total int) error {
	return pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("reconcile_run_lock"), runID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q("reconcile_run_total"), runID, total); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q("reconcile_run_finish"), runID)
		return err
	})
}

// RecordReconcileResult records (or overwrites) a retailer's result and
// finishes the run when it was the last one.
func (c *Control) RecordReconcileResult(ctx context.Context, r catalog.ReconcileResult) error {
	examples := r.Examples
	if examples == nil {
		examples = []string{}
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("reconcile_run_lock"), r.RunID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q("reconcile_result_upsert"), r.RunID, r.RetailerID, r.Generation, r.CheckedAt,
			r.Products, r.Rows, r.Missing, r.Extra, r.Different, r.Repaired, r.Unrepaired, examples, r.Skipped, r.Error); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q("reconcile_run_finish"), r.RunID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record reconcile result %s/%s: %w", r.RunID, r.RetailerID, err)
	}
	return nil
}

// ReconcileReport returns a run as far as it has got, with at most limit
// notable results; catalog.ErrNotFound for an unknown run.
func (c *Control) ReconcileReport(ctx context.Context, runID string, limit int) (catalog.ReconcileReport, error) {
	var rep catalog.ReconcileReport
	run := &rep.Run
	err := c.pool.QueryRow(ctx, q("reconcile_run"), runID).Scan(&run.ID, &run.RetailerID, &run.Repair, &run.Scheduled,
		&run.RequestedAt, &run.Total, &run.FinishedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return rep, catalog.Errorf(catalog.ErrNotFound, "run_not_found", "no reconciliation run %q", runID)
	}
	if err != nil {
		return rep, fmt.Errorf("reconcile run %s: %w", runID, err)
	}
	if err := c.pool.QueryRow(ctx, q("reconcile_counts"), runID).Scan(&rep.Results, &rep.Checked, &rep.Divergent); err != nil {
		return rep, fmt.Errorf("reconcile run %s: %w", runID, err)
	}
	rows, err := c.pool.Query(ctx, q("reconcile_notable"), runID, limit)
	if err != nil {
		return rep, fmt.Errorf("reconcile run %s: %w", runID, err)
	}
	rep.Notable, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.ReconcileResult, error) {
		r := catalog.ReconcileResult{RunID: runID}
		err := row.Scan(&r.RetailerID, &r.Generation, &r.CheckedAt, &r.Products, &r.Rows, &r.Missing, &r.Extra, &r.Different,
			&r.Repaired, &r.Unrepaired, &r.Examples, &r.Skipped, &r.Error)
		return r, err
	})
	return rep, err
}

// PruneReconcileRuns deletes the runs requested before a time, with their results.
func (c *Control) PruneReconcileRuns(ctx context.Context, before time.Time) (int64, error) {
	tag, err := c.pool.Exec(ctx, q("reconcile_runs_prune"), before)
	if err != nil {
		return 0, fmt.Errorf("prune reconcile runs: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RepairDirectory brings the product directory in line with a repair's
// ops (the repair writes with the applied generation: an entry of that
// generation is set too).
func (c *Control) RepairDirectory(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp) error {
	ids, deleted := directoryOps(ops)
	if len(ids) == 0 {
		return nil
	}
	if _, err := c.pool.Exec(ctx, q("directory_repair"), retailerID, gen, ids, deleted); err != nil {
		return fmt.Errorf("repair product directory for %s/%d: %w", retailerID, gen, err)
	}
	return nil
}

// ScanCatalog calls fn with each live row of the retailer whose product_id
// is in [from, to) (to "": no end), with its attributes as the database
// prints them (both valid only during the call), in product_id byte order,
// from one consistent snapshot in which the retailer's fence must be expect
// (catalog.ErrSuperseded otherwise: a generation took over or was applied
// meanwhile). Rows stream: memory does not grow with the catalog.
func (s *Shard) ScanCatalog(ctx context.Context, retailerID string, expect catalog.Fence, from, to string, fn func(id, attributes []byte) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("walk_without_timeout")); err != nil { // the walk of a large catalog takes its time
			return err
		}
		var f catalog.Fence
		err := tx.QueryRow(ctx, q("select_state"), retailerID).Scan(&f.Reserved, &f.Latest, &f.Applied, &f.AppliedProducts)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("scan catalog of %s: %w", retailerID, err)
		}
		if f.Latest != expect.Latest || f.Applied != expect.Applied {
			return catalog.ErrSuperseded
		}
		text := pgx.QueryResultFormats{pgx.TextFormatCode, pgx.TextFormatCode}
		var rows pgx.Rows
		if to == "" {
			rows, err = tx.Query(ctx, q("catalog_scan"), text, retailerID, from)
		} else {
			rows, err = tx.Query(ctx, q("catalog_scan_range"), text, retailerID, from, to)
		}
		if err != nil {
			return fmt.Errorf("scan catalog of %s: %w", retailerID, err)
		}
		defer rows.Close()
		for rows.Next() {
			raw := rows.RawValues()
			if err := fn(raw[0], raw[1]); err != nil {
				return err
			}
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("scan catalog of %s: %w", retailerID, err)
		}
		return nil
	})
}

// ScanHashes streams the retailer's live rows' ids and stored hashes in
// product_id order (the reconciliation bench's reference: what the walk
// would cost if it trusted the stored hashes).
func (s *Shard) ScanHashes(ctx context.Context, retailerID string, fn func(id, hash []byte) error) error {
	return pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, q("walk_without_timeout")); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, q("catalog_scan_hashes"), pgx.QueryResultFormats{pgx.TextFormatCode, pgx.BinaryFormatCode}, retailerID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			raw := rows.RawValues()
			if err := fn(raw[0], raw[1]); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// NormalizeAttributes returns each JSON object as the database stores it
// (jsonb's own text: numbers as numeric, its key order and spacing).
func (s *Shard) NormalizeAttributes(ctx context.Context, attributes []string) ([]string, error) {
	rows, err := s.pool.Query(ctx, q("normalize_attributes"), attributes)
	if err != nil {
		return nil, fmt.Errorf("normalize attributes: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// RepairRows rewrites rows of the retailer's applied generation gen to the
// snapshot's values (upserts) or tombstones (deletes), fenced like any
// apply: under the fence row FOR KEY SHARE, only while gen is still both
// the latest and the applied generation (else Superseded, nothing
// written), never over a row of a newer generation (Fenced), and only where
// the row still differs. The same transaction writes the repair's change
// event: a claim check on objectKey (the ops in the chunk object format,
// sha256 its hex SHA-256), numbered after the generation's chunks.
func (s *Shard) RepairRows(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp, objectKey, sha256 string) (catalog.RepairResult, error) {
	ids, attrs, hashes, deletes, err := splitOps(ops)
	if err != nil {
		return catalog.RepairResult{}, fmt.Errorf("repair %s/%d: %w", retailerID, gen, err)
	}
	var res catalog.RepairResult
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		res = catalog.RepairResult{}
		// Key probes whatever the statistics (as an apply's stage_write):
		// the repair's "product_id = ANY" could otherwise scan the
		// retailer's whole catalog once a batch.
		if _, err := tx.Exec(ctx, q("stage_plans")); err != nil {
			return err
		}
		var latest, applied int64
		err := tx.QueryRow(ctx, q("lock_state_for_repair"), retailerID).Scan(&latest, &applied)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && (latest != gen || applied != gen)) {
			res.Superseded = true
			return nil
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, q("repair_seq"), retailerID, gen).Scan(&res.Seq); err != nil {
			return fmt.Errorf("repair event number: %w", err)
		}
		// The ops that wrote nothing (equal meanwhile, or fenced) are left
		// out of the change event, as for a chunk.
		unchanged := []string{}
		for _, step := range []struct {
			query string
			args  []any
			n     int
		}{
			{"repair_upsert", []any{retailerID, gen, ids, attrs, hashes}, len(ids)},
			{"repair_delete", []any{retailerID, gen, deletes}, len(deletes)},
		} {
			if step.n == 0 {
				continue
			}
			var n int64
			var skipped, fenced []string
			if err := tx.QueryRow(ctx, q(step.query), step.args...).Scan(&n, &skipped, &fenced); err != nil {
				return fmt.Errorf("%s: %w", step.query, err)
			}
			res.Written += n
			unchanged = append(unchanged, skipped...)
			res.Fenced = append(res.Fenced, fenced...)
		}
		_, err = tx.Exec(ctx, q("insert_change_event"), retailerID, gen, res.Seq, objectKey, sha256, res.Written, unchanged)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("repair %s/%d: %w", retailerID, gen, err)
	}
	return res, nil
}

// The methods above, routed: control methods as they are, shard methods
// on the retailer's shard.

// RetailerIDs is Control.RetailerIDs.
func (s *Stores) RetailerIDs(ctx context.Context, after string, limit int) ([]string, error) {
	return s.Control.RetailerIDs(ctx, after, limit)
}

// CreateReconcileRun is Control.CreateReconcileRun.
func (s *Stores) CreateReconcileRun(ctx context.Context, run catalog.ReconcileRun) error {
	return s.Control.CreateReconcileRun(ctx, run)
}

// SetReconcileTotal is Control.SetReconcileTotal.
func (s *Stores) SetReconcileTotal(ctx context.Context, runID string, total int) error {
	return s.Control.SetReconcileTotal(ctx, runID, total)
}

// RecordReconcileResult is Control.RecordReconcileResult.
func (s *Stores) RecordReconcileResult(ctx context.Context, r catalog.ReconcileResult) error {
	return s.Control.RecordReconcileResult(ctx, r)
}

// ReconcileReport is Control.ReconcileReport.
func (s *Stores) ReconcileReport(ctx context.Context, runID string, limit int) (catalog.ReconcileReport, error) {
	return s.Control.ReconcileReport(ctx, runID, limit)
}

// PruneReconcileRuns is Control.PruneReconcileRuns.
func (s *Stores) PruneReconcileRuns(ctx context.Context, before time.Time) (int64, error) {
	return s.Control.PruneReconcileRuns(ctx, before)
}

// RepairDirectory is Control.RepairDirectory.
func (s *Stores) RepairDirectory(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp) error {
	return s.Control.RepairDirectory(ctx, retailerID, gen, ops)
}

// ScanCatalog is Shard.ScanCatalog on the retailer's shard.
func (s *Stores) ScanCatalog(ctx context.Context, retailerID string, expect catalog.Fence, from, to string, fn func(id, attributes []byte) error) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.ScanCatalog(ctx, retailerID, expect, from, to, fn)
}

// NormalizeAttributes is Shard.NormalizeAttributes on the retailer's shard.
func (s *Stores) NormalizeAttributes(ctx context.Context, retailerID string, attributes []string) ([]string, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.NormalizeAttributes(ctx, attributes)
}

// RepairRows is Shard.RepairRows on the retailer's shard.
func (s *Stores) RepairRows(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp, objectKey, sha256 string) (catalog.RepairResult, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.RepairResult{}, err
	}
	return sh.RepairRows(ctx, retailerID, gen, ops, objectKey, sha256)
}
