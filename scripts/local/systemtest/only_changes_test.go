package systemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// I6: a snapshot that changes one product writes one row version and one
// event: every other row keeps its xmin (the transaction that wrote it),
// so PostgreSQL wrote no new version of it, and no WAL for it.
func TestI6OnlyChangesWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	p := e.Subscribe("probe")
	e.Onboard("r1")
	c := fixtures.Generate("p", 50)
	require.Equal(t, "applied", e.Upload("r1", c.CSV(nil)).State)
	shard := e.Shard("r1")
	ctx := context.Background()
	versions := func() map[string]string {
		rows, err := shard.Pool().Query(ctx, `SELECT product_id, xmin::text FROM products WHERE retailer_id = 'r1'`)
		require.NoError(t, err)
		out := map[string]string{}
		for rows.Next() {
			var id, xmin string
			require.NoError(t, rows.Scan(&id, &xmin))
			out[id] = xmin
		}
		require.NoError(t, rows.Err())
		return out
	}
	// changes are the change events of gen, once its applied event is in.
	changes := func(gen int64) (n, rows int) {
		applied := message.EventID(message.TypeSnapshotApplied, "r1", gen, 0)
		for _, env := range p.WaitFor(30*time.Second, "the applied event", func(envs []message.Envelope) bool {
			return len(systemtest.ByID(envs)[applied]) > 0
		}) {
			if env.Type == message.TypeChanges && env.Generation == gen {
				n, rows = n+1, rows+env.Count
			}
		}
		return n, rows
	}
	before := versions()
	require.Len(t, before, 50)

	c2 := c.Clone()
	c2["p-00003"]["price"] = "3.33"
	s2 := e.Upload("r1", fixtures.Gzip(c2.JSONL()))
	require.EqualValues(t, 1, s2.Changes.Updated)
	require.EqualValues(t, 49, s2.Changes.Unchanged)
	require.Equal(t, 1, s2.Chunks.Total)
	after := versions()
	var rewritten []string
	for id, xmin := range after {
		if before[id] != xmin {
			rewritten = append(rewritten, id)
		}
	}
	require.Equal(t, []string{"p-00003"}, rewritten, "only the changed row has a new version")
	n, rows := changes(s2.Generation)
	require.Equal(t, 1, n, "one change event")
	require.Equal(t, 1, rows, "of one product")

	s3 := e.Upload("r1", c2.CSV(nil))
	require.Equal(t, "applied", s3.State)
	require.Zero(t, s3.Chunks.Total, "an identical snapshot sends nothing")
	require.Equal(t, after, versions(), "and writes no row")
	n, _ = changes(s3.Generation)
	require.Zero(t, n, "no change event")
}
