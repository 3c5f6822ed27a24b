package diff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

// PlanStore is what dry runs and plans need of the databases (DESIGN 13).
// pgstore.Stores implements it.
type PlanStore interface {
	// Preview ends dry run gen previewed with its counts, the hold a real
	// upload would meet (code "" when none) and its plan (pages, computed
	// against applied generation baseline; pages < 0: none kept); nothing
	// else changes.
	Preview(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts, pages int, baseline int64) error
	// RecordPlan records that gen's plan was written in pages, computed
	// against applied generation baseline.
	RecordPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error
	// A plan's "from" is DriftStore.ProductAttributes: the live values.
}

// planReadBatch is how many ids one read of the catalog's current values asks for.
const planReadBatch = 1000

// preview ends a dry run read whole (DESIGN 13): the merge against the
// applied generation of its arrival, the hold a real upload would meet,
// its plan; no take-over, no index, no chunk, no event.
func (r *run) preview(ctx context.Context) error {
	d := r.decision
	plan, err := r.merge(ctx, catalog.DiffDecision{Baseline: d.Baseline})
	if err != nil {
		return err
	}
	// The sorted entries are not needed any more (as before pass 2).
	r.entries.Close()
	code, msg, err := r.holdReason(ctx, plan, catalog.DiffDecision{Baseline: d.Baseline, BaselineProducts: d.BaselineProducts,
		BaselineNames: d.BaselineNames})
	if err != nil {
		return err
	}
	if code != "" {
		msg = "a real upload of this file would be held: " + msg
	}
	pages, err := r.writePlan(ctx, plan)
	if err != nil {
		return err
	}
	if err := r.store.Preview(ctx, r.job.RetailerID, r.job.Generation, code, msg, r.countsOf(plan), pages, d.Baseline); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "dry run previewed", "baseline", d.Baseline, "inserted", plan.Inserted, "updated", plan.Updated,
		"deleted", plan.Deleted, "unchanged", plan.Unchanged, "hold", code, "plan_pages", pages)
	r.ended(ctx, catalog.StatePreviewed)
	return nil
}

// planRow is an upserted row of the plan: its id and new attributes.
type planRow struct {
	id    string
	attrs []byte
}

// writePlan writes the plan of what plan changes in the catalog as it is
// now (DESIGN 13): the upserted rows read again by line (their "to"), the
// catalog's current values of every id the plan names, read in batches by
// the primary key (their "from"), only the attributes that differ, in
// product_id order, as pages and a page index under keys.PlanIndex. It
// returns the number of pages, or -1 when the plan passes its bounds
// (Config.MaxPlanOps operations, Config.MaxPlanBytes of rows read again
// or of lines): then nothing is written and none is kept. The plan is
// held in memory while it is sorted: its size is that of the changed
// rows, twice, hence the bounds.
func (r *run) writePlan(ctx context.Context, plan catalog.Plan) (int, error) {
	if plan.Ops() > r.h.cfg.MaxPlanOps {
		r.planNotKept(ctx, fmt.Sprintf("it changes %d products", plan.Ops()))
		return -1, nil
	}
	var rows []planRow
	if len(plan.Upserts) > 0 {
		lines := slices.Clone(plan.Upserts)
		slices.Sort(lines)
		obj, err := r.openUpload(ctx, r.etag)
		if err != nil {
			return 0, err
		}
		defer obj.Body.Close()
		rd, err := r.newReader(obj.Body)
		if err != nil {
			return 0, fmt.Errorf("plan: reread snapshot: %w", err)
		}
		defer rd.Close()
		rd.Lines = lines
		rd.ReuseAttributes = true // copied below
		rd.Workers = r.h.cfg.Workers
		rows = make([]planRow, 0, len(lines))
		read := 0
		for {
			row, err := rd.Scan()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("plan: reread snapshot: %w", err)
			}
			if read += len(row.ID) + len(row.Attributes); read > r.h.cfg.MaxPlanBytes {
				r.planNotKept(ctx, "the rows it changes pass the bytes kept for one")
				return -1, nil
			}
			rows = append(rows, planRow{id: string(row.ID), attrs: slices.Clone(row.Attributes)})
		}
		if len(rows) != len(lines) {
			return 0, fmt.Errorf("plan: found %d of %d rows: the upload changed while being read", len(rows), len(lines))
		}
	}
	entries := make([]catalog.PlanEntry, 0, plan.Ops())
	size := 0
	var canon snapshot.Canonicalizer
	var from, buf []byte
	add := func(ids []string, to func(i int) []byte) error {
		for start := 0; start < len(ids); start += planReadBatch {
			batch := ids[start:min(start+planReadBatch, len(ids))]
			current, err := r.store.ProductAttributes(ctx, r.job.RetailerID, batch)
			if err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			for i, id := range batch {
				var before []byte
				if cur, ok := current[id]; ok {
					if from, err = canon.Append(from[:0], cur); err != nil {
						return fmt.Errorf("plan: the catalog's value of %q: %w", id, err)
					}
					before = from
				}
				var changed bool
				if buf, changed, err = catalog.PlanLine(buf[:0], id, before, to(start+i)); err != nil {
					return fmt.Errorf("plan: %w", err)
				}
				if changed {
					if size += len(buf) + len(id); size > r.h.cfg.MaxPlanBytes {
						return errPlanTooLarge
					}
					entries = append(entries, catalog.PlanEntry{ProductID: id, Line: slices.Clone(buf)})
				}
			}
		}
		return nil
	}
	ids := make([]string, len(rows))
	for i, row := range rows {
		ids[i] = row.id
	}
	err := add(ids, func(i int) []byte { return rows[i].attrs })
	if err == nil {
		err = add(plan.Deletes, func(int) []byte { return nil })
	}
	if errors.Is(err, errPlanTooLarge) {
		r.planNotKept(ctx, "its plan would pass the bytes kept for one")
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	rows = nil
	return r.putPlan(ctx, entries)
}

// errPlanTooLarge stops a plan that passes Config.MaxPlanBytes.
var errPlanTooLarge = errors.New("the plan passes its bytes")

// planNotKept logs why a preview's or a held upload's plan is not kept.
func (r *run) planNotKept(ctx context.Context, why string) {
	r.log.InfoContext(ctx, "the plan is not kept: "+why, "max_ops", r.h.cfg.MaxPlanOps, "max_bytes", r.h.cfg.MaxPlanBytes)
}

// putPlan writes a plan's entries as pages and a page index under
// keys.PlanIndex; it returns the number of pages.
func (r *run) putPlan(ctx context.Context, entries []catalog.PlanEntry) (int, error) {
	pages, index, err := catalog.BuildPlanPages(entries)
	if err != nil {
		return 0, fmt.Errorf("plan: %w", err)
	}
	for n, page := range pages {
		if err := r.h.blobs.Put(ctx, keys.PlanPage(r.job.RetailerID, r.job.Generation, n), page); err != nil {
			return 0, fmt.Errorf("plan: write page %d: %w", n, err)
		}
	}
	if err := r.h.blobs.Put(ctx, keys.PlanIndex(r.job.RetailerID, r.job.Generation), index); err != nil {
		return 0, fmt.Errorf("plan: write its index: %w", err)
	}
	return len(pages), nil
}
