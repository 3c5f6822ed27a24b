package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Concurrent lookups that share queries answer exactly what one lookup at a
// time does: live products with their own attributes, 404 for absent and
// deleted ones, keys of two retailers mixed in one batch.
func TestConcurrentLookupsShareQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	require.NoError(t, s.Control.CreateRetailer(ctx, catalog.Retailer{ID: "r2", Shard: 0, TokenHash: []byte("h2")}))
	sh := s.Shards[0]
	// r1 holds p000-p199, then deletes every fifth; r2 holds p000-p099 with other attributes.
	var ops []message.ChunkOp
	for i := range 200 {
		ops = append(ops, upsert(fmt.Sprintf("p%03d", i), fmt.Sprintf(`{"r": 1, "i": %d}`, i)))
	}
	g := startGeneration(t, sh, 1)
	_, err := sh.ApplyChunk(ctx, chunkOf("r1", g, 0), ops)
	require.NoError(t, err)
	g = startGeneration(t, sh, 1)
	var dels []message.ChunkOp
	for i := 0; i < 200; i += 5 {
		dels = append(dels, del(fmt.Sprintf("p%03d", i)))
	}
	_, err = sh.ApplyChunk(ctx, chunkOf("r1", g, 0), dels)
	require.NoError(t, err)
	ops = ops[:0]
	for i := range 100 {
		ops = append(ops, upsert(fmt.Sprintf("p%03d", i), fmt.Sprintf(`{"r": 2, "i": %d}`, i)))
	}
	_, err = sh.ApplyChunk(ctx, chunkOf("r2", startGenerationOf(t, sh, "r2", 1), 0), ops)
	require.NoError(t, err)

	// One slot: every lookup that arrives while one runs waits for the next batch.
	require.NoError(t, s.AttachReaders(nil, nil, pgstore.ReaderOptions{LookupSlots: 1}))
	rs := s.ShardReaders[0]
	type key struct{ retailer, id string }
	want := func(k key) (string, bool) {
		var n int
		fmt.Sscanf(k.id, "p%03d", &n)
		switch {
		case k.retailer == "r1" && n < 200 && n%5 != 0:
			return fmt.Sprintf(`{"i": %d, "r": 1}`, n), true
		case k.retailer == "r2" && n < 100:
			return fmt.Sprintf(`{"i": %d, "r": 2}`, n), true
		}
		return "", false
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var keys []key
	for range 2000 {
		keys = append(keys, key{[]string{"r1", "r2"}[rng.IntN(2)], fmt.Sprintf("p%03d", rng.IntN(260))})
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for w := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(keys); i += 64 {
				k := keys[i]
				p, err := rs.Product(ctx, pgstore.AnyReader, k.retailer, k.id)
				attrs, ok := want(k)
				switch {
				case !ok && !errors.Is(err, catalog.ErrNotFound):
					errs <- fmt.Errorf("%v: want not found, got %+v, %v", k, p, err)
				case ok && err != nil:
					errs <- fmt.Errorf("%v: %w", k, err)
				case ok && (string(p.Attributes) != attrs || p.RetailerID != k.retailer || p.ProductID != k.id || p.Generation == 0 || p.UpdatedAt.IsZero()):
					errs <- fmt.Errorf("%v: got %+v (%s), want %s", k, p, p.Attributes, attrs)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := rs.Stats()
	require.Positive(t, st.LookupBatches, "concurrent lookups on one slot must share queries")
	require.Greater(t, st.BatchedLookups, 2*st.LookupBatches)
	t.Logf("%d lookups, %d of them in %d shared queries", len(keys), st.BatchedLookups, st.LookupBatches)

	// A caller that gives up gets its context's error; the others are unaffected.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rs.Product(cctx, pgstore.AnyReader, "r1", "p001")
	if err != nil {
		require.ErrorIs(t, err, context.Canceled)
	}
	p, err := rs.Product(ctx, pgstore.AnyReader, "r1", "p001")
	require.NoError(t, err)
	require.JSONEq(t, `{"r": 1, "i": 1}`, string(p.Attributes))
	// The lookups decode the wire themselves: the same row as pgx reads it.
	var fromPgx catalog.Product
	require.NoError(t, sh.Pool().QueryRow(ctx, `SELECT generation, updated_at FROM products WHERE retailer_id = 'r1' AND product_id = 'p001'`).
		Scan(&fromPgx.Generation, &fromPgx.UpdatedAt))
	require.Equal(t, fromPgx.Generation, p.Generation)
	require.True(t, fromPgx.UpdatedAt.Equal(p.UpdatedAt), "updated_at %s, pgx reads %s", p.UpdatedAt, fromPgx.UpdatedAt)
	require.False(t, p.UpdatedAt.Before(time.Now().Add(-time.Hour)))
}

// Ids that need quoting in an array literal come back as themselves, alone
// and in shared queries.
func TestLookupsOfAwkwardIDs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	ids := []string{`a"b`, `c\d`, `{e}`, `f,g`, `h i`, `NULL`, `null`, `ü/ß`, `'q'`, `\"`, ` lead`, `x`}
	var ops []message.ChunkOp
	for i, id := range ids {
		ops = append(ops, upsert(id, fmt.Sprintf(`{"n": %d}`, i)))
	}
	_, err := sh.ApplyChunk(ctx, chunkOf("r1", startGeneration(t, sh, 1), 0), ops)
	require.NoError(t, err)
	require.NoError(t, s.AttachReaders(nil, nil, pgstore.ReaderOptions{LookupSlots: 1}))
	rs := s.ShardReaders[0]
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				for i, id := range ids {
					p, err := rs.Product(ctx, pgstore.AnyReader, "r1", id)
					if !assert.NoError(t, err, "%q round %d", id, round) {
						return
					}
					assert.JSONEq(t, fmt.Sprintf(`{"n": %d}`, i), string(p.Attributes), id)
					assert.Equal(t, id, p.ProductID)
				}
				_, err := rs.Product(ctx, pgstore.AnyReader, "r1", `a"b\`)
				assert.ErrorIs(t, err, catalog.ErrNotFound)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, rs.Stats().LookupBatches)
}
