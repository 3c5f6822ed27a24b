package diff

import (
	"context"
	"errors"
	"fmt"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// The dry run of a delta (DESIGN 13). Its slot is a dry run of mode delta
// (pgstore ReserveDeltaDryRun): its BeginDiff waits for no older
// generation in progress (a preview blocks nothing and is blocked by
// nothing; no real delta waits for it either, older_unfinished and
// waiting_delta pass dry runs over), so the delta is read and merged, as
// a real one (readDelta, deltaChanges), into the catalog's live values as
// they are when its file arrives. Then nothing is written: no index, no
// chunk, no take-over, no event. It ends previewed with the counts a real
// delta would record, the hold a real upload of it would meet and its
// plan, field by field; a bad file ends rejected with its problems as any
// delta.

// previewDelta ends the dry run of a delta read whole: previewed, with
// plan's counts, the hold a real upload would meet (the delta's holds, on
// the products it names: deltaDrift) named in its error, and the plan of
// changes (sorted by product_id, each with its live value in before).
func (r *run) previewDelta(ctx context.Context, plan catalog.Plan, changes []deltaChange) error {
	d := r.decision
	var code, msg string
	if d.BaselineProducts > 0 { // as diffDelta decides a real delta's holds
		var err error
		if code, msg, err = r.holdReason(ctx, plan, d); err != nil {
			return err
		}
		if code != "" {
			msg = "a real upload of this file would be held: " + msg // as a full snapshot's preview says it
		}
	}
	pages, err := r.writeDeltaPlan(ctx, changes)
	if err != nil {
		return err
	}
	if err := r.store.Preview(ctx, r.job.RetailerID, r.job.Generation, code, msg, r.countsOf(plan), pages, d.Baseline); err != nil {
		return err
	}
	r.log.InfoContext(ctx, "delta dry run previewed", "baseline", d.Baseline, "inserted", plan.Inserted, "updated", plan.Updated,
		"deleted", plan.Deleted, "unchanged", plan.Unchanged, "hold", code, "plan_pages", pages)
	r.ended(ctx, catalog.StatePreviewed)
	return nil
}

// writeDeltaPlan writes the plan of a delta's changes as writePlan writes
// a full snapshot's (pages and a page index under keys.PlanIndex, only the
// attributes that differ, in product_id order, sorted through a
// planSpill): "from" the live value the delta was merged into, "to" the
// merged attributes (none for a delete). It returns the number of pages,
// or -1 (nothing written) past the plan's bounds, as writePlan.
func (r *run) writeDeltaPlan(ctx context.Context, changes []deltaChange) (int, error) {
	if r.h.cfg.MaxPlanOps > 0 && len(changes) > r.h.cfg.MaxPlanOps {
		r.planNotKept(ctx, fmt.Sprintf("it changes %d products", len(changes)))
		return -1, nil
	}
	spill := r.newPlanSpill()
	defer spill.close()
	var line []byte
	for _, c := range changes {
		var to []byte
		if !c.delete {
			to = c.attrs
		}
		var changed bool
		var err error
		if line, changed, err = catalog.PlanLine(line[:0], c.id, c.before, to); err != nil {
			return 0, fmt.Errorf("plan: %w", err)
		}
		if !changed {
			continue
		}
		if err := spill.add(c.id, line); errors.Is(err, errPlanTooLarge) {
			r.planNotKept(ctx, err.Error())
			return -1, nil
		} else if err != nil {
			return 0, err
		}
	}
	return r.putPlan(ctx, spill)
}
