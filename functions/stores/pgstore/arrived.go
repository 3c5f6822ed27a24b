package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AwaitingUploads returns the retailer's slots (generations) still
// awaiting their upload and within their expiry, dry runs left out,
// oldest first, at most limit: those a new reservation would supersede.
func (s *Shard) AwaitingUploads(ctx context.Context, retailerID string, limit int) ([]int64, error) {
	rows, err := s.pool.Query(ctx, q("awaiting_uploads"), retailerID, limit)
	if err != nil {
		return nil, fmt.Errorf("awaiting uploads of %s: %w", retailerID, err)
	}
	gens, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("awaiting uploads of %s: %w", retailerID, err)
	}
	return gens, nil
}

// AwaitingUploads is Shard.AwaitingUploads on the retailer's shard.
func (s *Stores) AwaitingUploads(ctx context.Context, retailerID string, limit int) ([]int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.AwaitingUploads(ctx, retailerID, limit)
}
