package pgstore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/catalog/storetest"
	"github.com/retailcatalog/catalog/functions/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// The PostgreSQL stores keep the catalog store contract: every test of
// the suite on one control and one shard database (each test uses
// retailers of its own).
func TestStoresContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	server := testenv.Postgres(t)
	prefix := testenv.Name("contract")
	control, err := pgstore.CreateDatabase(ctx, server, prefix+"control")
	require.NoError(t, err)
	shard, err := pgstore.CreateDatabase(ctx, server, prefix+"shard")
	require.NoError(t, err)
	s, err := pgstore.Open(ctx, control, []string{shard}, pgstore.PoolOptions{MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	storetest.Run(t, func(t *testing.T) storetest.Store { return s })
}
