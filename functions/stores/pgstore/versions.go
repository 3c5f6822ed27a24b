package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The consumers' version state (DESIGN 8): per consumer, the highest
// generation it has written (analytics: per product) or delivered
// (webhooks: per event id) of each key. A consumer reads it before its
// work (NewerVersions), makes its network call (a Parquet PUT, a webhook
// POST) with no transaction open, and records it after (RecordVersions):
// no transaction ever stays open across the call (I12), so a slow bucket
// or receiver holds no connection of the shard. Two consumers doing the
// same work at once may both do it; the record only raises, so the
// outcome is the same (at least once).

// NewerVersions reports, for keys of a retailer (a key may repeat), whether
// each generation is higher than the one consumer has recorded for its key
// (nothing recorded: it is). It only reads, in one statement: no
// transaction stays open and no row is locked.
func (s *Shard) NewerVersions(ctx context.Context, consumer, retailerID string, keys []string, generations []int64) ([]bool, error) {
	if len(keys) != len(generations) {
		return nil, fmt.Errorf("newer versions: %d keys, %d generations", len(keys), len(generations))
	}
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, q("newer_versions"), consumer, retailerID, keys, generations)
	if err != nil {
		return nil, fmt.Errorf("newer versions of %s for %s: %w", retailerID, consumer, err)
	}
	newer, err := pgx.CollectRows(rows, pgx.RowTo[bool])
	if err != nil {
		return nil, fmt.Errorf("newer versions of %s for %s: %w", retailerID, consumer, err)
	}
	if len(newer) != len(keys) {
		return nil, fmt.Errorf("newer versions of %s for %s: %d answers for %d keys", retailerID, consumer, len(newer), len(keys))
	}
	return newer, nil
}

// RecordVersions records, for keys of a retailer (a key may repeat: its
// highest generation counts), each generation where it is higher than the
// one consumer has recorded, and leaves the others: a record only raises,
// so recording again, or after a newer record, changes nothing. One
// statement, its own transaction; keys are locked in key order, so
// concurrent records never deadlock.
func (s *Shard) RecordVersions(ctx context.Context, consumer, retailerID string, keys []string, generations []int64) error {
	if len(keys) != len(generations) {
		return fmt.Errorf("record versions: %d keys, %d generations", len(keys), len(generations))
	}
	if len(keys) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, q("record_versions"), consumer, retailerID, keys, generations); err != nil {
		return fmt.Errorf("record versions of %s for %s: %w", retailerID, consumer, err)
	}
	return nil
}

// NewerVersions is Shard.NewerVersions on the retailer's shard.
func (s *Stores) NewerVersions(ctx context.Context, consumer, retailerID string, keys []string, generations []int64) ([]bool, error) {
	shard, err := s.RetailerShard(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return s.Shards[shard].NewerVersions(ctx, consumer, retailerID, keys, generations)
}

// RecordVersions is Shard.RecordVersions on the retailer's shard.
func (s *Stores) RecordVersions(ctx context.Context, consumer, retailerID string, keys []string, generations []int64) error {
	shard, err := s.RetailerShard(ctx, retailerID)
	if err != nil {
		return err
	}
	return s.Shards[shard].RecordVersions(ctx, consumer, retailerID, keys, generations)
}
