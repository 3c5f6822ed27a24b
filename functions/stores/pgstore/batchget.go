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
// distinct), in their order: on src in one query of their own; through
// AnyReader, like Product, in one query when a lookup slot is free, else
// with the lookups queued meanwhile (lookupBatcher.products).
func (rs *ReaderSet) ProductsByID(ctx context.Context, src Source, retailerID string, productIDs []string) ([]catalog.Product, error) {
	if len(productIDs) == 0 {
		return nil, nil
	}
	if src == AnyReader && rs.lookups != nil {
		return rs.lookups.products(ctx, retailerID, productIDs)
	}
	return rs.productsByIDFrom(ctx, src, retailerID, productIDs)
}

// products answers a batch-get's lookups (distinct ids of one retailer) as
// product does one: in a query of its own when a slot is free, else queued
// with the other lookups and answered by the next shared queries (at most
// maxLookupBatch keys each), so that concurrent batch-gets and single
// lookups share queries instead of each holding a connection.
func (b *lookupBatcher) products(ctx context.Context, retailerID string, ids []string) ([]catalog.Product, error) {
	b.mu.Lock()
	if b.inflight < b.slots {
		b.inflight++
		b.mu.Unlock()
		out, err := b.rs.productsByIDFrom(ctx, AnyReader, retailerID, ids)
		b.next()
		return out, err
	}
	ls := make([]lookup, len(ids))
	for i, id := range ids {
		ls[i] = lookup{retailerID: retailerID, productID: id, done: make(chan struct{})}
		b.queue = append(b.queue, &ls[i])
	}
	b.mu.Unlock()
	out := make([]catalog.Product, 0, len(ids))
	for i := range ls {
		l := &ls[i]
		select {
		case <-l.done:
		case <-ctx.Done():
			// The queued lookups still run (bounded by their timeout); nobody reads them.
			return nil, fmt.Errorf("batch-get %d products of %s: %w", len(ids), retailerID, ctx.Err())
		}
		switch {
		case errors.Is(l.err, catalog.ErrNotFound):
		case l.err != nil:
			return nil, fmt.Errorf("batch-get %d products of %s: %w", len(ids), retailerID, l.err)
		default:
			out = append(out, l.p)
		}
	}
	return out, nil
}

// productsByIDFrom is a batch-get's lookups in one query of their own.
func (rs *ReaderSet) productsByIDFrom(ctx context.Context, src Source, retailerID string, productIDs []string) ([]catalog.Product, error) {
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
