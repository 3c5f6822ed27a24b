package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Fence returns a retailer's generation counters; a retailer that never
// reserved has none (all zero).
func (s *Shard) Fence(ctx context.Context, retailerID string) (catalog.Fence, error) {
	var f catalog.Fence
	err := s.pool.QueryRow(ctx, q("select_state"), retailerID).Scan(&f.Reserved, &f.Latest, &f.Applied, &f.AppliedProducts)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Fence{}, nil
	}
	if err != nil {
		return f, fmt.Errorf("fence of %s: %w", retailerID, err)
	}
	return f, nil
}

// Progress returns what a generation has done beyond its status;
// catalog.ErrNotFound when it was never reserved.
func (s *Shard) Progress(ctx context.Context, retailerID string, gen int64) (catalog.Progress, error) {
	var p catalog.Progress
	var seqs []int32
	err := s.pool.QueryRow(ctx, q("generation_progress"), retailerID, gen).Scan(
		&p.StateChangedAt, &p.LastChunkAt, &seqs, &p.Redrives, &p.LastRedriveAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, catalog.Errorf(catalog.ErrNotFound, "generation_not_found", "retailer %q has no generation %d", retailerID, gen)
	}
	if err != nil {
		return p, fmt.Errorf("progress of %s/%d: %w", retailerID, gen, err)
	}
	for _, seq := range seqs {
		p.AppliedSeqs = append(p.AppliedSeqs, int(seq))
	}
	return p, nil
}

// CatalogRow returns a product's row on the writer, a tombstone included;
// catalog.ErrNotFound when the shard never had it.
func (s *Shard) CatalogRow(ctx context.Context, retailerID, productID string) (catalog.CatalogRow, error) {
	var r catalog.CatalogRow
	err := s.pool.QueryRow(ctx, q("catalog_row"), retailerID, productID).Scan(&r.Attributes, &r.Generation, &r.Deleted, &r.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, catalog.Errorf(catalog.ErrNotFound, "product_not_found", "retailer %q has no product %q", retailerID, productID)
	}
	if err != nil {
		return r, fmt.Errorf("row %s/%s: %w", retailerID, productID, err)
	}
	return r, nil
}

// Fence is Shard.Fence on the retailer's shard.
func (s *Stores) Fence(ctx context.Context, retailerID string) (catalog.Fence, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.Fence{}, err
	}
	return sh.Fence(ctx, retailerID)
}

// Progress is Shard.Progress on the retailer's shard.
func (s *Stores) Progress(ctx context.Context, retailerID string, gen int64) (catalog.Progress, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.Progress{}, err
	}
	return sh.Progress(ctx, retailerID, gen)
}

// CatalogRow is Shard.CatalogRow on the retailer's shard.
func (s *Stores) CatalogRow(ctx context.Context, retailerID, productID string) (catalog.CatalogRow, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.CatalogRow{}, err
	}
	return sh.CatalogRow(ctx, retailerID, productID)
}

// ReplicaHealth says how the read replicas of the retailer's shard look to
// this process (none: the storefront reads the writer).
func (s *Stores) ReplicaHealth(ctx context.Context, retailerID string) (catalog.ReplicaHealth, error) {
	rs, err := s.ReadersFor(ctx, retailerID)
	if err != nil {
		return catalog.ReplicaHealth{}, err
	}
	st := rs.Stats()
	h := catalog.ReplicaHealth{Replicas: len(st.Replicas), MaxLag: rs.o.MaxLag}
	for _, r := range st.Replicas {
		if r.Down {
			h.Down++
		}
		if r.Lagging {
			h.Lagging++
		}
	}
	return h, nil
}

// Stalled lists the shard's generations with work left whose last
// progress is older than before, oldest first, at most limit.
func (s *Shard) Stalled(ctx context.Context, before time.Time, limit int) ([]catalog.StalledGeneration, error) {
	rows, err := s.pool.Query(ctx, q("stalled_generations"), before, limit)
	if err != nil {
		return nil, fmt.Errorf("stalled generations: %w", err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (catalog.StalledGeneration, error) {
		var g catalog.StalledGeneration
		var state string
		err := row.Scan(&g.RetailerID, &g.Generation, &state, &g.Confirmed, &g.ChunksTotal, &g.Changed, &g.Redrives, &g.LastMoved)
		g.State = catalog.State(state)
		return g, err
	})
}

// RecordRedrive records that the sweeper re-drove a generation and returns
// how many times it has now.
func (s *Shard) RecordRedrive(ctx context.Context, retailerID string, gen int64, action string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, q("record_redrive"), retailerID, gen, action).Scan(&n); err != nil {
		return 0, fmt.Errorf("record the re-drive of %s/%d: %w", retailerID, gen, err)
	}
	return n, nil
}

// Stalled lists, over every shard, the generations with work left whose
// last progress is older than before, at most limit of each shard.
func (s *Stores) Stalled(ctx context.Context, before time.Time, limit int) ([]catalog.StalledGeneration, error) {
	var out []catalog.StalledGeneration
	for i, sh := range s.Shards {
		list, err := sh.Stalled(ctx, before, limit)
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
		out = append(out, list...)
	}
	return out, nil
}

// RecordRedrive is Shard.RecordRedrive on the retailer's shard.
func (s *Stores) RecordRedrive(ctx context.Context, retailerID string, gen int64, action string) (int, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	return sh.RecordRedrive(ctx, retailerID, gen, action)
}
