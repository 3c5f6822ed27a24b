package systemtest_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// A stack that cannot start (here: its API address is taken, as when a
// second `up` runs) says why and stops what it had started, rather than
// panic and leave it running.
func TestStartFailsCleanly(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	st, err := stack.Start(context.Background(), stack.Options{
		PostgresURL: testenv.Postgres(t), SQSEndpoint: testenv.SQS(t), Prefix: testenv.Name("start"),
		DataDir: t.TempDir(), Addr: taken.Addr().String(), Shards: 1,
	})
	require.ErrorContains(t, err, "listen on "+taken.Addr().String())
	require.Nil(t, st)
}
