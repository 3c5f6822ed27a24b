package systemtest_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// deltaDryRun reserves a delta's dry run of format (csv or jsonl), uploads
// data and waits until it settles.
func (e *env) deltaDryRun(retailer, format string, data []byte) apiclient.Status {
	e.T.Helper()
	ctx := systemtest.Context(e.T, 2*time.Minute)
	slot, err := e.API.ReserveWith(ctx, e.Token(retailer), retailer, format, apiclient.ReserveOptions{Mode: "delta", DryRun: true})
	require.NoError(e.T, err)
	require.NoError(e.T, e.API.Put(ctx, slot, data))
	return e.Wait(retailer, slot.Generation)
}

// deltaJSONL is the JSON Lines file of a delta's rows.
func deltaJSONL(rows []deltaRow) []byte {
	var b strings.Builder
	for _, row := range rows {
		obj := map[string]any{"product_id": row.id}
		if row.del {
			obj["_delete"] = true
		}
		for k, v := range row.set {
			obj[k] = v // nil: null
		}
		line, err := json.Marshal(obj)
		if err != nil {
			panic(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

func ptr(s string) *string { return &s }

// A delta's dry run (DESIGN 13) is merged into the catalog as it is when
// its file arrives and changes nothing: it ends previewed, mode delta and
// dry_run, with a delta's counts (unchanged: the products it names and
// does not change) and a plan that lists, field by field, its attribute
// merges, its null removals, its _delete and its insert; the storefront
// serves the catalog as it was and no event is sent. The same delta
// uploaded for real then changes exactly what the plan said. One a real
// upload would hold ends previewed, error naming the hold (mass_delete,
// attribute_dropped); a bad one ends rejected with its problems.
func TestDeltaDryRunPlanIsWhatTheDeltaChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	probe := e.Subscribe("delta-preview-probe")
	e.Onboard("r1")
	day1 := fixtures.Generate("p", 150)
	require.Equal(t, "applied", e.Upload("r1", day1.CSV(nil)).State)

	rows := []deltaRow{
		{id: "p-00001", set: map[string]*string{"price": ptr("9.99")}},                        // a merge
		{id: "p-00002", set: map[string]*string{"title": ptr("renamed"), "description": nil}}, // a merge and a null removal
		{id: "p-00003", del: true}, // a delete
		{id: "p-00004", set: map[string]*string{"price": ptr(day1["p-00004"]["price"])}},                // unchanged
		{id: "p-new", set: map[string]*string{"title": ptr("new"), "price": ptr("1.00"), "brand": nil}}, // an insert (null: absent)
		{id: "absent-1", del: true}, // a delete of nothing: unchanged
	}
	file := deltaJSONL(rows)
	want := layDelta(day1, rows)
	pv := e.deltaDryRun("r1", "jsonl", file)
	require.Equal(t, "previewed", pv.State, "%+v", pv.Error)
	require.True(t, pv.DryRun)
	require.Equal(t, "delta", pv.Mode)
	require.Nil(t, pv.Error)
	require.Equal(t, [4]int64{1, 2, 1, 2}, [4]int64{pv.Changes.Inserted, pv.Changes.Updated, pv.Changes.Deleted, pv.Changes.Unchanged})
	require.Zero(t, pv.Chunks.Total)
	plan := e.wholePlan("r1", pv.Generation, 2)
	gotOps, gotFields := planOf(t, plan)
	require.Equal(t, map[string]string{"p-00001": "update", "p-00002": "update", "p-00003": "delete", "p-new": "insert"}, gotOps)
	require.Equal(t, map[string][2]string{"price": {day1["p-00001"]["price"], "9.99"}}, gotFields["p-00001"])
	require.Equal(t, map[string][2]string{"title": {day1["p-00002"]["title"], "renamed"}, "description": {day1["p-00002"]["description"], "<null>"}},
		gotFields["p-00002"])
	require.Equal(t, map[string][2]string{"title": {"<null>", "new"}, "price": {"<null>", "1.00"}}, gotFields["p-new"])
	wantOps, wantFields := changesBetween(day1, want)
	require.Equal(t, wantOps, gotOps)
	require.Equal(t, wantFields, gotFields)
	e.RequireCatalog("r1", day1)

	// The same delta for real: it changes what the plan said.
	real := e.delta("r1", "jsonl", file)
	require.Equal(t, "applied", real.State, "%+v", real.Error)
	require.Equal(t, pv.Changes, real.Changes)
	after := e.Catalog("r1")
	require.Equal(t, want, after)
	appliedOps, appliedFields := changesBetween(day1, after)
	require.Equal(t, gotOps, appliedOps)
	require.Equal(t, gotFields, appliedFields)

	// Holds a real upload would meet: named, the preview still previewed.
	var dels []deltaRow
	for i := 10; i < 110; i++ {
		dels = append(dels, deltaRow{id: fmt.Sprintf("p-%05d", i), del: true})
	}
	massDelete := e.deltaDryRun("r1", "jsonl", deltaJSONL(dels))
	require.Equal(t, "previewed", massDelete.State)
	require.NotNil(t, massDelete.Error)
	require.Equal(t, "mass_delete", massDelete.Error.Code)
	require.True(t, strings.HasPrefix(massDelete.Error.Message, "a real upload of this file would be held: "), massDelete.Error.Message)
	require.EqualValues(t, 100, massDelete.Changes.Deleted)
	require.Len(t, e.wholePlan("r1", massDelete.Generation, 1000), 100)
	var blanks []deltaRow
	for i := 10; i < 130; i++ {
		blanks = append(blanks, deltaRow{id: fmt.Sprintf("p-%05d", i), set: map[string]*string{"description": nil}})
	}
	dropped := e.deltaDryRun("r1", "jsonl", deltaJSONL(blanks))
	require.Equal(t, "previewed", dropped.State)
	require.NotNil(t, dropped.Error)
	require.Equal(t, "attribute_dropped", dropped.Error.Code, dropped.Error.Message)
	require.Contains(t, dropped.Error.Message, "description")
	require.EqualValues(t, 120, dropped.Changes.Updated)

	// A file that breaks a rule: rejected with its problems, as any delta.
	bad := e.deltaDryRun("r1", "csv", []byte("product_id,price,_delete\np-00001,1,\np-00001,2,\np-00005,,True\n"))
	require.Equal(t, "rejected", bad.State)
	require.True(t, bad.DryRun)
	require.Equal(t, "delta", bad.Mode)
	require.Equal(t, "duplicate_product_id", bad.Error.Code)
	require.Len(t, bad.Error.Problems, 2, "%+v", bad.Error.Problems)
	require.Equal(t, "unsupported_value", bad.Error.Problems[1].Code)
	requireCode(t, e.API.Do(systemtest.Context(t, time.Minute), "GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", bad.Generation),
		e.Token("r1"), nil, nil), 409, "plan_unavailable")
	e.RequireCatalog("r1", want)

	// No event of any preview.
	e.WaitOutboxEmpty(time.Minute)
	previews := map[int64]bool{pv.Generation: true, massDelete.Generation: true, dropped.Generation: true, bad.Generation: true}
	var realEvents int
	for _, ev := range probe.Receive() {
		require.False(t, previews[ev.Generation], "event %s of preview %d", ev.Type, ev.Generation)
		if ev.Generation == real.Generation {
			realEvents++
		}
	}
	require.Positive(t, realEvents, "the real delta's events were sent")
}

// A delta's dry run reserved while a real upload is held (a generation in
// progress that a real delta would wait for) ends previewed without
// waiting, against the catalog as it is; the held upload is then
// confirmed and applied, the preview in no one's way.
func TestDeltaDryRunWaitsForNoGenerationInProgress(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	day1 := fixtures.Generate("p", 150)
	require.Equal(t, "applied", e.Upload("r1", day1.CSV(nil)).State)
	day2 := fixtures.Generate("p", 40)
	held := e.Upload("r1", day2.CSV(nil))
	require.Equal(t, "held", held.State)
	require.Equal(t, "mass_delete", held.Error.Code)

	rows := []deltaRow{
		{id: "p-00001", set: map[string]*string{"price": ptr("0.01")}},
		{id: "p-00100", del: true}, // in the catalog now, not in the held upload
	}
	pv := e.deltaDryRun("r1", "jsonl", deltaJSONL(rows))
	require.Equal(t, "previewed", pv.State, "it does not wait for the held upload: %+v", pv.Error)
	require.Greater(t, pv.Generation, held.Generation)
	require.Equal(t, [4]int64{0, 1, 1, 0}, [4]int64{pv.Changes.Inserted, pv.Changes.Updated, pv.Changes.Deleted, pv.Changes.Unchanged},
		"read against the catalog as it is: the held upload is not applied")
	ops, _ := planOf(t, e.wholePlan("r1", pv.Generation, 100))
	require.Equal(t, map[string]string{"p-00001": "update", "p-00100": "delete"}, ops)
	require.Equal(t, "held", e.Status("r1", held.Generation).State, "a preview stops nothing")

	_, err := e.API.Confirm(ctx, tok, "r1", held.Generation)
	require.NoError(t, err, "a newer preview does not make the held upload older than the latest")
	s, err := e.API.WaitApplied(ctx, tok, "r1", held.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State, "%+v", s.Error)
	e.RequireCatalog("r1", day2)
	require.Equal(t, "previewed", e.Status("r1", pv.Generation).State, "nothing supersedes a preview")
}

// The plan of a held delta (DESIGN 13) equals, field for field, what
// confirming it then changes, read back from the storefront, as a held
// full snapshot's does: held mass_delete (70 of 120 deleted) with merges,
// null removals, an insert, a product named unchanged and a delete of a
// product the catalog does not have, in JSON Lines; then one held
// attribute_dropped (a column blanked by null on 110 named products), in
// CSV and JSON Lines alike through the same path; each read in pages of 7
// is in product_id order and stays the plan of the applied generation.
func TestPlanOfAHeldDeltaIsWhatConfirmingChanges(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	day1 := fixtures.Generate("p", 120)
	require.Equal(t, "applied", e.Upload("r1", day1.CSV(nil)).State)

	confirm := func(rows []deltaRow, code string, planLen int) {
		t.Helper()
		before := e.Catalog("r1")
		held := e.delta("r1", "jsonl", deltaJSONL(rows))
		require.Equal(t, "held", held.State, "%+v", held.Error)
		require.Equal(t, code, held.Error.Code, held.Error.Message)
		plan := e.wholePlan("r1", held.Generation, 7)
		require.Equal(t, planLen, len(plan), "the held delta's plan")
		e.RequireCatalog("r1", before)

		_, err := e.API.Confirm(ctx, tok, "r1", held.Generation)
		require.NoError(t, err)
		s, err := e.API.WaitApplied(ctx, tok, "r1", held.Generation, nil)
		require.NoError(t, err)
		require.Equal(t, "applied", s.State, "%+v", s.Error)
		after := e.Catalog("r1")
		require.Equal(t, layDelta(before, rows), after)
		wantOps, wantFields := changesBetween(before, after)
		gotOps, gotFields := planOf(t, plan)
		require.Equal(t, wantOps, gotOps)
		require.Equal(t, wantFields, gotFields)
		require.Equal(t, plan, e.wholePlan("r1", held.Generation, 1000), "the applied generation keeps its plan")
	}

	var rows []deltaRow
	for i := range 70 {
		rows = append(rows, deltaRow{id: fmt.Sprintf("p-%05d", i), del: true})
	}
	for i := 70; i < 80; i++ {
		rows = append(rows, deltaRow{id: fmt.Sprintf("p-%05d", i), set: map[string]*string{"price": ptr("0.99")}})
	}
	rows = append(rows,
		deltaRow{id: "p-00080", set: map[string]*string{"description": nil, "title": ptr("renamed")}},
		deltaRow{id: "p-00081", set: map[string]*string{"price": ptr(day1["p-00081"]["price"])}}, // unchanged
		deltaRow{id: "absent", del: true}, // nothing to delete
	)
	for i := range 5 {
		rows = append(rows, deltaRow{id: fmt.Sprintf("q-%d", i), set: map[string]*string{"title": ptr(fmt.Sprintf("new %d", i)), "price": ptr("3.00"), "brand": nil}})
	}
	confirm(rows, "mass_delete", 70+10+1+5)

	// 50 products left, and 60 more inserted so that 110 are named.
	var more []deltaRow
	for i := range 60 {
		more = append(more, deltaRow{id: fmt.Sprintf("r-%03d", i), set: map[string]*string{"title": ptr("r"), "description": ptr("d")}})
	}
	require.Equal(t, "applied", e.delta("r1", "jsonl", deltaJSONL(more)).State)
	var blanks []deltaRow
	had := 0
	for id, attrs := range e.Catalog("r1") {
		blanks = append(blanks, deltaRow{id: id, set: map[string]*string{"description": nil}})
		if _, ok := attrs["description"]; ok {
			had++
		}
	}
	confirm(blanks, "attribute_dropped", had)
}
