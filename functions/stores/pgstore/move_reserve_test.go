package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// Every kind of reservation met by a move's switch (the shard refuses the
// write, CM001) is refused 429 retailer_moving with a Retry-After, never a
// bare database error (a 500): a full snapshot's, a delta's, a dry
// run's and a delta dry run's alike.
func TestReservationsWhileMovingAreRetailerMoving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: "r", Shard: 0, TokenHash: []byte("r token")}))
	sh := s.Shards[0].Pool()
	_, err := sh.Exec(ctx, `INSERT INTO retailer_state (retailer_id, reserved_generation, latest_generation, applied_generation)
		VALUES ('r', 0, 0, 0) ON CONFLICT DO NOTHING`)
	require.NoError(t, err)
	// The source's record once switched: every write here is refused.
	_, err = sh.Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r', 'mv_test', 'source', 'moved', 1)`)
	require.NoError(t, err)
	expires := time.Now().Add(time.Hour)
	for name, reserve := range map[string]func() (int64, error){
		"full":          func() (int64, error) { return s.ReserveGeneration(ctx, "r", "csv", expires, 30) },
		"delta":         func() (int64, error) { return s.ReserveDelta(ctx, "r", "csv", expires, 30) },
		"dry run":       func() (int64, error) { return s.ReserveDryRun(ctx, "r", "csv", expires, 30) },
		"delta dry run": func() (int64, error) { return s.ReserveDeltaDryRun(ctx, "r", "csv", expires, 30) },
	} {
		_, err := reserve()
		require.ErrorIs(t, err, catalog.ErrRateLimited, name)
		var ce *catalog.Error
		require.True(t, errors.As(err, &ce), name)
		require.Equal(t, "retailer_moving", ce.Code, name)
		require.Positive(t, ce.RetryAfter, name)
	}
}

// A reservation first records the slots whose files are already in the
// bucket (MarkArrived): met by a move's switch, that is 429 retailer_moving
// too, not a 500 (the property test's uploads racing its moves found it).
func TestMarkArrivedWhileMovingIsRetailerMoving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: "r", Shard: 0, TokenHash: []byte("r token")}))
	gen, err := s.ReserveGeneration(ctx, "r", "csv", time.Now().Add(time.Hour), 30)
	require.NoError(t, err)
	_, err = s.Shards[0].Pool().Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r', 'mv_test', 'source', 'moved', 1)`)
	require.NoError(t, err)
	_, err = s.MarkArrived(ctx, "r", gen, time.Now(), 0)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
	var ce *catalog.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "retailer_moving", ce.Code)
	require.Positive(t, ce.RetryAfter)
}
