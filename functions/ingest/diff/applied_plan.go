package diff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

// The plan of an applied generation (DESIGN 13: what it changed, field by
// field). It is recorded while the chunks are sent, at no extra read of
// the upload: each row already read for its chunk is its "to", and just
// before a chunk is sent the catalog's live values of its products are
// its "from" (no chunk of the generation has touched them yet: a product
// is in one chunk, and older generations are fenced out). A first load
// (no baseline, nothing stopped) reads nothing: every "from" is absent.
// The pages are written after the last chunk is sent, off the path of the
// chunks, and recorded with AppliedPlanStore.RecordAppliedPlan.
//
// A plan is kept only by the run that starts applying the generation (a
// resumed run re-sends chunks over values already changed: its "from"
// would be the new values; a confirmed hold keeps the plan it was held
// with, unless it applies against another baseline), and only up to Config.MaxPlanOps operations and
// Config.MaxPlanBytes of lines, since it is held in memory until sorted:
// a bigger generation answers 409 plan_unavailable, and its change events
// (the chunk objects) say what it changed.

// AppliedPlanStore records the plan of an applied generation.
// pgstore.Stores implements it.
type AppliedPlanStore interface {
	// RecordAppliedPlan records that gen's plan, computed against applied
	// generation baseline as its chunks were sent, was written in pages;
	// it changes nothing when gen already has one (the first one stays).
	RecordAppliedPlan(ctx context.Context, retailerID string, gen int64, pages int, baseline int64) error
}

// planPutsAtOnce bounds the plan pages written at once.
const planPutsAtOnce = 8

// appliedPlan accumulates the plan of the generation whose chunks are sent.
type appliedPlan struct {
	r        *run
	baseline int64
	readFrom bool // the catalog may hold some of the products (not a first load)

	entries []catalog.PlanEntry
	runs    []int // entries[runs[i-1]:runs[i]] (from 0) are a chunk's, sorted by product_id
	bytes   int
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
	if _, err := r.putPlan(ctx, nil); err != nil {
		return false, err
	}
	return true, nil
}

// newAppliedPlan starts the plan of a generation sending ops operations
// against baseline, or returns nil when none is kept (see above). stopped
// is whether a stopped generation may have written rows (I5).
func (r *run) newAppliedPlan(ops int, baseline int64, stopped bool) *appliedPlan {
	if ops > r.h.cfg.MaxPlanOps || r.decision.Resumed || r.decision.DryRun || r.decision.Confirmed {
		return nil
	}
	return &appliedPlan{r: r, baseline: baseline, readFrom: baseline != 0 || stopped}
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
	// The chunk's entries are sorted here, beside the reading of the next
	// chunk, so that write only merges the chunks' runs.
	first := len(p.entries)
	defer func() {
		if p.keeps() {
			slices.SortFunc(p.entries[first:], byProductID)
			p.runs = append(p.runs, len(p.entries))
		}
	}()
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
			p.bytes += len(p.buf) + len(op.id)
			if p.bytes > p.r.h.cfg.MaxPlanBytes {
				p.drop(ctx, "its plan would pass the bytes kept for one")
				return nil
			}
			p.entries = append(p.entries, catalog.PlanEntry{ProductID: op.id, Line: slices.Clone(p.buf)})
		}
	}
	return nil
}

func byProductID(a, b catalog.PlanEntry) int { return strings.Compare(a.ProductID, b.ProductID) }

// mergeRuns merges the sorted runs entries[runs[i-1]:runs[i]] (the last
// ends at len(entries)) into one, two at a time.
func mergeRuns(entries []catalog.PlanEntry, runs []int) []catalog.PlanEntry {
	bounds := append([]int{0}, runs...)
	if bounds[len(bounds)-1] != len(entries) {
		bounds = append(bounds, len(entries))
	}
	tmp := make([]catalog.PlanEntry, len(entries))
	for len(bounds) > 2 {
		next := []int{0}
		for i := 0; i+1 < len(bounds); i += 2 {
			lo, mid := bounds[i], bounds[i+1]
			hi := mid
			if i+2 < len(bounds) {
				hi = bounds[i+2]
			}
			a, b, k := entries[lo:mid], entries[mid:hi], lo
			for len(a) > 0 && len(b) > 0 {
				if byProductID(b[0], a[0]) < 0 {
					tmp[k], b = b[0], b[1:]
				} else {
					tmp[k], a = a[0], a[1:]
				}
				k++
			}
			k += copy(tmp[k:], a)
			copy(tmp[k:], b)
			next = append(next, hi)
		}
		entries, tmp = tmp, entries
		bounds = next
	}
	return entries
}

func (p *appliedPlan) drop(ctx context.Context, why string) {
	p.r.log.InfoContext(ctx, "the applied plan is not kept: "+why, "max_bytes", p.r.h.cfg.MaxPlanBytes)
	p.dropped.Store(true)
	p.entries = nil
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
		pages, index, err := catalog.BuildPlanPages(mergeRuns(p.entries, p.runs))
		if err != nil {
			return err
		}
		p.entries = nil
		// The pages are written planPutsAtOnce at a time: the last chunk
		// waits for them (one at a time, a 40k-row change's 41 pages took
		// 41 round trips to S3).
		errs := make([]error, len(pages))
		var wg sync.WaitGroup
		sem := make(chan struct{}, planPutsAtOnce)
		for n, page := range pages {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if err := r.h.blobs.Put(ctx, keys.PlanPage(r.job.RetailerID, r.job.Generation, n), page); err != nil {
					errs[n] = fmt.Errorf("write page %d: %w", n, err)
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		if err := r.h.blobs.Put(ctx, keys.PlanIndex(r.job.RetailerID, r.job.Generation), index); err != nil {
			return fmt.Errorf("write its index: %w", err)
		}
		return r.store.RecordAppliedPlan(ctx, r.job.RetailerID, r.job.Generation, len(pages), p.baseline)
	}()
	if err != nil {
		r.log.WarnContext(ctx, "the applied plan is not kept", "err", err)
	}
}
