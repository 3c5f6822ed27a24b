package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// SetAttributeCounts keeps the per-attribute counts of gen's snapshot, read
// whole (the attribute_dropped hold of the next snapshot compares with the
// baseline's, DESIGN 13).
func (s *Shard) SetAttributeCounts(ctx context.Context, retailerID string, gen int64, counts catalog.AttributeCounts) error {
	raw, err := json.Marshal(counts)
	if err != nil {
		return fmt.Errorf("encode attribute counts of %s/%d: %w", retailerID, gen, err)
	}
	if _, err := s.pool.Exec(ctx, q("set_attribute_counts"), retailerID, gen, raw); err != nil {
		return fmt.Errorf("set attribute counts of %s/%d: %w", retailerID, gen, err)
	}
	return nil
}

// AttributeCounts returns the per-attribute counts of gen's snapshot; nil
// for a generation read before they were kept (or never read).
func (s *Shard) AttributeCounts(ctx context.Context, retailerID string, gen int64) (catalog.AttributeCounts, error) {
	var raw []byte
	if err := s.pool.QueryRow(ctx, q("attribute_counts"), retailerID, gen).Scan(&raw); err != nil {
		return nil, fmt.Errorf("attribute counts of %s/%d: %w", retailerID, gen, err)
	}
	if raw == nil {
		return nil, nil
	}
	var counts catalog.AttributeCounts
	if err := json.Unmarshal(raw, &counts); err != nil {
		return nil, fmt.Errorf("decode attribute counts of %s/%d: %w", retailerID, gen, err)
	}
	return counts, nil
}

// ProductAttributes returns the attributes (JSON) of the live products
// among ids; absent and deleted ones are left out.
func (s *Shard) ProductAttributes(ctx context.Context, retailerID string, ids []string) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, q("product_attributes"), retailerID, ids)
	if err != nil {
		return nil, fmt.Errorf("product attributes of %s: %w", retailerID, err)
	}
	defer rows.Close()
	out := make(map[string][]byte, len(ids))
	for rows.Next() {
		var id string
		var attrs []byte
		if err := rows.Scan(&id, &attrs); err != nil {
			return nil, fmt.Errorf("product attributes of %s: %w", retailerID, err)
		}
		out[id] = attrs
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("product attributes of %s: %w", retailerID, err)
	}
	return out, nil
}

// SetAttributeCounts is Shard.SetAttributeCounts on the retailer's shard.
func (s *Stores) SetAttributeCounts(ctx context.Context, retailerID string, gen int64, counts catalog.AttributeCounts) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.SetAttributeCounts(ctx, retailerID, gen, counts)
}

// AttributeCounts is Shard.AttributeCounts on the retailer's shard.
func (s *Stores) AttributeCounts(ctx context.Context, retailerID string, gen int64) (catalog.AttributeCounts, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.AttributeCounts(ctx, retailerID, gen)
}

// ProductAttributes is Shard.ProductAttributes on the retailer's shard.
func (s *Stores) ProductAttributes(ctx context.Context, retailerID string, ids []string) (map[string][]byte, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.ProductAttributes(ctx, retailerID, ids)
}
