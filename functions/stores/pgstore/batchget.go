package pgstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// ProductsByID returns the retailer's live products among productIDs, in
// the order of productIDs; absent and deleted ids are left out. The ids
// must be distinct (the caller removes duplicates). One query on the
// retailer's shard, read like Product: a replica within the staleness
// bound (or the writer); with fresh, the writer. catalog.ErrNotFound when
// the retailer is unknown.
func (s *Stores) ProductsByID(ctx context.Context, retailerID string, productIDs []string, fresh bool) ([]catalog.Product, error) {
	rs, err := s.ReadersFor(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return rs.ProductsByID(ctx, source(fresh), retailerID, productIDs)
}

// ProductsByID returns the retailer's live products among productIDs (all
// distinct), in their order, in one query on src.
func (rs *ReaderSet) ProductsByID(ctx context.Context, src Source, retailerID string, productIDs []string) ([]catalog.Product, error) {
	if len(productIDs) == 0 {
		return nil, nil
	}
	params := [][]byte{[]byte(retailerID), appendTextArray(nil, productIDs)}
	found := make([]catalog.Product, len(productIDs))
	ok := make([]bool, len(productIDs))
	err := rs.read(ctx, src, func(ctx context.Context, db *pgxpool.Pool) error {
		clear(ok) // a retry on the next server starts over
		return execLookup(ctx, db, "storefront_products_by_id", params, func(vals [][]byte) error {
			if len(vals) != 4 || len(vals[0]) != 8 {
				return errors.New("unexpected row")
			}
			i := int64(binary.BigEndian.Uint64(vals[0]))
			if i < 1 || int(i) > len(productIDs) {
				return fmt.Errorf("key %d out of range", i)
			}
			p, err := decodeLookupRow(retailerID, productIDs[i-1], vals[1:])
			if err != nil {
				return err
			}
			found[i-1], ok[i-1] = p, true
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("batch-get %d products of %s: %w", len(productIDs), retailerID, err)
	}
	out := make([]catalog.Product, 0, len(productIDs))
	for i, p := range found {
		if ok[i] {
			out = append(out, p)
		}
	}
	return out, nil
}
