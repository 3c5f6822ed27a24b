package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// The staged write probes the primary key of products once per op, whatever
// the statistics say. The worst case measured: statistics taken when the
// shard held another retailer's catalog, then a catalog loaded by COPY
// (the planner thinks it has one row); a plan that scanned it per op took
// 52 s for one chunk. Every scan of products in the plan must be a key probe
// (no sequential or bitmap scan, no hash or merge join, no join filter), and
// the statement must write what it should.
func TestStagedWritePlansKeyProbesOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedDatabase(t, testenv.Name("stageplan"), catalogsql.Shard)

	load := func(retailerID string, n int) {
		_, err := pool.CopyFrom(ctx, pgx.Identifier{"products"},
			[]string{"retailer_id", "product_id", "attributes", "content_hash", "generation", "deleted", "updated_at"},
			pgx.CopyFromSlice(n, func(i int) ([]any, error) {
				return []any{retailerID, fmt.Sprintf("SKU-%06d", i), []byte(`{"v":"1"}`), []byte{byte(i), 1}, int64(1), false, time.Now()}, nil
			}))
		require.NoError(t, err)
	}
	load("other", 500)
	_, err := pool.Exec(ctx, "ANALYZE products")
	require.NoError(t, err)
	load("r1", 3000)

	// 1,000 deletes, 1,000 updates, 500 inserts.
	var ops []message.ChunkOp
	for i := 0; i < 2000; i++ {
		id := fmt.Sprintf("SKU-%06d", i)
		if i%2 == 0 {
			ops = append(ops, message.ChunkOp{Op: message.OpDelete, ProductID: id})
		} else {
			ops = append(ops, message.ChunkOp{Op: message.OpUpsert, ProductID: id, Attributes: []byte(`{"v":"2"}`), Hash: "0202"})
		}
	}
	for i := 0; i < 500; i++ {
		ops = append(ops, message.ChunkOp{Op: message.OpUpsert, ProductID: fmt.Sprintf("NEW-%06d", i), Attributes: []byte(`{"v":"2"}`), Hash: "0202"})
	}
	staged, err := stageOps(ops)
	require.NoError(t, err)

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, q("create_apply_stage"))
	require.NoError(t, err)
	_, err = tx.Exec(ctx, q("stage_plans"))
	require.NoError(t, err)
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"apply_stage"}, []string{"product_id", "attributes", "content_hash", "del"},
		pgx.CopyFromSlice(staged.Len(), func(i int) ([]any, error) {
			return []any{staged.ids[i], staged.attrs[i], staged.hashes[i], staged.attrs[i] == nil}, nil
		}))
	require.NoError(t, err)
	rows, err := tx.Query(ctx, "EXPLAIN "+q("stage_write"), "r1", int64(2), staged.Len())
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	for _, bad := range []string{"Seq Scan on products", "Bitmap", "Hash Join", "Hash Anti", "Merge", "Join Filter", "Materialize", "JIT"} {
		require.NotContains(t, plan, bad, plan)
	}
	for _, l := range lines {
		if strings.Contains(l, " on products") && !strings.Contains(l, "Update on") && !strings.Contains(l, "Insert on") {
			require.Regexp(t, `Index (Only )?Scan using products_pkey on products`, l, plan)
		}
	}

	var written int64
	var unchanged []string
	require.NoError(t, tx.QueryRow(ctx, q("stage_write"), "r1", int64(2), staged.Len()).Scan(&written, &unchanged))
	require.EqualValues(t, 2500, written)
	require.Empty(t, unchanged)
	var live, dead int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE NOT deleted), count(*) FILTER (WHERE deleted)
		FROM products WHERE retailer_id = 'r1'`).Scan(&live, &dead))
	require.Equal(t, []int{3000 - 1000 + 500, 1000}, []int{live, dead})
}
