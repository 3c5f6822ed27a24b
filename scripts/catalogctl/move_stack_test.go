package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// docs/RUNBOOK.md "Moving a retailer", as an operator follows it on the
// local stack, after docs/DEPLOY.md's "Adding a shard" (locally: `up` again
// with one shard more): a retailer on the stack's only shard, the stack
// restarted with two, `catalogctl move R --to-shard 1 --wait` while the
// retailer goes on uploading; the move ends done, every upload is applied,
// reconciliation is clean, and the old shard holds none of its products.
func TestMoveAsTheRunbookShows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	opts := stack.Options{
		PostgresURL: testenv.Postgres(t), SQSEndpoint: testenv.SQS(t), Prefix: testenv.Name("mvr"),
		DataDir: t.TempDir(), Addr: "127.0.0.1:0", Shards: 1, ChunkRows: 2000,
		HandlerTimeout: 5 * time.Second, VisibilityTimeout: 6 * time.Second, AdminToken: stack.NewAdminToken(),
	}
	st, err := stack.Start(ctx, opts)
	require.NoError(t, err)
	admin := map[string]string{apiVar: st.APIURL, adminTokenVar: st.AdminToken}
	vars := onboard(t, admin, "mover")
	var body strings.Builder
	body.WriteString("product_id,price\n")
	for i := range 5000 {
		fmt.Fprintf(&body, "p%05d,%d\n", i, i)
	}
	up := runTool(t, vars, "upload", "--retailer", "mover", writeFile(t, "day1.csv", []byte(body.String())))
	require.Equal(t, 0, up.code, up.stderr)
	require.NoError(t, st.Close())

	// Adding a shard: the same stack, one shard more.
	opts.Shards = 2
	st, err = stack.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	admin[apiVar], vars[apiVar] = st.APIURL, st.APIURL

	var wg sync.WaitGroup
	uploads := make(chan result, 3)
	wg.Add(1)
	go func() { // the retailer's day goes on during the move
		defer wg.Done()
		for day := 2; day <= 4; day++ {
			f := writeFile(t, fmt.Sprintf("day%d.csv", day), []byte(body.String()+fmt.Sprintf("new-%d,%d\n", day, day)))
			uploads <- runTool(t, vars, "upload", "--retailer", "mover", f)
		}
		close(uploads)
	}()
	mv := runTool(t, admin, "move", "mover", "--to-shard", "1", "--wait")
	require.Equal(t, 0, mv.code, mv.stderr)
	require.Regexp(t, `^mv_\w+: done: mover is on shard 1 \(\d+ rows copied\)\n$`, mv.stdout)
	require.Contains(t, mv.stderr, "copied rows: 100%", "the progress bar")
	require.Contains(t, mv.stderr, "done, step done")
	wg.Wait()
	for r := range uploads {
		require.Equal(t, 0, r.code, "an upload during the move: %s", r.stderr)
	}

	rec := runTool(t, admin, "reconcile", "--retailer", "mover")
	require.Equal(t, 0, rec.code, rec.stdout+rec.stderr)
	require.Contains(t, rec.stdout, "1 of 1 retailers checked, 0 divergent")
	var left int
	require.NoError(t, st.Stores.Shards[0].Pool().QueryRow(ctx, `SELECT count(*) FROM products WHERE retailer_id = 'mover'`).Scan(&left))
	require.Zero(t, left)
	r, err := st.Stores.Control.Retailer(ctx, "mover")
	require.NoError(t, err)
	require.Equal(t, 1, r.Shard)
	for _, id := range []string{"p00000", "p04999", "new-4"} {
		p, err := st.Stores.Product(ctx, "mover", id, true)
		require.NoError(t, err, id)
		require.NotEmpty(t, p.Attributes, id)
	}
	_, err = st.Stores.Product(ctx, "mover", "new-2", true)
	require.Error(t, err, "day 4's snapshot has no new-2")

	again := runTool(t, admin, "move", "mover", "--to-shard", "1")
	require.Equal(t, 1, again.code)
	require.Contains(t, again.stderr, "already_on_shard")
}
