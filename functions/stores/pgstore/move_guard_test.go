package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// The move's guard runs once a transaction and retailer when the retailer
// is not moving (shard 0130): what it found holds for the transaction's
// later rows because the transaction keeps the retailer's move lock shared
// to its end, so a move cannot start its log (or freeze) meanwhile. A
// retailer that is being copied has every row logged, in the same
// transaction as rows of a retailer that is not, before and after them,
// and a savepoint rolled back takes the guard's record with it.
func TestMoveGuardOnceATransaction(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := pgstoretest.New(t, pgstoretest.Shards(1))
	pool := s.Shards[0].Pool()
	_, err := pool.Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard)
		VALUES ('copied', 'm-1', 'source', 'copying', 1)`)
	require.NoError(t, err)
	insert := func(tx pgx.Tx, retailer, product string) {
		t.Helper()
		_, err := tx.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
			VALUES ($1, $2, '{"v": 1}', '\x01', 1)`, retailer, product)
		require.NoError(t, err)
	}
	logged := func(retailer string) (n int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM move_changes WHERE retailer_id = $1`, retailer).Scan(&n))
		return n
	}

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	insert(tx, "free", "f-1") // the guard finds no move: later rows of "free" skip it
	insert(tx, "copied", "c-1")
	insert(tx, "free", "f-2")
	insert(tx, "copied", "c-2")
	insert(tx, "copied", "c-3")
	_, err = tx.Exec(ctx, `UPDATE products SET generation = 2 WHERE retailer_id = 'copied' AND product_id = 'c-1'`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `DELETE FROM products WHERE retailer_id = 'copied' AND product_id = 'c-2'`)
	require.NoError(t, err)
	insert(tx, "free", "f-3")

	// While the transaction is open, the move lock of "free" cannot be
	// taken exclusively: no move of it can start before the commit.
	var held bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT NOT pg_try_advisory_xact_lock(hashtextextended('catalog.move:free', 0))`).Scan(&held))
	require.True(t, held, "the transaction holds the move lock of the retailer it wrote")

	// A savepoint rolled back takes the guard's record back: the next row
	// of that retailer is guarded again and sees a move begun meanwhile
	// (one recorded by hand here, as no move could take the lock).
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	insert(sp, "later", "l-1")
	require.NoError(t, sp.Rollback(ctx))
	_, err = pool.Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard)
		VALUES ('later', 'm-2', 'source', 'frozen', 1)`)
	require.NoError(t, err)
	sp, err = tx.Begin(ctx)
	require.NoError(t, err)
	_, err = sp.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
		VALUES ('later', 'l-2', '{"v": 1}', '\x01', 1)`)
	require.ErrorContains(t, err, "moving between shards", "a frozen retailer's write is refused after the rollback (after the guard's 3 s wait)")
	require.NoError(t, sp.Rollback(ctx))
	require.NoError(t, tx.Commit(ctx))

	require.Equal(t, 5, logged("copied"), "every write of a retailer being copied is logged")
	require.Zero(t, logged("free"))
	var after bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('catalog.move:free', 0))`).Scan(&after))
	require.True(t, after, "the commit releases the move lock")
}
