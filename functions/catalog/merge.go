package catalog

import (
	"fmt"
	"io"
)

// Plan is what a new snapshot changes, relative to the retailer's applied
// baseline, plus the repairs of rows that stopped generations may have written.
type Plan struct {
	// Upserts are positions in the new snapshot's sorted entries whose rows
	// must be sent as upserts: inserts, updates and repairs.
	Upserts []int
	// Deletes are product ids to delete: deletions and repairs of ids that a
	// stopped generation may have inserted.
	Deletes []string

	Inserted, Updated, Deleted, Unchanged int64
	// Repaired counts ids unchanged against the baseline that are sent anyway
	// because a stopped generation may have changed them (I5). They are
	// included in Unchanged; the apply writes them only when the row differs.
	Repaired int64
}

// Ops is the number of row operations the plan sends.
func (p Plan) Ops() int { return len(p.Upserts) + len(p.Deletes) }

// Merge walks the new snapshot's sorted entries against the baseline index
// (the retailer's applied generation) and the indexes of every generation
// newer than the baseline that may have written rows before it was stopped.
//
// For each product id: present in new and not in baseline -> insert; in both
// with another hash -> update; only in baseline -> delete; same in both ->
// unchanged, unless some stopped generation had it different from the
// baseline (other hash, added or removed), in which case the id is sent again
// so the catalog returns to the new snapshot's value (I5).
func Merge(newEntries []IndexEntry, baseline IndexIterator, stopped []IndexIterator) (Plan, error) {
	var plan Plan
	base, err := newCursor(baseline)
	if err != nil {
		return plan, fmt.Errorf("baseline index: %w", err)
	}
	stops := make([]*cursor, len(stopped))
	for i, it := range stopped {
		if stops[i], err = newCursor(it); err != nil {
			return plan, fmt.Errorf("stopped generation index %d: %w", i, err)
		}
	}
	ni := 0
	for {
		// The smallest id among all inputs.
		var id string
		have := false
		if ni < len(newEntries) {
			id, have = newEntries[ni].ProductID, true
		}
		if base.ok && (!have || base.cur.ProductID < id) {
			id, have = base.cur.ProductID, true
		}
		for _, s := range stops {
			if s.ok && (!have || s.cur.ProductID < id) {
				id, have = s.cur.ProductID, true
			}
		}
		if !have {
			return plan, nil
		}

		inNew := ni < len(newEntries) && newEntries[ni].ProductID == id
		inBase := base.ok && base.cur.ProductID == id
		touched := false
		for _, s := range stops {
			inStop := s.ok && s.cur.ProductID == id
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
			plan.Upserts = append(plan.Upserts, ni)
		case inNew && newEntries[ni].Hash != base.cur.Hash:
			plan.Updated++
			plan.Upserts = append(plan.Upserts, ni)
		case inNew:
			plan.Unchanged++
			if touched {
				plan.Repaired++
				plan.Upserts = append(plan.Upserts, ni)
			}
		case inBase:
			plan.Deleted++
			plan.Deletes = append(plan.Deletes, id)
		case touched:
			plan.Repaired++
			plan.Deletes = append(plan.Deletes, id)
		}
		if inNew {
			ni++
		}
		if inBase {
			if err := base.advance(); err != nil {
				return plan, fmt.Errorf("baseline index: %w", err)
			}
		}
	}
}

type cursor struct {
	it  IndexIterator
	cur IndexEntry
	ok  bool
}

func newCursor(it IndexIterator) (*cursor, error) {
	c := &cursor{it: it}
	if it == nil {
		return c, nil
	}
	return c, c.advance()
}

func (c *cursor) advance() error {
	prev := c.cur.ProductID
	had := c.ok
	e, err := c.it.Next()
	if err == io.EOF {
		c.ok = false
		return nil
	}
	if err != nil {
		c.ok = false
		return err
	}
	if had && e.ProductID <= prev {
		return fmt.Errorf("index out of order: %q after %q", e.ProductID, prev)
	}
	c.cur, c.ok = e, true
	return nil
}
