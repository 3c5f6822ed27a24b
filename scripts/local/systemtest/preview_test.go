package systemtest_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// dryRun reserves a dry run, uploads data (format "" is CSV) and waits
// until it settles.
func (e *env) dryRun(retailer, format string, data []byte) apiclient.Status {
	e.T.Helper()
	ctx := systemtest.Context(e.T, 2*time.Minute)
	slot, err := e.API.ReserveDryRun(ctx, e.Token(retailer), retailer, format)
	require.NoError(e.T, err)
	require.NoError(e.T, e.API.Put(ctx, slot, data))
	return e.Wait(retailer, slot.Generation)
}

// wholePlan reads a generation's plan page by page (limit items a page).
func (e *env) wholePlan(retailer string, gen int64, limit int) []apiclient.PlanItem {
	e.T.Helper()
	var items []apiclient.PlanItem
	after := ""
	for {
		page, err := e.API.Plan(systemtest.Context(e.T, time.Minute), e.Token(retailer), retailer, gen, after, limit)
		require.NoError(e.T, err)
		require.LessOrEqual(e.T, len(page.Items), limit)
		items = append(items, page.Items...)
		if page.NextAfter == nil {
			return items
		}
		require.Len(e.T, page.Items, limit, "a page ends early only at 5 MB")
		after = *page.NextAfter
		require.Equal(e.T, after, page.Items[len(page.Items)-1].ProductID)
	}
}

// planOf is what a plan's items say, as from -> to strings per attribute
// ("<null>" for null) by product, with each op.
func planOf(t *testing.T, items []apiclient.PlanItem) (map[string]string, map[string]map[string][2]string) {
	t.Helper()
	ops, fields := map[string]string{}, map[string]map[string][2]string{}
	str := func(raw json.RawMessage) string {
		var s *string
		require.NoError(t, json.Unmarshal(raw, &s))
		if s == nil {
			return "<null>"
		}
		return *s
	}
	last := ""
	for _, it := range items {
		require.Greater(t, it.ProductID, last, "a plan is in product_id order, each product once")
		last = it.ProductID
		ops[it.ProductID] = it.Op
		fields[it.ProductID] = map[string][2]string{}
		for name, fc := range it.Fields {
			fields[it.ProductID][name] = [2]string{str(fc.From), str(fc.To)}
		}
	}
	return ops, fields
}

// changesBetween is what turns catalog before into after, as a plan says it.
func changesBetween(before, after fixtures.Catalog) (map[string]string, map[string]map[string][2]string) {
	ops, fields := map[string]string{}, map[string]map[string][2]string{}
	val := func(attrs map[string]string, name string) string {
		if v, ok := attrs[name]; ok {
			return v
		}
		return "<null>"
	}
	for _, id := range append(before.IDs(), after.IDs()...) {
		b, inB := before[id]
		a, inA := after[id]
		f := map[string][2]string{}
		for name := range b {
			if val(b, name) != val(a, name) {
				f[name] = [2]string{val(b, name), val(a, name)}
			}
		}
		for name := range a {
			if _, ok := b[name]; !ok {
				f[name] = [2]string{"<null>", val(a, name)}
			}
		}
		switch {
		case inB && !inA:
			ops[id] = "delete"
		case !inB && inA:
			ops[id] = "insert"
		case len(f) > 0:
			ops[id] = "update"
		default:
			continue
		}
		fields[id] = f
	}
	return ops, fields
}

// A dry run (DESIGN 13) is read and diffed against the catalog of its
// arrival and changes nothing: it ends previewed with its counts and
// dry_run, its plan lists its changes field by field, the catalog, the
// change events and the analytics files stay as they were; one a real
// upload would hold still ends previewed, error naming the hold; a dry
// run neither supersedes an older slot nor stops its upload; a file
// that breaks a rule ends rejected with its problems.
func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	probe := e.Subscribe("preview-probe")
	e.Onboard("r1")
	day1 := fixtures.Generate("p", 150)
	g1 := e.Upload("r1", day1.CSV(nil))
	require.Equal(t, "applied", g1.State)
	require.False(t, g1.DryRun)

	day2 := day1.Clone()
	day2["p-00001"]["price"] = "9.99"
	day2["p-00002"]["title"] = "renamed"
	delete(day2, "p-00003")
	day2["p-new"] = map[string]string{"title": "new", "brand": "Acme", "price": "1.00", "availability": "in stock", "description": "d"}
	pv := e.dryRun("r1", "", day2.CSV(nil))
	require.Equal(t, "previewed", pv.State, "%+v", pv.Error)
	require.True(t, pv.DryRun)
	require.Nil(t, pv.Error)
	require.EqualValues(t, 1, pv.Changes.Inserted)
	require.EqualValues(t, 2, pv.Changes.Updated)
	require.EqualValues(t, 1, pv.Changes.Deleted)
	require.EqualValues(t, 147, pv.Changes.Unchanged)
	require.Zero(t, pv.Chunks.Total)
	wantOps, wantFields := changesBetween(day1, day2)
	gotOps, gotFields := planOf(t, e.wholePlan("r1", pv.Generation, 2))
	require.Equal(t, wantOps, gotOps)
	require.Equal(t, wantFields, gotFields)
	e.RequireCatalog("r1", day1)

	// A real upload would be held: the preview says which hold.
	day3 := fixtures.Generate("p", 40)
	held := e.dryRun("r1", "", day3.CSV(nil))
	require.Equal(t, "previewed", held.State)
	require.NotNil(t, held.Error)
	require.Equal(t, "mass_delete", held.Error.Code)
	require.EqualValues(t, 110, held.Changes.Deleted)

	// A file that breaks a rule: rejected, with its problems.
	bad := e.dryRun("r1", "", []byte("product_id,title\nsame,1\nsame,2\n"))
	require.Equal(t, "rejected", bad.State)
	require.True(t, bad.DryRun)
	require.Equal(t, "duplicate_product_id", bad.Error.Code)
	err := e.API.Do(systemtest.Context(t, time.Minute), "GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", bad.Generation), e.Token("r1"), nil, nil)
	requireCode(t, err, 409, "plan_unavailable")

	// An older real slot, a dry run reserved after it and uploaded first:
	// the real upload is neither superseded nor stopped by it.
	ctx := systemtest.Context(t, 2*time.Minute)
	real, err := e.API.Reserve(ctx, e.Token("r1"), "r1", "")
	require.NoError(t, err)
	pv2 := e.dryRun("r1", "", day2.CSV(nil))
	require.Equal(t, "previewed", pv2.State)
	require.Greater(t, pv2.Generation, real.Generation)
	require.NoError(t, e.API.Put(ctx, real, day2.CSV(nil)))
	got := e.Wait("r1", real.Generation)
	require.Equal(t, "applied", got.State, "%+v", got.Error)
	e.RequireCatalog("r1", day2)

	// No event of any preview, and the analytics files follow the real
	// uploads only.
	e.WaitOutboxEmpty(time.Minute)
	e.RequireAnalytics("r1", day2, time.Minute)
	previews := map[int64]bool{pv.Generation: true, held.Generation: true, bad.Generation: true, pv2.Generation: true}
	for _, ev := range probe.Receive() {
		require.False(t, previews[ev.Generation], "event %s of preview %d", ev.Type, ev.Generation)
	}
}

// The plan of a held upload (DESIGN 13) equals, field for field, what
// confirming it then changes, read back from the storefront: inserts with
// every attribute from null, deletes with every attribute to null, an
// attribute removed (to null); read in pages of 7 it is in product_id
// order, each product once; it stays the plan of the applied generation.
// The first load's plan inserts every product; a generation still
// awaiting its upload has none (409 plan_unavailable); limit outside
// 1-1000 is 400.
func TestPlanOfAHeldUploadIsWhatConfirmingChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	day1 := fixtures.Generate("p", 120)
	g1 := e.Upload("r1", day1.CSV(nil))
	require.Equal(t, "applied", g1.State)

	day2 := day1.Clone()
	for i := range 70 {
		delete(day2, fmt.Sprintf("p-%05d", i))
	}
	for i := 70; i < 80; i++ {
		day2[fmt.Sprintf("p-%05d", i)]["price"] = "0.99"
	}
	delete(day2["p-00080"], "description")
	for i := range 5 {
		day2[fmt.Sprintf("q-%d", i)] = map[string]string{"title": fmt.Sprintf("new %d", i), "price": "3.00"}
	}
	gen, err := e.API.Upload(ctx, tok, "r1", "jsonl", day2.JSONL())
	require.NoError(t, err)
	held := e.Wait("r1", gen)
	require.Equal(t, "held", held.State)
	require.Equal(t, "mass_delete", held.Error.Code)
	plan := e.wholePlan("r1", gen, 7)
	require.Len(t, plan, 70+10+1+5)

	before := e.Catalog("r1")
	_, err = e.API.Confirm(ctx, tok, "r1", gen)
	require.NoError(t, err)
	s, err := e.API.WaitApplied(ctx, tok, "r1", gen, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State, "%+v", s.Error)
	after := e.Catalog("r1")
	require.Equal(t, day2, after)

	wantOps, wantFields := changesBetween(before, after)
	gotOps, gotFields := planOf(t, plan)
	require.Equal(t, wantOps, gotOps)
	require.Equal(t, wantFields, gotFields)
	require.Equal(t, plan, e.wholePlan("r1", gen, 1000), "the applied generation keeps its plan")

	// The first load, applied without a hold: its plan is every product
	// inserted.
	wantOps, wantFields = changesBetween(fixtures.Catalog{}, day1)
	gotOps, gotFields = planOf(t, e.wholePlan("r1", g1.Generation, 1000))
	require.Equal(t, wantOps, gotOps)
	require.Equal(t, wantFields, gotFields)
	slot, err := e.API.Reserve(ctx, tok, "r1", "")
	require.NoError(t, err)
	requireCode(t, e.API.Do(ctx, "GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", slot.Generation), tok, nil, nil), 409, "plan_unavailable")
	for _, limit := range []string{"0", "1001", "x"} {
		requireCode(t, e.API.Do(ctx, "GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=%s", gen, limit), tok, nil, nil), 400, "invalid_limit")
	}
	requireCode(t, e.API.Do(ctx, "GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", gen), e.Onboard("r2"), nil, nil), 403, "forbidden")
}

// The plan of a generation applied without a hold (DESIGN 13) is what it
// changed, field for field, read back from the storefront before and
// after: for a full snapshot (updates, inserts, deletes, an attribute
// removed, and products it names unchanged, which the plan leaves out),
// for a delta (an attribute merged, one removed by null, a product
// deleted, one inserted), and for a rollback; chunks of 10 rows, so the
// plan is recorded across many chunks.
func TestPlanOfAnAppliedGenerationIsWhatItChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	requirePlan := func(gen int64, before, after fixtures.Catalog) {
		t.Helper()
		wantOps, wantFields := changesBetween(before, after)
		gotOps, gotFields := planOf(t, e.wholePlan("r1", gen, 13))
		require.Equal(t, wantOps, gotOps, "generation %d", gen)
		require.Equal(t, wantFields, gotFields, "generation %d", gen)
	}
	day1 := fixtures.Generate("p", 150)
	g1 := e.Upload("r1", day1.CSV(nil))
	require.Equal(t, "applied", g1.State)
	requirePlan(g1.Generation, fixtures.Catalog{}, day1)

	day2 := day1.Clone()
	for i := range 12 {
		delete(day2, fmt.Sprintf("p-%05d", i))
	}
	for i := 20; i < 45; i++ {
		day2[fmt.Sprintf("p-%05d", i)]["price"] = fmt.Sprintf("%d.50", i)
	}
	delete(day2["p-00050"], "description")
	for i := range 7 {
		day2[fmt.Sprintf("n-%d", i)] = map[string]string{"title": fmt.Sprintf("new %d", i), "price": "3.00"}
	}
	before := e.Catalog("r1")
	gen2, err := e.API.Upload(ctx, tok, "r1", "jsonl", day2.JSONL())
	require.NoError(t, err)
	g2 := e.Wait("r1", gen2)
	require.Equal(t, "applied", g2.State, "%+v", g2.Error)
	after := e.Catalog("r1")
	require.Equal(t, day2, after)
	requirePlan(g2.Generation, before, after)

	delta := `{"product_id":"p-00060","price":"0.01"}
{"product_id":"p-00061","description":null}
{"product_id":"p-00062","_delete":true}
{"product_id":"d-1","title":"from a delta","price":"9.99"}
{"product_id":"p-00063","title":"` + day2["p-00063"]["title"] + `"}
`
	slot, err := e.API.ReserveMode(ctx, tok, "r1", "jsonl", "delta")
	require.NoError(t, err)
	require.NoError(t, e.API.Put(ctx, slot, []byte(delta)))

	g3 := e.Wait("r1", slot.Generation)
	require.Equal(t, "applied", g3.State, "%+v", g3.Error)
	afterDelta := e.Catalog("r1")
	requirePlan(g3.Generation, after, afterDelta)
	require.Len(t, e.wholePlan("r1", g3.Generation, 100), 4, "the product the delta names unchanged is not in its plan")

	rb, err := e.API.Rollback(ctx, tok, "r1", g1.Generation)
	require.NoError(t, err)
	g4 := e.Wait("r1", rb.Generation)
	require.Equal(t, "applied", g4.State, "%+v", g4.Error)
	require.Equal(t, day1, e.Catalog("r1"))
	requirePlan(g4.Generation, afterDelta, day1)
}
