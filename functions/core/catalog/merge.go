package catalog

import (
	"bytes"
	"fmt"
	"io"
)

// Plan is what a new snapshot changes, relative to the retailer's applied
// baseline, plus the repairs of rows that stopped generations may have written.
type Plan struct {
	// Upserts are the lines (Ref.Line) of the new snapshot's rows that must
	// be sent as upserts: inserts, updates and repairs, in product_id order.
	Upserts []int32
	// Deletes are product ids to delete: deletions and repairs of ids that a
	// stopped generation may have inserted, in product_id order.
	Deletes []string

	Inserted, Updated, Deleted, Unchanged int64
	// Repaired counts ids unchanged against the baseline that are sent anyway
	// because a stopped generation may have changed them (I5). They are
	// included in Unchanged; the apply writes them only when the row differs.
	Repaired int64
}

// Ops is the number of row operations the plan sends.
func (p Plan) Ops() int { return len(p.Upserts) + len(p.Deletes) }

// MergeRefs walks the new snapshot's sorted entries against the baseline
// index (the retailer's applied generation) and the indexes of every
// generation newer than the baseline that may have written rows before it
// was stopped. When index is not nil, every new entry is also added to it
// (the new generation's index is written in the same walk).
//
// For each product id: present in new and not in baseline -> insert; in both
// with another hash -> update; only in baseline -> delete; same in both ->
// unchanged, unless some stopped generation had it different from the
// baseline (other hash, added or removed), in which case the id is sent again
// so the catalog returns to the new snapshot's value (I5).
func MergeRefs(next RefIterator, baseline RefIterator, stopped []RefIterator, index *IndexWriter) (Plan, error) {
	var plan Plan
	nw, err := newCursor(next)
	if err != nil {
		return plan, fmt.Errorf("new entries: %w", err)
	}
	base, err := newCursor(baseline)
	if err != nil {
		return plan, fmt.Errorf("baseline index: %w", err)
	}
	if len(stopped) == 0 {
		return mergeBaseline(nw, base, index)
	}
	stops := make([]*cursor, len(stopped))
	for i, it := range stopped {
		if stops[i], err = newCursor(it); err != nil {
			return plan, fmt.Errorf("stopped generation index %d: %w", i, err)
		}
	}
	var id []byte // the smallest id among all inputs, copied
	for {
		var min []byte
		have := false
		if nw.ok {
			min, have = nw.cur.ID, true
		}
		if base.ok && (!have || bytes.Compare(base.cur.ID, min) < 0) {
			min, have = base.cur.ID, true
		}
		for _, s := range stops {
			if s.ok && (!have || bytes.Compare(s.cur.ID, min) < 0) {
				min, have = s.cur.ID, true
			}
		}
		if !have {
			return plan, nil
		}
		id = append(id[:0], min...)

		inNew := nw.ok && bytes.Equal(nw.cur.ID, id)
		inBase := base.ok && bytes.Equal(base.cur.ID, id)
		touched := false
		for _, s := range stops {
			inStop := s.ok && bytes.Equal(s.cur.ID, id)
			if inStop != inBase || (inStop && s.cur.Hash != base.cur.Hash) {
				touched = true
			}
			if inStop {
				if err := s.advance(); err != nil {
					return plan, fmt.Errorf("stopped generation index: %w", err)
				}
			}
		}

		switch {
		case inNew && !inBase:
			plan.Inserted++
			plan.Upserts = append(plan.Upserts, nw.cur.Line)
		case inNew && nw.cur.Hash != base.cur.Hash:
			plan.Updated++
			plan.Upserts = append(plan.Upserts, nw.cur.Line)
		case inNew:
			plan.Unchanged++
			if touched {
				plan.Repaired++
				plan.Upserts = append(plan.Upserts, nw.cur.Line)
			}
		case inBase:
			plan.Deleted++
			plan.Deletes = append(plan.Deletes, string(id))
		case touched:
			plan.Repaired++
			plan.Deletes = append(plan.Deletes, string(id))
		}
		if inNew {
			if index != nil {
				if err := index.AddRef(id, nw.cur.Hash); err != nil {
					return plan, err
				}
			}
			if err := nw.advance(); err != nil {
				return plan, fmt.Errorf("new entries: %w", err)
			}
		}
		if inBase {
			if err := base.advance(); err != nil {
				return plan, fmt.Errorf("baseline index: %w", err)
			}
		}
	}
}

// mergeBaseline is MergeRefs without stopped generations (the usual
// case): one comparison an id decides.
func mergeBaseline(nw, base *cursor, index *IndexWriter) (Plan, error) {
	var plan Plan
	for nw.ok || base.ok {
		c := -1
		switch {
		case !nw.ok:
			c = 1
		case base.ok:
			c = bytes.Compare(nw.cur.ID, base.cur.ID)
		}
		if c > 0 { // only in the baseline
			plan.Deleted++
			plan.Deletes = append(plan.Deletes, string(base.cur.ID))
			if err := base.advance(); err != nil {
				return plan, fmt.Errorf("baseline index: %w", err)
			}
			continue
		}
		switch {
		case c < 0:
			plan.Inserted++
			plan.Upserts = append(plan.Upserts, nw.cur.Line)
		case nw.cur.Hash != base.cur.Hash:
			plan.Updated++
			plan.Upserts = append(plan.Upserts, nw.cur.Line)
		default:
			plan.Unchanged++
		}
		if index != nil {
			if err := index.AddRef(nw.cur.ID, nw.cur.Hash); err != nil {
				return plan, err
			}
		}
		if err := nw.advance(); err != nil {
			return plan, fmt.Errorf("new entries: %w", err)
		}
		if c == 0 {
			if err := base.advance(); err != nil {
				return plan, fmt.Errorf("baseline index: %w", err)
			}
		}
	}
	return plan, nil
}

type cursor struct {
	it      RefIterator
	cur     Ref
	ok      bool
	prev    []byte
	ordered bool // the iterator checks its order itself
}

// orderedIterator is a RefIterator that yields strictly increasing ids or
// an error, so that a cursor need not check.
type orderedIterator interface {
	RefIterator
	strictlyIncreasing()
}

// StrictlyIncreasing marks it as an iterator whose ids strictly increase
// (or that fails), so that a merge need not check their order: for an
// iterator that guarantees its order itself, as the diff's sorter does when
// it found no duplicate.
func StrictlyIncreasing(it RefIterator) RefIterator { return strictRefs{it} }

// strictRefs is an iterator StrictlyIncreasing vouches for.
type strictRefs struct{ RefIterator }

func (strictRefs) strictlyIncreasing() {}

func newCursor(it RefIterator) (*cursor, error) {
	c := &cursor{it: it}
	if it == nil {
		return c, nil
	}
	_, c.ordered = it.(orderedIterator)
	return c, c.advance()
}

func (c *cursor) advance() error {
	check := c.ok && !c.ordered
	if check {
		c.prev = append(c.prev[:0], c.cur.ID...)
	}
	e, err := c.it.NextRef()
	if err == io.EOF {
		c.ok = false
		return nil
	}
	if err != nil {
		c.ok = false
		return err
	}
	if check && bytes.Compare(e.ID, c.prev) <= 0 {
		return fmt.Errorf("index out of order: %q after %q", e.ID, c.prev)
	}
	c.cur, c.ok = e, true
	return nil
}
