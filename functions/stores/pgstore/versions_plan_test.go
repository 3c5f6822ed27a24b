package pgstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/testenv"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// The consumers' version check probes each key by the primary key, even
// on a table the planner knows nothing of (never analyzed: right after a
// first load recorded its versions, where a join planned on no statistics
// compared every key with every row, a minute of a shard's CPU for 5,000
// keys against 200,000 rows).
func TestNewerVersionsProbesByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedDatabase(t, testenv.Name("verplan"), catalogsql.Shard)
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"consumer_versions"}, []string{"consumer", "retailer_id", "product_id", "generation"},
		pgx.CopyFromSlice(200_000, func(i int) ([]any, error) {
			return []any{"analytics", "r1", fmt.Sprintf("SKU-%07d", i), int64(1)}, nil
		}))
	require.NoError(t, err)
	keys, gens := make([]string, 5000), make([]int64, 5000)
	for i := range keys {
		keys[i], gens[i] = fmt.Sprintf("SKU-%07d", i*40), 2
	}
	rows, err := pool.Query(ctx, "EXPLAIN (FORMAT TEXT) "+q("newer_versions"), "analytics", "r1", keys, gens)
	require.NoError(t, err)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	plan := strings.Join(lines, "\n")
	t.Logf("plan:\n%s", plan)
	requireKeyProbes(t, plan, "consumer_versions", "newer_versions")
	newer, err := (&Shard{pool: pool}).NewerVersions(ctx, "analytics", "r1", append(keys, "absent"), append(gens, 1))
	require.NoError(t, err)
	require.Len(t, newer, 5001)
	for i, n := range newer {
		require.True(t, n, "key %d", i)
	}
	newer, err = (&Shard{pool: pool}).NewerVersions(ctx, "analytics", "r1", []string{"SKU-0000001", "SKU-0000001"}, []int64{1, 0})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, newer)
}

// The key lookups against products (the storefront's batched lookups and
// batch-get, a delta's current values, a plan's live values) probe each
// key by the primary key on a table never analyzed, as after a first load
// of a new retailer: never a scan of the retailer's every row.
func TestKeyLookupsProbeByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := migratedDatabase(t, testenv.Name("keyplan"), catalogsql.Shard)
	_, err := pool.CopyFrom(ctx, pgx.Identifier{"products"},
		[]string{"retailer_id", "product_id", "attributes", "content_hash", "generation", "deleted"},
		pgx.CopyFromSlice(200_000, func(i int) ([]any, error) {
			return []any{"r1", fmt.Sprintf("SKU-%07d", i), []byte(`{"v":"1"}`), []byte{1}, int64(1), false}, nil
		}))
	require.NoError(t, err)
	idsOf := func(n int) []string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("SKU-%07d", i*(200_000/n))
		}
		return ids
	}
	retailers := make([]string, 100)
	for i := range retailers {
		retailers[i] = "r1"
	}
	ids, batch := idsOf(100), idsOf(1000) // a batch-get's, and a batch of the diff's reads (currentBatch)
	for _, c := range []struct {
		query string
		args  []any
	}{
		{"storefront_product_batch", []any{retailers, ids}},
		{"storefront_products_by_id", []any{"r1", ids}},
		{"current_products", []any{"r1", batch}},
		{"product_attributes", []any{"r1", batch}},
	} {
		rows, err := pool.Query(ctx, "EXPLAIN (FORMAT TEXT) "+q(c.query), c.args...)
		require.NoError(t, err, c.query)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, c.query)
		plan := strings.Join(lines, "\n")
		requireKeyProbes(t, plan, "products", c.query)
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM ("+strings.TrimSuffix(strings.TrimSpace(q(c.query)), ";")+") AS x", c.args...).Scan(&n), c.query)
		require.Equal(t, len(c.args[1].([]string)), n, c.query)
	}
	// Reconciliation's repair upsert, in the repair's transaction (its
	// delete's UPDATE keeps "= ANY": queries_ops.sql says why).
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, q("stage_plans"))
	require.NoError(t, err)
	attrs, hashes := make([]string, len(batch)), make([][]byte, len(batch))
	for i := range batch {
		attrs[i], hashes[i] = `{"v":"2"}`, []byte{2}
	}
	for _, c := range []struct {
		query string
		args  []any
	}{
		{"repair_upsert", []any{"r1", int64(1), batch, attrs, hashes}},
	} {
		rows, err := tx.Query(ctx, "EXPLAIN (FORMAT TEXT) "+q(c.query), c.args...)
		require.NoError(t, err, c.query)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err, c.query)
		plan := strings.Join(lines, "\n")
		require.NotContains(t, plan, "Seq Scan on products", "%s:\n%s", c.query, plan)
		require.NotContains(t, plan, "Bitmap Heap Scan on products", "%s:\n%s", c.query, plan)
		for _, line := range lines {
			if strings.Contains(line, "Index Cond:") && strings.Contains(line, "retailer_id") {
				require.Contains(t, line, "product_id", "%s: an index condition without the product id:\n%s", c.query, plan)
			}
		}
	}
}

// requireKeyProbes checks that a plan reads table only by probes of its
// primary key with the product id in the index condition: no sequential
// scan, no hash or materialized side, no index condition without the id.
func requireKeyProbes(t *testing.T, plan, table, query string) {
	t.Helper()
	require.NotContains(t, plan, "Seq Scan on "+table, "%s:\n%s", query, plan)
	require.NotContains(t, plan, "Hash", "%s:\n%s", query, plan)
	require.NotContains(t, plan, "Materialize", "%s:\n%s", query, plan)
	require.Contains(t, plan, table+"_pkey", "%s:\n%s", query, plan)
	for _, line := range strings.Split(plan, "\n") {
		if strings.Contains(line, "Index Cond:") {
			require.Contains(t, line, "product_id", "%s: an index condition without the product id:\n%s", query, plan)
		}
	}
}
