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

// A collection of a retailer whose move's switch makes its shard refuse its
// writes (CM001) is refused 429 retailer_moving with a Retry-After, as a
// reservation is, never a bare database error (POST /v1/admin/gc answered
// 500: the property test's collections racing its moves found it).
func TestCollectWhileMovingIsRetailerMoving(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: "r", Shard: 0, TokenHash: []byte("r token")}))
	sh := s.Shards[0].Pool()
	// Generation 1 applied an hour ago: the collection raises the write
	// floor to it (a write of retailer_state).
	_, err := sh.Exec(ctx, `INSERT INTO retailer_state (retailer_id, reserved_generation, latest_generation, applied_generation)
		VALUES ('r', 1, 1, 1)`)
	require.NoError(t, err)
	_, err = sh.Exec(ctx, `INSERT INTO generations (retailer_id, generation, state, object_key, upload_expires_at, products, applied_at)
		VALUES ('r', 1, 'applied', 'snapshots/r/1', now(), 0, now() - interval '1 hour')`)
	require.NoError(t, err)
	// The target's record until it takes over: every write here is refused.
	_, err = sh.Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r', 'mv_test', 'target', 'incoming', 1)`)
	require.NoError(t, err)
	_, err = s.Collect(ctx, "r", catalog.CollectPolicy{AppliedBefore: time.Now(), RebuildAbove: -1}, nil)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
	var ce *catalog.Error
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "retailer_moving", ce.Code)
	require.Positive(t, ce.RetryAfter)
}
