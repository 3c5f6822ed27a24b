package pgstore

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/events/message"
)

// UpdateDirectory brings the product directory (control database) in line
// with one chunk of gen whose shard transaction has committed: an upsert
// makes (product_id, retailer) a live entry, a delete a tombstone, both
// stamped with gen and only where the entry's generation is older. It is
// idempotent (a re-applied chunk writes nothing) and order-proof (a late
// older chunk changes nothing a newer one wrote), so it is safe to repeat
// for a chunk that was delivered twice. The directory lives in another
// database than the shard, so it cannot share the chunk's transaction: the
// caller runs it after the shard commit and fails the message when it fails.
func (c *Control) UpdateDirectory(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp) error {
	ids, deleted := directoryOps(ops)
	if len(ids) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		// The retailer-level fence of the directory (control 0110): once
		// collection removed the entries of products deleted at or below
		// the floor, a chunk of an older generation changes nothing.
		var floor int64
		if err := tx.QueryRow(ctx, q("directory_floor"), retailerID).Scan(&floor); err != nil {
			return err
		}
		if gen < floor {
			return nil
		}
		// A first load's entries are all new: they are COPYed, at the
		// speed of COPY (an insert of a new entry changes no other; an
		// entry that appears meanwhile fails the primary key, and the
		// fenced upsert decides). A day's change finds an entry at once.
		var known bool
		if err := tx.QueryRow(ctx, q("directory_known"), retailerID, ids).Scan(&known); err != nil {
			return err
		}
		if !known {
			now := time.Now()
			_, exists, err := copyNewRows(ctx, tx, "product_directory", []string{"product_id", "retailer_id", "generation", "deleted", "updated_at"},
				len(ids), func(i int) ([]any, error) {
					return []any{ids[i], retailerID, gen, deleted[i], now}, nil
				})
			if err != nil || !exists {
				return err
			}
		}
		_, err := tx.Exec(ctx, q("directory_apply"), retailerID, gen, ids, deleted)
		return err
	})
	if err != nil {
		return fmt.Errorf("update product directory for %s/%d (%d products): %w", retailerID, gen, len(ids), err)
	}
	return nil
}

// directoryOps are a chunk's directory entries: one per product (the last
// op wins: true for a delete), in byte order, so that two chunks touching
// the same products lock their rows in the same order.
func directoryOps(ops []message.ChunkOp) (ids []string, deleted []bool) {
	last := make(map[string]bool, len(ops))
	for _, op := range ops {
		last[op.ProductID] = op.Op == message.OpDelete
	}
	ids = make([]string, 0, len(last))
	for id := range last {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	deleted = make([]bool, len(ids))
	for i, id := range ids {
		deleted[i] = last[id]
	}
	return ids, deleted
}

// DirectoryRetailers returns, in order, the retailers (at most limit) whose
// catalog holds a live product with this id, as the directory on the
// control writer knows it. The storefront reads it through the control
// database's replicas instead (Stores.DirectoryRetailers).
func (c *Control) DirectoryRetailers(ctx context.Context, productID string, limit int) ([]string, error) {
	return directoryRetailers(ctx, c.pool, productID, limit)
}

func directoryRetailers(ctx context.Context, db *pgxpool.Pool, productID string, limit int) ([]string, error) {
	rows, err := db.Query(ctx, q("directory_lookup"), productID, limit)
	if err != nil {
		return nil, fmt.Errorf("look up product %q in the directory: %w", productID, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("look up product %q in the directory: %w", productID, err)
	}
	return ids, nil
}

// ChunkCounted reports whether chunk seq of gen has been counted, that is
// whether a transaction that wrote its rows has committed. A redelivered
// chunk that finds its generation superseded still needs its directory
// update when an earlier delivery committed and stopped before it.
func (s *Shard) ChunkCounted(ctx context.Context, retailerID string, gen int64, seq int) (bool, error) {
	var counted bool
	if err := s.pool.QueryRow(ctx, q("chunk_counted"), retailerID, gen, seq).Scan(&counted); err != nil {
		return false, fmt.Errorf("chunk %d of %s/%d counted: %w", seq, retailerID, gen, err)
	}
	return counted, nil
}
