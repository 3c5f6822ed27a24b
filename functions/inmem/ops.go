package inmem

import (
	"context"
	"slices"
	"time"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// redrive is the sweeper's record of one generation.
type redrive struct {
	count  int
	last   time.Time
	action string
}

// Fence returns a retailer's generation counters (all zero before its
// first reservation); catalog.ErrNotFound for an unknown retailer.
func (s *Store) Fence(ctx context.Context, retailerID string) (catalog.Fence, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil || st == nil {
		return catalog.Fence{}, err
	}
	return catalog.Fence{Reserved: st.reserved, Latest: st.latest, Applied: st.applied, AppliedProducts: st.appliedProducts}, nil
}

// Progress returns what a generation has done beyond its status.
func (s *Store) Progress(ctx context.Context, retailerID string, gen int64) (catalog.Progress, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil {
		return catalog.Progress{}, err
	}
	if st == nil || st.gens[gen] == nil {
		return catalog.Progress{}, generationNotFound(retailerID, gen)
	}
	p := catalog.Progress{StateChangedAt: st.gens[gen].stateChangedAt}
	for key, at := range st.chunkTimes {
		if key[0] != gen {
			continue
		}
		p.AppliedSeqs = append(p.AppliedSeqs, int(key[1]))
		if p.LastChunkAt == nil || at.After(*p.LastChunkAt) {
			at := at
			p.LastChunkAt = &at
		}
	}
	slices.Sort(p.AppliedSeqs)
	if r := st.redrives[gen]; r != nil {
		last := r.last
		p.Redrives, p.LastRedriveAt = r.count, &last
	}
	return p, nil
}

// CatalogRow returns a product's row, a tombstone included;
// catalog.ErrNotFound when the retailer never had it.
func (s *Store) CatalogRow(ctx context.Context, retailerID, productID string) (catalog.CatalogRow, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil {
		return catalog.CatalogRow{}, err
	}
	var row *productRow
	if st != nil {
		row = st.products[productID]
	}
	if row == nil {
		return catalog.CatalogRow{}, catalog.Errorf(catalog.ErrNotFound, "product_not_found", "retailer %q has no product %q", retailerID, productID)
	}
	return catalog.CatalogRow{Attributes: slices.Clone(row.attributes), Generation: row.generation, Deleted: row.deleted, UpdatedAt: row.updatedAt}, nil
}

// Tamper changes a product row behind the pipeline's back, as a manual
// UPDATE, DELETE or INSERT in a shard database would (tests of why and of
// reconciliation): nil attributes remove the row; otherwise the row gets
// them, keeping its generation and its stored hash (a new row takes the
// retailer's applied generation and a hash of nothing).
func (s *Store) Tamper(retailerID, productID string, attributes []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[retailerID]
	if st == nil {
		return
	}
	if attributes == nil {
		delete(st.products, productID)
		return
	}
	row := st.products[productID]
	if row == nil {
		row = &productRow{generation: st.applied, hash: make([]byte, 16)}
		st.products[productID] = row
	}
	row.attributes, row.deleted, row.updatedAt = slices.Clone(attributes), false, s.now()
}

// Stalled lists the generations with work left (received, diffing,
// applying, a confirmed hold) whose last progress is older than before,
// oldest first, at most limit.
func (s *Store) Stalled(ctx context.Context, before time.Time, limit int) ([]catalog.StalledGeneration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.StalledGeneration
	for id, st := range s.state {
		for gen, g := range st.gens {
			switch g.State {
			case catalog.StateReceived, catalog.StateDiffing, catalog.StateApplying:
			case catalog.StateHeld:
				if !g.Confirmed {
					continue
				}
			default:
				continue
			}
			moved := g.stateChangedAt
			for key, at := range st.chunkTimes {
				if key[0] == gen && at.After(moved) {
					moved = at
				}
			}
			redrives := 0
			if r := st.redrives[gen]; r != nil {
				redrives = r.count
				if r.last.After(moved) {
					moved = r.last
				}
			}
			if !moved.Before(before) {
				continue
			}
			out = append(out, catalog.StalledGeneration{RetailerID: id, Generation: gen, State: g.State, Confirmed: g.Confirmed,
				ChunksTotal: g.ChunksTotal, Changed: g.Inserted + g.Updated + g.Deleted, Redrives: redrives, LastMoved: moved})
		}
	}
	slices.SortFunc(out, func(a, b catalog.StalledGeneration) int { return a.LastMoved.Compare(b.LastMoved) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// RecordRedrive records that the sweeper re-drove a generation and returns
// how many times it has now.
func (s *Store) RecordRedrive(ctx context.Context, retailerID string, gen int64, action string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.state[retailerID]
	if st == nil {
		return 0, retailerNotFound(retailerID)
	}
	if st.redrives == nil {
		st.redrives = map[int64]*redrive{}
	}
	r := st.redrives[gen]
	if r == nil {
		r = &redrive{}
		st.redrives[gen] = r
	}
	r.count++
	r.last, r.action = s.now(), action
	return r.count, nil
}
