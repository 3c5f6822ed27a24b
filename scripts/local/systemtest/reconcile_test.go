package systemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// reconcile runs a reconciliation on the stack and waits for its report.
func (e *env) reconcile(retailer string, repair bool) ops.ReconcileRunReport {
	e.T.Helper()
	ctx := systemtest.Context(e.T, 2*time.Minute)
	run, err := e.API.Reconcile(ctx, e.Stack.AdminToken, retailer, repair)
	require.NoError(e.T, err)
	rep, err := e.API.WaitReconciled(ctx, e.Stack.AdminToken, run)
	require.NoError(e.T, err)
	return rep
}

// requireNoDivergence reconciles every retailer and requires every catalog
// to equal its newest applied snapshot.
func (e *env) requireNoDivergence(what string) {
	e.T.Helper()
	rep := e.reconcile("", false)
	require.Empty(e.T, rep.Divergent, "%s: reconciliation found divergence", what)
	require.Empty(e.T, rep.Skipped, "%s: reconciliation skipped retailers", what)
	require.Equal(e.T, *rep.RetailersTotal, rep.RetailersChecked, "%s", what)
}

// Rows changed, deleted and inserted directly in the shard database are
// found; repair restores exactly those rows (fenced writes, a change
// event), and a second run is clean. A snapshot with JSON numbers that the
// database stores normalized (1e3 as 1000) is no divergence.
func TestReconcileFindsAndRepairsChangesBehindThePipeline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	ctx := context.Background()
	e.Onboard("r1")
	e.Onboard("nums")
	cat := fixtures.Generate("p", 40)
	require.Equal(t, "applied", e.Upload("r1", cat.CSV(nil)).State)
	numbers := []byte(`{"product_id":"n1","weight":1e3,"ratio":2.50E-1,"zero":-0,"big":12345678901234567890,"nested":{"b":[1.0,2e0],"a":null}}` + "\n" +
		`{"product_id":"n2","price":1.50,"tags":["x","y"]}` + "\n")
	require.Equal(t, "applied", e.Upload("nums", numbers).State)
	var stored string
	require.NoError(t, e.Shard("nums").Pool().QueryRow(ctx,
		`SELECT attributes::text FROM products WHERE retailer_id = 'nums' AND product_id = 'n1'`).Scan(&stored))
	require.Contains(t, stored, `"weight": 1000`, "stored as numeric: hashed afresh, the row differs from its snapshot line")
	rep := e.reconcile("", false)
	require.Empty(t, rep.Divergent, "the pipeline's own catalogs are clean")
	require.GreaterOrEqual(t, rep.RetailersChecked, 2)

	ids := cat.IDs()
	shard := e.Shard("r1").Pool()
	_, err := shard.Exec(ctx, `UPDATE products SET attributes = '{"title": "edited by hand"}' WHERE retailer_id = 'r1' AND product_id = $1`, ids[3])
	require.NoError(t, err)
	_, err = shard.Exec(ctx, `DELETE FROM products WHERE retailer_id = 'r1' AND product_id = $1`, ids[7])
	require.NoError(t, err)
	_, err = shard.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
		VALUES ('r1', 'zz-intruder', '{"title": "not in any snapshot"}', '\x00', 1)`)
	require.NoError(t, err)

	rep = e.reconcile("r1", false)
	require.Equal(t, "done", rep.State)
	require.Len(t, rep.Divergent, 1)
	d := rep.Divergent[0]
	require.Equal(t, ops.ReconcileDivergence{RetailerID: "r1", Generation: 1, Missing: 1, Extra: 1, Different: 1,
		Examples: []string{ids[3], ids[7], "zz-intruder"}}, d)
	require.NotEqual(t, cat, e.Catalog("r1"), "a check repairs nothing")

	rep = e.reconcile("r1", true)
	require.Len(t, rep.Divergent, 1)
	require.EqualValues(t, 3, rep.Divergent[0].Repaired)
	require.Zero(t, rep.Divergent[0].Unrepaired)
	e.RequireCatalog("r1", cat)
	require.Empty(t, e.reconcile("r1", false).Divergent, "clean after the repair")
	require.Equal(t, []string{"r1"}, e.directory(ids[7]), "the directory follows the repair")
}

// A catalog written only by the pipeline is clean after everything the
// pipeline does: tombstones, a held upload, a superseded one, updates.
func TestReconcileCleanAfterTombstonesHoldsAndSupersededUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 25})
	ctx := context.Background()
	e.Onboard("r1")
	full := fixtures.Generate("p", 150)
	require.Equal(t, "applied", e.Upload("r1", full.CSV(nil)).State)
	fewer := full.Clone()
	for _, id := range full.IDs()[:10] {
		delete(fewer, id) // tombstones
	}
	for _, id := range full.IDs()[20:30] {
		fewer[id]["price"] = "1.00"
	}
	require.Equal(t, "applied", e.Upload("r1", fewer.CSV(nil)).State)
	few := fixtures.Catalog{}
	for _, id := range full.IDs()[:5] {
		few[id] = full[id]
	}
	require.Equal(t, "held", e.Upload("r1", few.CSV(nil)).State)
	older, err := e.API.Reserve(ctx, e.Token("r1"), "r1", "")
	require.NoError(t, err)
	newer := fewer.Clone()
	newer["p-new"] = fixtures.Row("a new one")
	require.Equal(t, "applied", e.Upload("r1", newer.CSV(nil)).State)
	require.NoError(t, e.API.Put(ctx, older, full.CSV(nil))) // an old slot: superseded by the newer reservation
	e.RequireCatalog("r1", newer)
	e.requireNoDivergence("after tombstones, a hold and a superseded upload")
}
