package diff

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

// The plan of an applied generation (DESIGN 13: what it changed, field by
// field). It is recorded while the chunks are sent, at no extra read of
// the upload: each row already read for its chunk is its "to", and just
// before a chunk is sent the catalog's live values of its products are
// its "from" (no chunk of the generation has touched them yet: a product
// is in one chunk, and older generations are fenced out). A first load
// (no baseline, nothing stopped) reads nothing: every "from" is absent.
// The pages are written, and recorded with AppliedPlanStore.RecordAppliedPlan,
// before the last chunk is sent: the generation is never applied before
// its plan is recorded.
//
// A plan is kept only by the run that starts applying the generation (a
// resumed run re-sends chunks over values already changed: its "from"
// would be the new values; a confirmed hold keeps the plan it was held
// with, unless it applies against another baseline). Its lines are
// sorted through a planSpill (memory near Config.PlanMemoryBytes, sorted
// runs in Config.SpillDir), so any number of operations keeps one; only a
// plan past Config.MaxPlanBytes of lines, or one that finds no space left
// for its runs, is not kept: the generation answers 409 plan_unavailable,
// and its change events (the chunk objects) say what it changed. The
// spill is closed when the run ends (removeLocal), written or not.

// AppliedPlanStore records the plan of an applied generation.
// pgstore.Stores implements it.
type AppliedPlanStore interface {
	// RecordAppliedPlan records that gen's plan, computed against applied
	// generation baseline as its chunks were sent, was written in pages;
	// it changes nothing when gen already has one (the first one stays).
	RecordAppliedPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error
}

// appliedPlan accumulates the plan of the generation whose chunks are sent.
type appliedPlan struct {
	r        *run
	baseline int64
	readFrom bool // the catalog may hold some of the products (not a first load)

	spill *planSpill
	// dropped: over a bound, nothing is kept (or written: nothing more
	// is); set by the chunks' sender, read by the goroutine filling them.
	dropped atomic.Bool

	canon     snapshot.Canonicalizer
	from, buf []byte
}

// pendingOp is an op of a chunk not sent yet: attrs nil for a delete.
type pendingOp struct {
	id    string
	attrs []byte
}

// emptyAppliedPlan writes the empty plan of a generation applied without
// chunks, when it keeps one (as newAppliedPlan decides), and reports
// whether it did: StartApplying records it then (Counts.EmptyPlan), in the
// step that applies the generation.
func (r *run) emptyAppliedPlan(ctx context.Context, takeover catalog.DiffDecision) (bool, error) {
	if r.newAppliedPlan(0, takeover.Baseline, len(takeover.Stopped) > 0) == nil {
		return false, nil
	}
	if _, err := r.putPlan(ctx, &planSpill{}); err != nil {
		return false, err
	}
	return true, nil
}

// newAppliedPlan starts the plan of a generation sending ops operations
// against baseline, or returns nil when none is kept (see above). stopped
// is whether a stopped generation may have written rows (I5).
func (r *run) newAppliedPlan(ops int, baseline int64, stopped bool) *appliedPlan {
	if (r.h.cfg.MaxPlanOps > 0 && ops > r.h.cfg.MaxPlanOps) || r.decision.Resumed || r.decision.DryRun || r.decision.Confirmed {
		return nil
	}
	r.applied.close() // one a run
	r.applied = &appliedPlan{r: r, baseline: baseline, readFrom: baseline != 0 || stopped, spill: r.newPlanSpill()}
	return r.applied
}

// close releases the plan's spill (nil: none).
func (p *appliedPlan) close() {
	if p != nil {
		p.spill.close()
	}
}

// keeps reports whether the ops of the chunks still go into the plan
// (the chunker keeps a copy of each op for it).
func (p *appliedPlan) keeps() bool { return p != nil && !p.dropped.Load() }

// beforeSend turns the ops of a chunk into plan entries, reading their
// live values first; called before the chunk holding them is sent.
func (p *appliedPlan) beforeSend(ctx context.Context, pending []pendingOp) error {
	if !p.keeps() || len(pending) == 0 {
		return nil
	}
	for start := 0; start < len(pending); start += planReadBatch {
		batch := pending[start:min(start+planReadBatch, len(pending))]
		var current map[string][]byte
		if p.readFrom {
			ids := make([]string, len(batch))
			for i, op := range batch {
				ids[i] = op.id
			}
			var err error
			if current, err = p.r.store.ProductAttributes(ctx, p.r.job.RetailerID, ids); err != nil {
				return fmt.Errorf("applied plan: %w", err)
			}
		}
		for _, op := range batch {
			var before []byte
			if cur, ok := current[op.id]; ok {
				var err error
				if p.from, err = p.canon.Append(p.from[:0], cur); err != nil {
					return fmt.Errorf("applied plan: the catalog's value of %q: %w", op.id, err)
				}
				before = p.from
			}
			var changed bool
			var err error
			if p.buf, changed, err = catalog.PlanLine(p.buf[:0], op.id, before, op.attrs); err != nil {
				return fmt.Errorf("applied plan: %w", err)
			}
			if !changed {
				continue
			}
			if err := p.spill.add(op.id, p.buf); errors.Is(err, errPlanTooLarge) {
				p.drop(ctx, err.Error())
				return nil
			} else if err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *appliedPlan) drop(ctx context.Context, why string) {
	p.r.log.InfoContext(ctx, "the applied plan is not kept: "+why, "max_bytes", p.r.h.cfg.MaxPlanBytes)
	p.dropped.Store(true)
	p.spill.close()
}

// write writes the plan's pages and records them, once the last chunk's
// ops are in it and before that chunk is sent (the chunker's send): the
// generation cannot be applied before its plan is recorded. A failure is
// logged, not returned: the plan route answers plan_unavailable for a
// plan that is not recorded.
func (p *appliedPlan) write(ctx context.Context) {
	if !p.keeps() {
		return
	}
	p.dropped.Store(true) // written once
	r := p.r
	err := func() error {
		pages, err := r.putPlan(ctx, p.spill)
		if err != nil {
			return err
		}
		return r.store.RecordAppliedPlan(ctx, r.job.RetailerID, r.job.Generation, pages, p.baseline)
	}()
	if err != nil {
		r.log.WarnContext(ctx, "the applied plan is not kept", "err", err)
	}
}
