package pgstore_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// ReadPing (the storefront's GET /healthz) passes when every database
// answers through its readers, a replica that is down falling back to the
// writer as reads do, and names each database that does not answer.
func TestReadPingNamesWhatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := openStores(t)
	require.NoError(t, s.ReadPing(ctx))

	// A closed port: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	require.NoError(t, s.AttachReaders([]string{dead}, [][]string{{dead}}, pgstore.ReaderOptions{}))
	require.NoError(t, s.ReadPing(ctx), "replicas down: the writers answer")

	gone, err := pgstore.Open(ctx, "postgres://nobody@"+dead+"/control?connect_timeout=1",
		[]string{"postgres://nobody@" + dead + "/s0?connect_timeout=1", "postgres://nobody@" + dead + "/s1?connect_timeout=1"}, pgstore.PoolOptions{})
	require.NoError(t, err, "pools connect on first use")
	defer gone.Close()
	err = gone.ReadPing(ctx)
	require.Error(t, err)
	for _, db := range []string{"control", "shard 0", "shard 1"} {
		require.Contains(t, err.Error(), db+": ")
	}
}
