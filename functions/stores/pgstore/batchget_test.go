package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// ProductsByID answers, in one query, the live products among the ids in
// the order asked (absent and deleted ones left out), with the attributes
// the single lookup reads, through the readers and from the writer alike;
// ids that need quoting in an array literal come back as themselves; an
// unknown retailer is not found.
func TestProductsByIDInTheOrderAsked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	require.NoError(t, s.Control.CreateRetailer(ctx, catalog.Retailer{ID: "r2", Shard: 0, TokenHash: []byte("h2")}))
	sh := s.Shards[0]
	awkward := []string{`a"b`, `c\d`, `{e}`, `f,g`, `NULL`, `ü/ß`}
	var ops []message.ChunkOp
	for i := range 10 {
		ops = append(ops, upsert(fmt.Sprintf("p%d", i), fmt.Sprintf(`{"i": %d}`, i)))
	}
	for i, id := range awkward {
		ops = append(ops, upsert(id, fmt.Sprintf(`{"awkward": %d}`, i)))
	}
	_, err := sh.ApplyChunk(ctx, chunkOf("r1", startGeneration(t, sh, 1), 0), ops)
	require.NoError(t, err)
	_, err = sh.ApplyChunk(ctx, chunkOf("r1", startGeneration(t, sh, 1), 0), []message.ChunkOp{del("p3")})
	require.NoError(t, err)
	_, err = sh.ApplyChunk(ctx, chunkOf("r2", startGenerationOf(t, sh, "r2", 1), 0), []message.ChunkOp{upsert("p5", `{"other": true}`)})
	require.NoError(t, err)
	require.NoError(t, s.AttachReaders(nil, nil, pgstore.ReaderOptions{}))

	ask := append([]string{"p7", "p3", "absent", "p0"}, awkward...)
	ask = append(ask, "p5")
	for _, fresh := range []bool{false, true} {
		got, err := s.ProductsByID(ctx, "r1", ask, fresh)
		require.NoError(t, err)
		var ids []string
		for _, p := range got {
			ids = append(ids, p.ProductID)
			single, err := s.Product(ctx, "r1", p.ProductID, fresh)
			require.NoError(t, err)
			require.Equal(t, single, p, "as the single lookup reads it")
		}
		require.Equal(t, append(append([]string{"p7", "p0"}, awkward...), "p5"), ids, "fresh %v", fresh)
	}
	_, err = s.ProductsByID(ctx, "nobody", []string{"p1"}, false)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	got, err := s.ProductsByID(ctx, "r2", []string{"p4", "p5"}, false)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.JSONEq(t, `{"other": true}`, string(got[0].Attributes))
}
