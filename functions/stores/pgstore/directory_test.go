package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

func lookup(t *testing.T, s *pgstore.Stores, productID string) []string {
	t.Helper()
	got, err := s.Control.DirectoryRetailers(context.Background(), productID, 100)
	require.NoError(t, err)
	return got
}

// The directory follows chunks' ops: unique and shared ids, a product
// moving from one retailer to another, a deleted product, a zombie older
// write after a delete, idempotent repeats and out-of-order delivery.
func TestDirectoryFencedByGeneration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	c := s.Control
	up := func(ids ...string) []message.ChunkOp {
		var ops []message.ChunkOp
		for _, id := range ids {
			ops = append(ops, upsert(id, `{"v":"x"}`))
		}
		return ops
	}

	// unique and shared ids
	require.NoError(t, c.UpdateDirectory(ctx, "ra", 1, up("only-a", "shared")))
	require.NoError(t, c.UpdateDirectory(ctx, "rb", 1, up("shared", "moving")))
	require.Equal(t, []string{"ra"}, lookup(t, s, "only-a"))
	require.Equal(t, []string{"ra", "rb"}, lookup(t, s, "shared"))
	require.Empty(t, lookup(t, s, "nobody"))

	// idempotent: the same chunk again changes nothing (and writes no row)
	var before, after int64
	require.NoError(t, c.Pool().QueryRow(ctx, `SELECT sum(xmin::text::bigint) FROM product_directory`).Scan(&before))
	require.NoError(t, c.UpdateDirectory(ctx, "ra", 1, up("only-a", "shared")))
	require.NoError(t, c.Pool().QueryRow(ctx, `SELECT sum(xmin::text::bigint) FROM product_directory`).Scan(&after))
	require.Equal(t, before, after, "a repeated chunk rewrote directory rows")

	// a product moves from rb to rc: deleted by rb's generation 2, inserted by rc
	require.NoError(t, c.UpdateDirectory(ctx, "rb", 2, []message.ChunkOp{del("moving")}))
	require.NoError(t, c.UpdateDirectory(ctx, "rc", 1, up("moving")))
	require.Equal(t, []string{"rc"}, lookup(t, s, "moving"))

	// deleted product: gone from the lookup
	require.NoError(t, c.UpdateDirectory(ctx, "ra", 3, []message.ChunkOp{del("only-a")}))
	require.Empty(t, lookup(t, s, "only-a"))

	// zombie: a late write of an older generation after the delete (I3)
	require.NoError(t, c.UpdateDirectory(ctx, "ra", 2, up("only-a")))
	require.Empty(t, lookup(t, s, "only-a"), "a late older upsert revived a deleted entry")

	// out of order the other way: generation 5 re-adds, then a zombie delete of 4
	require.NoError(t, c.UpdateDirectory(ctx, "ra", 5, up("only-a")))
	require.NoError(t, c.UpdateDirectory(ctx, "ra", 4, []message.ChunkOp{del("only-a")}))
	require.Equal(t, []string{"ra"}, lookup(t, s, "only-a"), "a late older delete removed a newer entry")

	// a delete of a product the directory never saw leaves a tombstone that
	// fences an older upsert arriving later
	require.NoError(t, c.UpdateDirectory(ctx, "rd", 7, []message.ChunkOp{del("ghost")}))
	require.NoError(t, c.UpdateDirectory(ctx, "rd", 6, up("ghost")))
	require.Empty(t, lookup(t, s, "ghost"))

	// the same id twice in one chunk: the last op wins
	require.NoError(t, c.UpdateDirectory(ctx, "re", 1, []message.ChunkOp{upsert("twice", `{}`), del("twice")}))
	require.Empty(t, lookup(t, s, "twice"))

	// the limit caps the candidates
	got, err := c.DirectoryRetailers(ctx, "shared", 1)
	require.NoError(t, err)
	require.Equal(t, []string{"ra"}, got)
}

// ChunkCounted tells a committed chunk from one never applied.
func TestChunkCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	gen := startGeneration(t, sh, 2)
	counted, err := sh.ChunkCounted(ctx, "r1", gen, 0)
	require.NoError(t, err)
	require.False(t, counted)
	_, err = sh.ApplyChunk(ctx, chunkOf("r1", gen, 0), []message.ChunkOp{upsert("a", `{"v":"1"}`)})
	require.NoError(t, err)
	counted, err = sh.ChunkCounted(ctx, "r1", gen, 0)
	require.NoError(t, err)
	require.True(t, counted)
}
