package stack

import (
	"context"
	"fmt"

	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
)

// AnalyticsCatalog reconstructs a retailer's catalog from the analytics
// consumer's Parquet files, as a warehouse query would: per product, the
// row of the highest generation, deletes left out. It also says how many
// files and change rows it read.
func (st *Stack) AnalyticsCatalog(ctx context.Context, retailer string) (c fixtures.Catalog, files, rows int, err error) {
	keys, err := st.Blobs.List(ctx, analytics.RetailerPrefix(retailer))
	if err != nil {
		return nil, 0, 0, err
	}
	var all []analytics.Row
	for _, k := range keys {
		body, err := st.Blobs.Get(ctx, k)
		if err != nil {
			return nil, 0, 0, err
		}
		r, err := analytics.Decode(body)
		if err != nil {
			return nil, 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		all = append(all, r...)
	}
	latest, err := analytics.Latest(all)
	if err != nil {
		return nil, 0, 0, err
	}
	raw := make(map[string][]byte, len(latest))
	for id, attrs := range latest {
		raw[id] = []byte(attrs)
	}
	c, err = fixtures.FromJSON(raw)
	return c, len(keys), len(all), err
}

// OutboxEmpty reports whether every shard's outbox is empty: every change
// event committed so far has been published (none waits, none is parked).
func (st *Stack) OutboxEmpty(ctx context.Context) (bool, error) {
	for _, sh := range st.Stores.Shards {
		h, err := sh.OutboxHealth(ctx)
		if err != nil {
			return false, err
		}
		if h.Pending+h.Parked > 0 {
			return false, nil
		}
	}
	return true, nil
}
