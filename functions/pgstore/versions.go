package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// AdvanceVersions records, for products of a retailer (each once), the
// generation of the change consumer is about to write, where it is higher
// than the recorded one, and calls write with that report before the
// transaction commits: when write fails, nothing is recorded. Concurrent
// calls for the same products wait for each other (row locks), so a change
// is reported newer to one of them only.
func (s *Shard) AdvanceVersions(ctx context.Context, consumer, retailerID string, productIDs []string, generations []int64,
	write func(newer []bool) error) error {
	if len(productIDs) != len(generations) {
		return fmt.Errorf("advance versions: %d products, %d generations", len(productIDs), len(generations))
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, q("advance_versions"), consumer, retailerID, productIDs, generations)
		if err != nil {
			return fmt.Errorf("advance versions of %s for %s: %w", retailerID, consumer, err)
		}
		advanced, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("advance versions of %s for %s: %w", retailerID, consumer, err)
		}
		set := make(map[string]bool, len(advanced))
		for _, id := range advanced {
			set[id] = true
		}
		newer := make([]bool, len(productIDs))
		for i, id := range productIDs {
			newer[i] = set[id]
		}
		return write(newer)
	})
}

// AdvanceVersions is Shard.AdvanceVersions on the retailer's shard.
func (s *Stores) AdvanceVersions(ctx context.Context, consumer, retailerID string, productIDs []string, generations []int64,
	write func(newer []bool) error) error {
	shard, err := s.RetailerShard(ctx, retailerID)
	if err != nil {
		return err
	}
	return s.Shards[shard].AdvanceVersions(ctx, consumer, retailerID, productIDs, generations, write)
}
