package main

import (
	"context"
	"fmt"
	"time"

	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/inmem"
)

var benchRetailer = catalog.Retailer{ID: "bench", Hold: catalog.DefaultHoldPolicy}

// benchStore is the in-memory catalog store with the bench retailer at
// generation gen, awaiting its upload, whose applied baseline is baseline
// (0: none) of baselineProducts products: the state a diff of gen meets.
func benchStore(ctx context.Context, gen, baseline, baselineProducts int64) (*inmem.Store, error) {
	s := inmem.NewStore()
	if err := s.CreateRetailer(ctx, benchRetailer); err != nil {
		return nil, err
	}
	for g := int64(1); g <= gen; g++ {
		if _, err := s.ReserveGeneration(ctx, benchRetailer.ID, "csv", time.Now().Add(time.Hour), 0); err != nil {
			return nil, err
		}
		if g != baseline {
			continue
		}
		if _, err := s.BeginDiff(ctx, benchRetailer.ID, g, ""); err != nil {
			return nil, err
		}
		if _, err := s.TakeOver(ctx, benchRetailer.ID, g); err != nil {
			return nil, err
		}
		if err := s.StartApplying(ctx, benchRetailer.ID, g, catalog.Counts{Products: baselineProducts}, 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// diffOutcome is what the diff of gen decided: its counts and chunks, or
// why it did not apply.
func diffOutcome(ctx context.Context, s *inmem.Store, gen int64) (catalog.GenerationStatus, error) {
	st, err := s.Generation(ctx, benchRetailer.ID, gen)
	if err != nil {
		return st, err
	}
	switch st.State {
	case catalog.StateApplying, catalog.StateApplied:
		return st, nil
	case catalog.StateRejected, catalog.StateHeld:
		return st, fmt.Errorf("snapshot %s: %s line %d: %s", st.State, st.ErrorCode, st.ErrorLine, st.ErrorMessage)
	}
	return st, fmt.Errorf("diff of generation %d ended %s", gen, st.State)
}
