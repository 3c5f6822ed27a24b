package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Collection (DESIGN 14): what no reader and no write will need again goes,
// in short transactions of one retailer and a bounded batch each (I12),
// safe beside uploads, applies and another collection. The rules are SQL
// functions of the migrations (shard and control 0110, queries_gc.sql);
// this file walks them.

// CollectTombstones runs one batch of the retailer's tombstone collection
// on its shard: the write floor raised (under the fence row FOR UPDATE) to
// the horizon of generations applied before appliedBefore, and, among ids,
// the tombstones at or below it deleted with the consumers' versions of
// their products, in that one transaction. ids empty: only the floor.
func (s *Shard) CollectTombstones(ctx context.Context, retailerID string, appliedBefore time.Time, ids []string) (floor, tombstones, versions int64, err error) {
	if ids == nil {
		ids = []string{}
	}
	err = s.pool.QueryRow(ctx, q("gc_tombstones"), retailerID, appliedBefore, ids).Scan(&floor, &tombstones, &versions)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("collect tombstones of %s (%d ids): %w", retailerID, len(ids), err)
	}
	return floor, tombstones, versions, nil
}

// TombstoneWindow reads the next window of at most limit of the retailer's
// rows after id after: the window's last id ("" when the catalog ends) and
// its tombstones stamped at or below floor. A read, no lock.
func (s *Shard) TombstoneWindow(ctx context.Context, retailerID, after string, limit int, floor int64) (last string, ids []string, err error) {
	if err := s.pool.QueryRow(ctx, q("gc_tombstone_window"), retailerID, after, limit, floor).Scan(&last, &ids); err != nil {
		return "", nil, fmt.Errorf("tombstones of %s after %q: %w", retailerID, after, err)
	}
	return last, ids, nil
}

// CollectChunks deletes up to limit rows of chunk progress of the
// retailer's generations finished before before; it returns how many.
func (s *Shard) CollectChunks(ctx context.Context, retailerID string, before time.Time, limit int) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, q("gc_chunks"), retailerID, before, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("collect chunk progress of %s: %w", retailerID, err)
	}
	return n, nil
}

// CollectOutbox deletes up to limit of the retailer's outbox rows parked
// before before (never redriven); it returns how many.
func (s *Shard) CollectOutbox(ctx context.Context, retailerID string, before time.Time, limit int) (int64, error) {
	var n int64
	if err := s.pool.QueryRow(ctx, q("gc_outbox"), retailerID, before, limit).Scan(&n); err != nil {
		return 0, fmt.Errorf("collect parked outbox rows of %s: %w", retailerID, err)
	}
	return n, nil
}

// WriteFloor is the retailer's write floor: the oldest generation that may
// still write to its catalog (0 before its first collection).
func (s *Shard) WriteFloor(ctx context.Context, retailerID string) (int64, error) {
	var f int64
	if err := s.pool.QueryRow(ctx, q("write_floor"), retailerID).Scan(&f); err != nil {
		return 0, fmt.Errorf("write floor of %s: %w", retailerID, err)
	}
	return f, nil
}

// CollectDirectory raises the retailer's directory floor to floor and
// deletes, among ids, its directory entries that are tombstones at or
// below it, in one transaction; it returns how many.
func (c *Control) CollectDirectory(ctx context.Context, retailerID string, floor int64, ids []string) (int64, error) {
	if ids == nil {
		ids = []string{}
	}
	var n int64
	if err := c.pool.QueryRow(ctx, q("gc_directory"), retailerID, floor, ids).Scan(&n); err != nil {
		return 0, fmt.Errorf("collect directory entries of %s (%d ids): %w", retailerID, len(ids), err)
	}
	return n, nil
}

// Collect collects one retailer (DESIGN 14), batch by batch, calling
// progress (when not nil) with the running total after each batch:
//
//  1. the write floor is raised on the shard (gc_collect_tombstones with no
//     ids), and the catalog is walked in windows of p.Window rows in
//     primary-key order; for each window's tombstones at or below the
//     floor, first their directory entries go (the control database's
//     transaction, which raises the directory's floor to the shard's),
//     then the tombstones themselves and the consumers' versions of those
//     products (the shard's transaction, under the fence row FOR UPDATE,
//     which re-checks each row). A crash between the two leaves
//     tombstones whose entries are gone: the next collection finds them
//     again; the other order could leave entries no tombstone points to.
//  2. the chunk progress of generations finished before p.AppliedBefore,
//     p.Window rows a transaction;
//  3. the outbox rows parked before p.ParkedBefore, p.Window a transaction;
//  4. the shard's churned indexes past p.RebuildAbove rebuilt
//     (RebuildBloatedIndexes: REINDEX INDEX CONCURRENTLY); a role that may
//     not rebuild them leaves them, and says so in RebuildSkipped.
//
// A retailer the registry does not know is catalog.ErrNotFound; one whose
// move between shards is switching (its shard refuses its writes for a
// few seconds) is catalog.ErrRateLimited retailer_moving, as a
// reservation is: POST /v1/admin/gc answers 429, not 500.
func (s *Stores) Collect(ctx context.Context, retailerID string, p catalog.CollectPolicy, progress func(catalog.Collected)) (catalog.Collected, error) {
	out, err := s.collect(ctx, retailerID, p, progress)
	return out, movingError(err)
}

func (s *Stores) collect(ctx context.Context, retailerID string, p catalog.CollectPolicy, progress func(catalog.Collected)) (catalog.Collected, error) {
	var out catalog.Collected
	if p.Window <= 0 {
		p.Window = 10_000
	}
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return out, err
	}
	report := func() {
		out.Batches++
		if progress != nil {
			progress(out)
		}
	}
	floor, _, _, err := sh.CollectTombstones(ctx, retailerID, p.AppliedBefore, nil)
	if err != nil {
		return out, err
	}
	out.Floor = floor
	report()
	for after := ""; floor > 0; {
		last, ids, err := sh.TombstoneWindow(ctx, retailerID, after, p.Window, floor)
		if err != nil {
			return out, err
		}
		if len(ids) > 0 {
			n, err := s.Control.CollectDirectory(ctx, retailerID, floor, ids)
			if err != nil {
				return out, err
			}
			out.DirectoryEntries += n
			f, tombs, versions, err := sh.CollectTombstones(ctx, retailerID, p.AppliedBefore, ids)
			if err != nil {
				return out, err
			}
			out.Floor, out.Tombstones, out.ConsumerVersions = f, out.Tombstones+tombs, out.ConsumerVersions+versions
			report()
		}
		if last == "" {
			break
		}
		after = last
	}
	for _, step := range []struct {
		collect func(context.Context, string, time.Time, int) (int64, error)
		before  time.Time
		count   *int64
	}{
		{sh.CollectChunks, p.AppliedBefore, &out.ChunkRows},
		{sh.CollectOutbox, p.ParkedBefore, &out.OutboxRows},
	} {
		if step.before.IsZero() {
			continue
		}
		for {
			n, err := step.collect(ctx, retailerID, step.before, p.Window)
			if err != nil {
				return out, err
			}
			*step.count += n
			report()
			if n < int64(p.Window) {
				break
			}
		}
	}
	if p.RebuildAbove >= 0 {
		done, err := sh.RebuildBloatedIndexes(ctx, p.RebuildAbove)
		for _, b := range done {
			out.IndexesRebuilt = append(out.IndexesRebuilt, b.Index)
		}
		switch {
		case errors.Is(err, ErrRebuildNotOwner):
			out.RebuildSkipped = err.Error()
		case err != nil:
			return out, fmt.Errorf("collect %s: %w", retailerID, err)
		}
	}
	return out, nil
}
