package systemtest_test

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// A hostile retailer's rollbacks (DESIGN 13): to a generation that is
// itself a rollback (its catalog is its source's, however many rollbacks
// deep), to a delta, to a rollback to a delta; each is mode rollback with
// source_generation the generation named, its catalog exactly the one
// named, its plan what it changed, and a rollback to the catalog already
// live changes nothing.
func TestRollbackToARollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10, ReservationsPerHour: 100})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 3*time.Minute)
	day1 := fixtures.Generate("p", 30)
	require.Equal(t, "applied", e.Upload("r1", day1.CSV(nil)).State)
	day2 := day1.Clone()
	for id := range day2 {
		day2[id]["price"] = "2.00"
	}
	g2 := e.Upload("r1", day2.CSV(nil))
	require.Equal(t, "applied", g2.State)
	d3 := []deltaRow{{id: "p-00001", del: true}, {id: "d-1", set: map[string]*string{"title": ptr("d")}},
		{id: "p-00002", set: map[string]*string{"price": ptr("3.00"), "description": nil}}}
	g3 := e.delta("r1", "jsonl", deltaJSONL(d3))
	require.Equal(t, "applied", g3.State, "%+v", g3.Error)
	after3 := layDelta(day2, d3)
	e.RequireCatalog("r1", after3)

	rollback := func(to int64, want fixtures.Catalog) apiclient.Status {
		t.Helper()
		before := e.Catalog("r1")
		rb, err := e.API.Rollback(ctx, tok, "r1", to)
		require.NoError(t, err)
		s := e.Wait("r1", rb.Generation)
		require.Equal(t, "applied", s.State, "rollback to %d: %+v", to, s.Error)
		require.Equal(t, "rollback", s.Mode)
		require.NotNil(t, s.SourceGeneration)
		require.Equal(t, to, *s.SourceGeneration)
		e.RequireCatalog("r1", want)
		wantOps, wantFields := changesBetween(before, want)
		gotOps, gotFields := planOf(t, e.wholePlan("r1", s.Generation, 1000))
		require.Equal(t, wantOps, gotOps, "rollback to %d", to)
		require.Equal(t, wantFields, gotFields, "rollback to %d", to)
		return s
	}
	r4 := rollback(1, day1)
	r5 := rollback(r4.Generation, day1) // to a rollback: nothing to change
	require.Zero(t, r5.Changes.Inserted+r5.Changes.Updated+r5.Changes.Deleted)
	d6 := []deltaRow{{id: "p-00003", set: map[string]*string{"title": ptr("six")}}}
	require.Equal(t, "applied", e.delta("r1", "jsonl", deltaJSONL(d6)).State)
	r7 := rollback(g3.Generation, after3) // to a delta
	r8 := rollback(r5.Generation, day1)   // to a rollback to a rollback
	r9 := rollback(r7.Generation, after3) // to a rollback to a delta
	rollback(r9.Generation, after3)       // ... and to that one
	rollback(r8.Generation, day1)         // and back
	rollback(g2.Generation, day2)         // to a full snapshot under all of them
	require.Equal(t, "applied", e.Status("r1", r9.Generation).State)
}

// A rollback racing uploads (DESIGN 13: it supersedes older generations in
// progress as any newer generation does, and is superseded by newer
// ones): a slot reserved before a rollback is superseded by it and its
// late file changes nothing; an upload reserved after a rollback, sent at
// once, wins whether or not the rollback applied first; a rollback
// reserved while an upload is being diffed wins over it. Whatever the
// interleaving, the catalog ends the newest generation's.
func TestRollbackRacesAnUpload(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 5, ReservationsPerHour: 100})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 3*time.Minute)
	day := func(price string) fixtures.Catalog {
		c := fixtures.Generate("p", 60)
		for id := range c {
			c[id]["price"] = price
		}
		return c
	}
	g1 := e.Upload("r1", day("1.00").CSV(nil))
	require.Equal(t, "applied", g1.State)
	require.Equal(t, "applied", e.Upload("r1", day("2.00").CSV(nil)).State)

	// A slot reserved before the rollback: superseded, its file late.
	early, err := e.API.Reserve(ctx, tok, "r1", "")
	require.NoError(t, err)
	rb, err := e.API.Rollback(ctx, tok, "r1", g1.Generation)
	require.NoError(t, err)
	require.NoError(t, e.API.Put(ctx, early, day("9.99").CSV(nil)))
	require.Equal(t, "applied", e.Wait("r1", rb.Generation).State)
	require.Equal(t, "superseded", e.Wait("r1", early.Generation).State)
	e.RequireCatalog("r1", day("1.00"))

	for round := range 3 {
		// An upload reserved after a rollback, sent at once.
		rb, err := e.API.Rollback(ctx, tok, "r1", g1.Generation)
		require.NoError(t, err)
		want := day(fmt.Sprintf("3.%02d", round))
		up, err := e.API.Upload(ctx, tok, "r1", "", want.CSV(nil))
		require.NoError(t, err)
		require.Equal(t, "applied", e.Wait("r1", up).State)
		require.Contains(t, []string{"applied", "superseded"}, e.Wait("r1", rb.Generation).State)
		e.RequireCatalog("r1", want)

		// A rollback reserved while an upload is on its way.
		up, err = e.API.Upload(ctx, tok, "r1", "", day(fmt.Sprintf("4.%02d", round)).CSV(nil))
		require.NoError(t, err)
		rb, err = e.API.Rollback(ctx, tok, "r1", g1.Generation)
		require.NoError(t, err)
		require.Equal(t, "applied", e.Wait("r1", rb.Generation).State)
		require.Contains(t, []string{"applied", "superseded"}, e.Wait("r1", up).State)
		e.RequireCatalog("r1", day("1.00"))
	}
	e.requireNoDivergence("after the races")
}

// A flood of dry runs (DESIGN 13: a preview never supersedes, holds up or
// blocks a real generation, and nothing supersedes it) sent among real
// uploads, full snapshots and deltas, without waiting: every real one
// applies with the counts it would have alone, every dry run ends
// previewed with the counts of its file against the catalog of its
// arrival (a delta's that every real upload leaves alike: exact), the
// catalog is the real uploads' alone, and each dry run took a reservation
// (the 30 an hour count them). Set CATALOG_ATTACK_FLOOD for 60 dry runs
// instead of 12.
func TestDryRunFlood(t *testing.T) {
	t.Parallel()
	n := 12
	if os.Getenv("CATALOG_ATTACK_FLOOD") != "" {
		n = 60
	}
	perHour := n + n/4 + 10 // the dry runs, the real uploads among them, and room
	e := newEnv(t, stack.Options{ChunkRows: 10, ReservationsPerHour: perHour})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 5*time.Minute)
	day1 := fixtures.Generate("p", 80)
	require.Equal(t, "applied", e.Upload("r1", day1.CSV(nil)).State)

	// Real uploads: each changes other products than the dry runs name.
	want := day1.Clone()
	type real struct {
		gen     int64
		updated int64
	}
	var reals []real
	var previews []apiclient.Slot
	var deltaPreviews []int64
	pvDelta := deltaJSONL([]deltaRow{{id: "p-00001", set: map[string]*string{"title": ptr("preview")}},
		{id: "p-00002", del: true}, {id: "pv-new", set: map[string]*string{"title": ptr("x")}}})
	for i := range n {
		var slot apiclient.Slot
		var err error
		if i%2 == 0 {
			slot, err = e.API.ReserveWith(ctx, tok, "r1", "jsonl", apiclient.ReserveOptions{Mode: "delta", DryRun: true})
			require.NoError(t, err)
			require.NoError(t, e.API.Put(ctx, slot, pvDelta))
			deltaPreviews = append(deltaPreviews, slot.Generation)
		} else {
			slot, err = e.API.ReserveDryRun(ctx, tok, "r1", "")
			require.NoError(t, err)
			require.NoError(t, e.API.Put(ctx, slot, fixtures.Generate("z", 5).CSV(nil)))
		}
		previews = append(previews, slot)
		if i%4 == 3 { // a real upload every fourth: a delta, then a full snapshot
			if len(reals) > 0 { // the last one settled (a full snapshot supersedes a delta not yet applied)
				require.Equal(t, "applied", e.Wait("r1", reals[len(reals)-1].gen).State)
			}
			id := fmt.Sprintf("p-%05d", 10+i)
			if (i/4)%2 == 0 {
				rows := []deltaRow{{id: id, set: map[string]*string{"price": ptr(fmt.Sprintf("%d.25", i))}}}
				s, err := e.API.ReserveMode(ctx, tok, "r1", "jsonl", "delta")
				require.NoError(t, err)
				require.NoError(t, e.API.Put(ctx, s, deltaJSONL(rows)))
				want = layDelta(want, rows)
				reals = append(reals, real{s.Generation, 1})
			} else {
				next := want.Clone()
				next[id]["price"] = fmt.Sprintf("%d.75", i)
				gen, err := e.API.Upload(ctx, tok, "r1", "", next.CSV(nil))
				require.NoError(t, err)
				want = next
				reals = append(reals, real{gen, 1})
			}
		}
	}
	for _, r := range reals {
		s := e.Wait("r1", r.gen)
		require.Equal(t, "applied", s.State, "real generation %d: %+v", r.gen, s.Error)
		require.Equal(t, r.updated, s.Changes.Updated, "generation %d", r.gen)
		require.Zero(t, s.Changes.Inserted+s.Changes.Deleted, "generation %d", r.gen)
	}
	for _, slot := range previews {
		s := e.Wait("r1", slot.Generation)
		require.Equal(t, "previewed", s.State, "dry run %d: %+v", slot.Generation, s.Error)
		require.True(t, s.DryRun)
	}
	for _, gen := range deltaPreviews {
		s := e.Status("r1", gen)
		require.Equal(t, [4]int64{1, 1, 1, 0}, [4]int64{s.Changes.Inserted, s.Changes.Updated, s.Changes.Deleted, s.Changes.Unchanged},
			"delta dry run %d", gen)
		require.Len(t, e.wholePlan("r1", gen, 10), 3)
	}
	e.RequireCatalog("r1", want)
	// Every dry run took a reservation of the hour: the rest is what is left.
	left := perHour - 1 - len(previews) - len(reals)
	for range left {
		_, err := e.API.ReserveDryRun(ctx, tok, "r1", "")
		require.NoError(t, err)
	}
	_, err := e.API.ReserveDryRun(ctx, tok, "r1", "")
	requireCode(t, err, 429, "too_many_reservations")
}

// A plan far past the 100,000 operations it was once bounded to (DESIGN
// 13: a plan for every previewed, held or applied generation, of any
// size; its lines sorted through runs spilled to disk): a dry run and a
// real first load of 100,001 products end previewed and applied with
// their counts, and each plan is complete, read page by page: every
// product once, in product_id order, an insert of every attribute the
// file gives it; the problems route answers both (200, empty). Long: run
// with CATALOG_ATTACK_HUGE set, skipped under -short.
func TestHugePlanIsComplete(t *testing.T) {
	if testing.Short() || os.Getenv("CATALOG_ATTACK_HUGE") == "" {
		t.Skip("100,001 products: set CATALOG_ATTACK_HUGE to run")
	}
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 10*time.Minute)
	n := 100_001
	cat := fixtures.Generate("p", n)
	file := cat.CSV(nil)
	pv := e.dryRun("r1", "", file)
	require.Equal(t, "previewed", pv.State, "%+v", pv.Error)
	require.EqualValues(t, n, pv.Changes.Inserted)
	gen, err := e.API.Upload(ctx, tok, "r1", "", file)
	require.NoError(t, err)
	s, err := e.API.WaitApplied(ctx, tok, "r1", gen, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State, "%+v", s.Error)
	for _, g := range []int64{pv.Generation, gen} {
		items, after := 0, ""
		for {
			page, err := e.API.Plan(ctx, tok, "r1", g, after, 1000)
			require.NoError(t, err, "generation %d after %q", g, after)
			for _, it := range page.Items {
				require.Less(t, after, it.ProductID, "generation %d: in product_id order", g)
				after = it.ProductID
				require.Equal(t, "insert", it.Op, it.ProductID)
				want := cat[it.ProductID]
				require.NotNil(t, want, "generation %d: %s is in the file", g, it.ProductID)
				require.Len(t, it.Fields, len(want), it.ProductID)
				for name, v := range want {
					to, err := json.Marshal(v)
					require.NoError(t, err)
					require.JSONEq(t, string(to), string(it.Fields[name].To), "%s %s", it.ProductID, name)
					require.Equal(t, "null", string(it.Fields[name].From), "%s %s", it.ProductID, name)
				}
				items++
			}
			if page.NextAfter == nil {
				break
			}
		}
		require.Equal(t, n, items, "generation %d: the whole plan", g)
		var problems strings.Builder
		require.NoError(t, e.API.Problems(ctx, tok, "r1", g, &problems))
		require.Empty(t, problems.String())
	}
}

// The problems route on a delta (DESIGN 13: 200 for every generation whose
// file was read, an empty body without a problem): 409
// problems_unavailable while its slot awaits the file, 200 and empty once
// an applied delta or a delta's dry run was read, every problem of a
// rejected one.
func TestProblemsOfDeltas(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	tok := e.Token("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	require.Equal(t, "applied", e.Upload("r1", fixtures.Generate("p", 5).CSV(nil)).State)
	slot, err := e.API.ReserveMode(ctx, tok, "r1", "jsonl", "delta")
	require.NoError(t, err)
	var body strings.Builder
	requireCode(t, e.API.Problems(ctx, tok, "r1", slot.Generation, &body), 409, "problems_unavailable")
	require.NoError(t, e.API.Put(ctx, slot, deltaJSONL([]deltaRow{{id: "p-00001", set: map[string]*string{"price": ptr("1.11")}}})))
	require.Equal(t, "applied", e.Wait("r1", slot.Generation).State)
	pv := e.deltaDryRun("r1", "csv", []byte("product_id,price\np-00002,2.22\n"))
	require.Equal(t, "previewed", pv.State)
	bad := e.delta("r1", "csv", []byte("product_id,_delete\np-00001,yes\np-00002,TRUE\n"))
	require.Equal(t, "rejected", bad.State)
	for _, g := range []int64{slot.Generation, pv.Generation} {
		body.Reset()
		require.NoError(t, e.API.Problems(ctx, tok, "r1", g, &body), "generation %d", g)
		require.Empty(t, body.String(), "generation %d", g)
	}
	body.Reset()
	require.NoError(t, e.API.Problems(ctx, tok, "r1", bad.Generation, &body))
	require.Equal(t, 2, strings.Count(body.String(), `"unsupported_value"`), body.String())
}
