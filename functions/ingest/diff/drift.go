package diff

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

// DriftStore is what the attribute_dropped hold (DESIGN 13) needs of the
// databases. pgstore.Stores implements it.
type DriftStore interface {
	// SetAttributeCounts keeps the per-attribute counts of gen's snapshot,
	// read whole.
	SetAttributeCounts(ctx context.Context, retailerID string, gen int64, counts catalog.AttributeCounts) error
	// AttributeCounts returns those of gen; nil when gen was read before
	// they were kept.
	AttributeCounts(ctx context.Context, retailerID string, gen int64) (catalog.AttributeCounts, error)
	// ProductAttributes returns the attributes (JSON) of the live products
	// among ids.
	ProductAttributes(ctx context.Context, retailerID string, ids []string) (map[string][]byte, error)
}

// compareBatch is how many products the blank rule looks up at once.
const compareBatch = 1000

// dropInput is the attribute_dropped rule's input for the plan against
// d's baseline: the counts of both snapshots and, only when the counts
// cannot clear the blank rule (catalog.HoldPolicy.BlankCandidates), the
// per-product comparison of the products the plan updates and deletes. A
// baseline without counts (applied before they were kept) never holds.
func (r *run) dropInput(ctx context.Context, plan catalog.Plan, d catalog.DiffDecision) (catalog.DropInput, error) {
	if r.deltaDrop != nil {
		return *r.deltaDrop, nil // a delta: the products it names (deltaDrift)
	}
	if d.Baseline == 0 || r.counts == nil {
		return catalog.DropInput{}, nil
	}
	base, err := r.store.AttributeCounts(ctx, r.job.RetailerID, d.Baseline)
	if err != nil || base == nil {
		return catalog.DropInput{}, err
	}
	in := catalog.DropInput{Products: d.BaselineProducts, Baseline: base, Upload: r.counts}
	names := r.retailer.Hold.BlankCandidates(d.BaselineProducts, base, r.counts, plan.Updated, plan.Deleted)
	if len(names) == 0 {
		return in, nil
	}
	r.log.InfoContext(ctx, "comparing blanked attributes product by product", "attributes", len(names),
		"updated", plan.Updated, "deleted", plan.Deleted)
	in.Had, in.Blanked, err = r.compareBlanks(ctx, plan, names, base)
	return in, err
}

// compareBlanks counts, for each attribute of names, the products in both
// snapshots that had a value in the baseline (its valued products less the
// deleted ones that had one) and those of them whose value in the upload is
// "" or null (among the products the plan upserts that exist: updates,
// repairs; unchanged ones keep their values). The old values are the
// shard's rows, the new ones the upload's rows at the plan's lines.
func (r *run) compareBlanks(ctx context.Context, plan catalog.Plan, names []string, base catalog.AttributeCounts) (had, blanked map[string]int64, err error) {
	had, blanked = map[string]int64{}, map[string]int64{}
	for _, n := range names {
		had[n] = base[n].Valued
	}
	for ids := range slices.Chunk(plan.Deletes, compareBatch) {
		old, err := r.store.ProductAttributes(ctx, r.job.RetailerID, ids)
		if err != nil {
			return nil, nil, err
		}
		for _, attrs := range old {
			vals, err := topLevel(attrs)
			if err != nil {
				return nil, nil, err
			}
			for _, n := range names {
				if valued(vals, n) {
					had[n]--
				}
			}
		}
	}
	if len(plan.Upserts) == 0 {
		return had, blanked, nil
	}
	obj, err := r.openUpload(ctx, r.etag)
	if err != nil {
		return nil, nil, err
	}
	defer obj.Body.Close()
	rd, err := r.newReader(obj.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("compare blanks: %w", err)
	}
	defer rd.Close()
	lines := slices.Clone(plan.Upserts)
	slices.Sort(lines)
	rd.Lines = lines
	type newRow struct {
		id   string
		vals map[string]json.RawMessage
	}
	var batch []newRow
	flush := func() error {
		ids := make([]string, len(batch))
		for i, b := range batch {
			ids[i] = b.id
		}
		old, err := r.store.ProductAttributes(ctx, r.job.RetailerID, ids)
		if err != nil {
			return err
		}
		for _, b := range batch {
			attrs, ok := old[b.id]
			if !ok {
				continue // an insert
			}
			vals, err := topLevel(attrs)
			if err != nil {
				return err
			}
			for _, n := range names {
				if valued(vals, n) && blank(b.vals, n) {
					blanked[n]++
				}
			}
		}
		batch = batch[:0]
		return nil
	}
	for {
		row, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("compare blanks: %w", err)
		}
		vals, err := topLevel(row.Attributes)
		if err != nil {
			return nil, nil, err
		}
		batch = append(batch, newRow{id: row.ProductID, vals: vals})
		if len(batch) == compareBatch {
			if err := flush(); err != nil {
				return nil, nil, err
			}
		}
	}
	if len(batch) > 0 {
		if err := flush(); err != nil {
			return nil, nil, err
		}
	}
	return had, blanked, nil
}

func topLevel(attrs []byte) (map[string]json.RawMessage, error) {
	var vals map[string]json.RawMessage
	if err := json.Unmarshal(attrs, &vals); err != nil {
		return nil, fmt.Errorf("decode attributes: %w", err)
	}
	return vals, nil
}

// valued reports whether attribute name has a value other than "" or null.
func valued(vals map[string]json.RawMessage, name string) bool {
	v, ok := vals[name]
	return ok && !isBlankValue(v)
}

// blank reports whether attribute name is given as "" or null.
func blank(vals map[string]json.RawMessage, name string) bool {
	v, ok := vals[name]
	return ok && isBlankValue(v)
}

func isBlankValue(v json.RawMessage) bool { return string(v) == `""` || string(v) == "null" }

// keepCounts records the counts of the snapshot just read (the baseline's
// of the next upload, once this one is applied).
func (r *run) keepCounts(ctx context.Context) error {
	if r.counts == nil {
		return nil
	}
	return r.store.SetAttributeCounts(ctx, r.job.RetailerID, r.job.Generation, r.counts)
}

// deltaDrift gathers what the attribute_dropped rule asks of a delta
// ("checked only on the products it names", DESIGN 13): drop.Products the
// named products it does not delete, drop.Had[a] those of them that had a
// value of a, drop.Blanked[a] those of them it sets to "" or null (or, for
// a row that replaces the product whole, leaves without a value); and the
// per-attribute counts of the catalog it leaves (counts: the baseline's,
// each change laid over them; nil when the baseline has none), kept as the
// next upload's baseline counts.
type deltaDrift struct {
	drop   catalog.DropInput
	counts catalog.AttributeCounts
}

func newDeltaDrift(base catalog.AttributeCounts) *deltaDrift {
	d := &deltaDrift{drop: catalog.DropInput{Had: map[string]int64{}, Blanked: map[string]int64{}}}
	if base != nil {
		d.counts = make(catalog.AttributeCounts, len(base))
		for n, c := range base {
			d.counts[n] = c
		}
	}
	return d
}

// add counts one named product: before its canonical attributes (nil when
// it is not in the catalog), after and live what the delta leaves of it.
func (d *deltaDrift) add(op snapshot.DeltaOp, before, after []byte, live, exists bool) error {
	var old, now map[string]json.RawMessage
	var err error
	if exists {
		if old, err = topLevel(before); err != nil {
			return err
		}
	}
	if live {
		if now, err = topLevel(after); err != nil {
			return err
		}
	}
	if !op.Delete {
		d.drop.Products++
		for n := range old {
			if !valued(old, n) {
				continue
			}
			d.drop.Had[n]++
			if blank(op.Set, n) || (op.Replace && !valued(now, n)) {
				d.drop.Blanked[n]++
			}
		}
	}
	if d.counts == nil {
		return nil
	}
	step := func(vals map[string]json.RawMessage, by int64) {
		for n := range vals {
			c := d.counts[n]
			c.Present += by
			if valued(vals, n) {
				c.Valued += by
			}
			if c.Present <= 0 {
				delete(d.counts, n)
				continue
			}
			d.counts[n] = c
		}
	}
	step(old, -1)
	step(now, +1)
	return nil
}
