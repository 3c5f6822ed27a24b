package diff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/retailcatalog/catalog/functions/core/catalog"
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

// writePlan writes the plan of what plan changes in the catalog as it is
// now (DESIGN 13): the upserted rows read again by line (their "to"), the
// catalog's current values of every id the plan names, read in batches by
// the primary key (their "from"), only the attributes that differ, in
// product_id order, as pages and a page index under keys.PlanIndex. It
// returns the number of pages, or -1 when the plan passes its bounds
// (Config.MaxPlanBytes of lines, or no space left to sort them; or the
// test knob Config.MaxPlanOps): then nothing is written and none is kept.
// The rows are read again in file order, a batch at a time, and the lines
// sorted through a planSpill: memory stays near Config.PlanMemoryBytes
// whatever the plan's size.
func (r *run) writePlan(ctx context.Context, plan catalog.Plan) (int, error) {
	if r.h.cfg.MaxPlanOps > 0 && plan.Ops() > r.h.cfg.MaxPlanOps {
		r.planNotKept(ctx, fmt.Sprintf("it changes %d products", plan.Ops()))
		return -1, nil
	}
	spill := r.newPlanSpill()
	defer spill.close()
	var canon snapshot.Canonicalizer
	var from, buf []byte
	// add adds the plan lines of a batch of ids, to(i) the i-th one's
	// new attributes (nil: deleted).
	add := func(batch []string, to func(i int) []byte) error {
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
			if buf, changed, err = catalog.PlanLine(buf[:0], id, before, to(i)); err != nil {
				return fmt.Errorf("plan: %w", err)
			}
			if changed {
				if err := spill.add(id, buf); err != nil {
					return err
				}
			}
		}
		return nil
	}
	err := r.planUpserts(ctx, plan, add)
	for start := 0; err == nil && start < len(plan.Deletes); start += planReadBatch {
		err = add(plan.Deletes[start:min(start+planReadBatch, len(plan.Deletes))], func(int) []byte { return nil })
	}
	if errors.Is(err, errPlanTooLarge) {
		r.planNotKept(ctx, err.Error())
		return -1, nil
	}
	if err != nil {
		return 0, err
	}
	return r.putPlan(ctx, spill)
}

// planUpserts reads plan's upserted rows again, in file order, and gives
// add their ids and attributes a batch of planReadBatch at a time.
func (r *run) planUpserts(ctx context.Context, plan catalog.Plan, add func(batch []string, to func(i int) []byte) error) error {
	if len(plan.Upserts) == 0 {
		return nil
	}
	lines := slices.Clone(plan.Upserts)
	slices.Sort(lines)
	obj, err := r.openUpload(ctx, r.etag)
	if err != nil {
		return err
	}
	defer obj.Body.Close()
	rd, err := r.newReader(obj.Body)
	if err != nil {
		return fmt.Errorf("plan: reread snapshot: %w", err)
	}
	defer rd.Close()
	rd.Lines = lines
	rd.ReuseAttributes = true // copied below
	rd.Workers = r.h.cfg.Workers
	ids := make([]string, 0, planReadBatch)
	attrs := make([][]byte, 0, planReadBatch)
	flush := func() error {
		err := add(ids, func(i int) []byte { return attrs[i] })
		ids, attrs = ids[:0], attrs[:0]
		return err
	}
	read := 0
	for {
		row, err := rd.Scan()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("plan: reread snapshot: %w", err)
		}
		read++
		ids = append(ids, string(row.ID))
		attrs = append(attrs, slices.Clone(row.Attributes))
		if len(ids) == planReadBatch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if read != len(lines) {
		return fmt.Errorf("plan: found %d of %d rows: the upload changed while being read", read, len(lines))
	}
	if len(ids) > 0 {
		return flush()
	}
	return nil
}

// planNotKept logs why a preview's or a held upload's plan is not kept.
func (r *run) planNotKept(ctx context.Context, why string) {
	r.log.InfoContext(ctx, "the plan is not kept: "+why, "max_ops", r.h.cfg.MaxPlanOps, "max_bytes", r.h.cfg.MaxPlanBytes)
}
