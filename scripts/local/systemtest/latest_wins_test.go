package systemtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// I1: a sequence of generations with inserts, updates, deletes and a column
// reorder ends with the catalog equal to the newest snapshot; the reorder
// changes nothing.
func TestI1LatestWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 100})
	e.Onboard("r1")
	g1 := fixtures.Generate("p", 500)
	s := e.Upload("r1", g1.CSV(nil))
	require.Equal(t, "applied", s.State)
	require.EqualValues(t, 500, s.Changes.Inserted)
	require.Equal(t, 5, s.Chunks.Total)
	e.RequireCatalog("r1", g1)

	g2 := g1.Clone()
	for i := 0; i < 30; i++ {
		g2[fmt.Sprintf("p-%05d", i)]["price"] = "1.00"
		delete(g2, fmt.Sprintf("p-%05d", 100+i))
		g2[fmt.Sprintf("q-%05d", i)] = map[string]string{"title": "new", "brand": "b", "price": "2", "availability": "x", "description": ""}
	}
	s = e.Upload("r1", fixtures.Gzip(g2.JSONL()))
	require.Equal(t, "applied", s.State)
	require.EqualValues(t, 30, s.Changes.Inserted)
	require.EqualValues(t, 30, s.Changes.Updated)
	require.EqualValues(t, 30, s.Changes.Deleted)
	require.EqualValues(t, 440, s.Changes.Unchanged)
	e.RequireCatalog("r1", g2)

	s = e.Upload("r1", g2.CSV([]string{"price", "description", "availability", "title", "brand"}))
	require.Equal(t, "applied", s.State)
	require.Zero(t, s.Changes.Inserted+s.Changes.Updated+s.Changes.Deleted, "a column reorder changes nothing")
	require.Zero(t, s.Chunks.Total)
	e.RequireCatalog("r1", g2)
}

// I1: the same S3 event delivered twice more, after its generation was
// applied, changes nothing: once diff-jobs has drained (both handled), the
// status, the chunks counted and the catalog are as before.
func TestI1DuplicateS3Event(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 50})
	e.Onboard("r1")
	g1 := fixtures.Generate("p", 200)
	s := e.Upload("r1", g1.CSV(nil))
	require.Equal(t, "applied", s.State)
	e.ResendS3Event("r1", s.Generation)
	e.ResendS3Event("r1", s.Generation)
	e.WaitDrained(e.Stack.DiffQueue)
	e.WaitDrained(e.Stack.SmallQueue)
	require.Equal(t, s, e.Status("r1", s.Generation), "status unchanged by duplicate events")
	var chunks int
	require.NoError(t, e.Shard("r1").Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM applied_chunks WHERE retailer_id = 'r1'`).Scan(&chunks))
	require.Equal(t, 4, chunks)
	e.RequireCatalog("r1", g1)
}

// I1: uploads finishing out of order: the older one ends superseded, even arriving last.
func TestI1OutOfOrderUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	ctx := context.Background()
	older, err := e.API.Reserve(ctx, e.Token("r1"), "r1", "")
	require.NoError(t, err)
	newer, err := e.API.Reserve(ctx, e.Token("r1"), "r1", "")
	require.NoError(t, err)
	require.Greater(t, newer.Generation, older.Generation)
	want := fixtures.Generate("new", 20)
	require.NoError(t, e.API.Put(ctx, newer, want.CSV(nil)))
	require.Equal(t, "applied", e.Wait("r1", newer.Generation).State)
	require.NoError(t, e.API.Put(ctx, older, fixtures.Generate("old", 20).CSV(nil)))
	s := e.Wait("r1", older.Generation)
	require.Equal(t, "superseded", s.State)
	require.Equal(t, newer.Generation, *s.SupersededBy)
	e.RequireCatalog("r1", want)
}
