package diff_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
)

// uploadDeltaAs is uploadDelta with the slot's format (csv or jsonl).
func (f *fixture) uploadDeltaAs(format, data string) int64 {
	f.t.Helper()
	gen, err := f.store.ReserveDelta(context.Background(), "r1", format, time.Now().Add(time.Hour), 0)
	require.NoError(f.t, err)
	require.NoError(f.t, f.blobs.Put(context.Background(), keys.Upload("r1", gen), []byte(data)))
	f.arrived(gen)
	return gen
}

// uploadDryRun reserves a full snapshot's dry run, puts its file and
// records its arrival.
func (f *fixture) uploadDryRun(data string) int64 {
	f.t.Helper()
	gen, err := f.store.ReserveDryRun(context.Background(), "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(f.t, err)
	require.NoError(f.t, f.blobs.Put(context.Background(), keys.Upload("r1", gen), []byte(data)))
	f.arrived(gen)
	return gen
}

// A hostile retailer's delta rows, in both formats (DESIGN 13, section 4):
// each ends as the contract says, and a rejected one changes nothing.
// _delete with other columns deletes whatever they say; null in every
// column leaves a product with no attribute (an insert too); the same id
// twice, ids with NUL, invalid UTF-8 or over 256 bytes, and product_id or
// _delete given twice reject the delta; a delta of no row, or deleting
// products the catalog does not have, changes nothing and applies; the
// reserved name's other spellings (_DELETE) are attributes.
func TestDeltaPoisonRows(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	var full strings.Builder
	full.WriteString("product_id,a,b\n")
	for i := range 10 {
		fmt.Fprintf(&full, "p%03d,1,x\n", i)
	}
	f.settle(f.uploadFull(full.String()))
	long := strings.Repeat("L", 257)
	cases := []struct {
		name, format, data string
		code               string            // "" applied, else the rejection's code
		changes            map[string]string // product -> canonical attributes after ("-": deleted)
		unchanged          int64
	}{
		{"csv _delete with other columns", "csv", "product_id,a,_delete\np000,9,true\n", "", map[string]string{"p000": "-"}, 0},
		{"jsonl _delete with other keys", "jsonl", `{"product_id":"p001","a":"9","_delete":true}` + "\n", "", map[string]string{"p001": "-"}, 0},
		{"jsonl null in every column", "jsonl", `{"product_id":"p002","a":null,"b":null}` + "\n", "", map[string]string{"p002": `{}`}, 0},
		{"jsonl null in every column, an insert", "jsonl", `{"product_id":"n-null","a":null,"b":null}` + "\n", "", map[string]string{"n-null": `{}`}, 0},
		{"jsonl _delete null keeps", "jsonl", `{"product_id":"p003","_delete":null,"a":"5"}` + "\n", "", map[string]string{"p003": `{"a":"5","b":"x"}`}, 0},
		{"csv empty cells are empty strings", "csv", "product_id,a,b,_delete\np004,,,\n", "", map[string]string{"p004": `{"a":"","b":""}`}, 0},
		{"jsonl null product_id", "jsonl", `{"product_id":null,"a":"1"}` + "\n", "missing_product_id", nil, 0},
		{"jsonl duplicate ids", "jsonl", `{"product_id":"p005","a":"1"}` + "\n" + `{"product_id":"p005","_delete":true}` + "\n", "duplicate_product_id", nil, 0},
		{"csv duplicate ids", "csv", "product_id,a\np005,1\np005,2\n", "duplicate_product_id", nil, 0},
		{"jsonl NUL id", "jsonl", `{"product_id":"x\u0000y","a":"1"}` + "\n", "invalid_product_id", nil, 0},
		{"csv NUL id", "csv", "product_id,a\nx\x00y,1\n", "invalid_product_id", nil, 0},
		{"csv invalid UTF-8 id", "csv", "product_id,a\nx\xffy,1\n", "invalid_utf8", nil, 0},
		{"jsonl invalid UTF-8 id", "jsonl", "{\"product_id\":\"x\xffy\",\"a\":\"1\"}\n", "invalid_utf8", nil, 0},
		{"csv long id", "csv", "product_id,a\n" + long + ",1\n", "invalid_product_id", nil, 0},
		{"jsonl long id", "jsonl", `{"product_id":"` + long + `","_delete":true}` + "\n", "invalid_product_id", nil, 0},
		{"csv no row", "csv", "product_id,a\n", "", nil, 0},
		{"csv empty file", "csv", "", "", nil, 0},
		{"jsonl empty file", "jsonl", "", "", nil, 0},
		{"jsonl blank lines", "jsonl", "\n\n", "", nil, 0},
		{"jsonl _delete of products not in the catalog", "jsonl", `{"product_id":"absent","_delete":true}` + "\n" + `{"product_id":"absent2","_delete":true}` + "\n", "", nil, 2},
		{"csv _delete of a product not in the catalog", "csv", "product_id,_delete,a\nabsent,true,1\n", "", nil, 1},
		{"jsonl product_id twice", "jsonl", `{"product_id":"p006","product_id":"p007","a":"2"}` + "\n", "duplicate_column", nil, 0},
		{"csv product_id twice", "csv", "product_id,product_id,a\np006,p007,3\n", "duplicate_column", nil, 0},
		{"csv _delete twice", "csv", "product_id,_delete,_delete\np006,true,false\n", "duplicate_column", nil, 0},
		{"jsonl _delete twice", "jsonl", `{"product_id":"p006","_delete":true,"_delete":false}` + "\n", "duplicate_column", nil, 0},
		{"jsonl _delete as a string", "jsonl", `{"product_id":"p006","_delete":"true"}` + "\n", "unsupported_value", nil, 0},
		{"csv _delete True", "csv", "product_id,_delete\np006,True\n", "unsupported_value", nil, 0},
		{"csv _DELETE is an attribute", "csv", "product_id,_DELETE\np006,true\n", "", map[string]string{"p006": `{"_DELETE":"true","a":"1","b":"x"}`}, 0},
		{"jsonl nested _delete is a value", "jsonl", `{"product_id":"p007","a":{"_delete":true}}` + "\n", "", map[string]string{"p007": `{"a":{"_delete":true},"b":"x"}`}, 0},
	}
	for _, c := range cases {
		before := f.catalogNow()
		g := f.uploadDeltaAs(c.format, c.data)
		f.settle(g)
		st := f.status(g)
		if c.code == "" {
			require.Equal(t, catalog.StateApplied, st.State, "%s: %s %s", c.name, st.ErrorCode, st.ErrorMessage)
			require.Equal(t, c.unchanged, st.Unchanged, c.name)
		} else {
			require.Equal(t, catalog.StateRejected, st.State, c.name)
			require.Equal(t, c.code, st.ErrorCode, "%s: %s", c.name, st.ErrorMessage)
		}
		want := before
		for id, v := range c.changes {
			if v == "-" {
				delete(want, id)
			} else {
				want[id] = v
			}
		}
		require.Equal(t, want, f.catalogNow(), c.name)
	}
}

// A plan is kept within its bounds (Config.MaxPlanOps, MaxPlanBytes;
// catalog.MaxAppliedPlanOps and MaxAppliedPlanBytes as deployed) for
// every generation that keeps one, since it is held in memory until
// sorted: a full snapshot's dry run, a held full snapshot, a delta's dry
// run and a held delta that change more products than the bound, or whose
// plan passes the bytes, end previewed or held as always, with their
// counts, but keep no plan (the route answers 409 plan_unavailable); an
// applied one too. Within the bounds each keeps its plan.
func TestPlanBeyondItsBoundsIsNotKept(t *testing.T) {
	t.Parallel()
	for _, bound := range []string{"ops", "bytes"} {
		f := newFixtureWith(t, 1000, func(c *diff.Config) {
			if bound == "ops" {
				c.MaxPlanOps = 60
			} else {
				c.MaxPlanBytes = 4000
			}
		})
		row := func(b *strings.Builder, i int, v string) { fmt.Fprintf(b, "p%03d,%s,x\n", i, v) }
		var day1, day2 strings.Builder
		day1.WriteString("product_id,a,b\n")
		day2.WriteString("product_id,a,b\n")
		for i := range 120 {
			row(&day1, i, "1")
			if i >= 70 { // 70 deleted, 50 updated: 120 ops, held mass_delete
				row(&day2, i, "2")
			}
		}
		f.settle(f.uploadFull(day1.String()))
		var del, small strings.Builder
		for i := range 120 {
			if i < 70 {
				fmt.Fprintf(&del, `{"product_id":"p%03d","_delete":true}`+"\n", i)
			} else {
				fmt.Fprintf(&del, `{"product_id":"p%03d","a":"3"}`+"\n", i)
			}
		}
		small.WriteString(`{"product_id":"p000","a":"4"}` + "\n")
		noPlan := func(gen int64, state catalog.State) {
			t.Helper()
			st := f.status(gen)
			require.Equal(t, state, st.State, "%s: %s", bound, st.ErrorMessage)
			require.Nil(t, st.PlanPages, "%s: generation %d (%s) keeps no plan", bound, gen, state)
			require.EqualValues(t, 120, st.Inserted+st.Updated+st.Deleted, "%s: its counts", bound)
		}
		g := f.uploadDryRun(day2.String())
		f.diff(g)
		noPlan(g, catalog.StatePreviewed)
		g = f.uploadDeltaDryRun(del.String())
		f.diff(g)
		noPlan(g, catalog.StatePreviewed)
		g = f.uploadFull(day2.String())
		f.diff(g)
		noPlan(g, catalog.StateHeld)
		require.NoError(t, f.store.Confirm(context.Background(), "r1", g))
		f.settle(g)
		require.Equal(t, catalog.StateApplied, f.status(g).State)
		f.settle(f.uploadFull(day1.String())) // 70 inserted, 50 updated: applied, over the bound
		noPlan(g+1, catalog.StateApplied)
		g = f.uploadDelta(del.String())
		f.diff(g)
		noPlan(g, catalog.StateHeld)
		require.NoError(t, f.store.Confirm(context.Background(), "r1", g))
		f.settle(g)
		require.Equal(t, catalog.StateApplied, f.status(g).State)

		// Within the bounds, a plan is kept.
		g = f.uploadDeltaDryRun(small.String())
		f.diff(g)
		require.Len(t, f.planItems(g), 1, bound)
		g = f.uploadDelta(small.String())
		f.settle(g)
		require.Len(t, f.planItems(g), 1, bound)
	}
}

// The problems route answers 200 for every generation whose file was read
// (DESIGN 13), so a delta read without a problem has an empty problems
// file, as a full snapshot has: one applied, one held, one that changes
// nothing, a delta's dry run; a rejected delta's lists its problems. The
// file exists before the state says that the delta was read.
func TestDeltaReadWithoutProblemsHasAnEmptyProblemsFile(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	var full strings.Builder
	full.WriteString("product_id,a\n")
	for i := range 120 {
		fmt.Fprintf(&full, "p%03d,1\n", i)
	}
	g := f.uploadFull(full.String())
	f.settle(g)
	require.Empty(t, f.object(keys.Problems("r1", g)), "a full snapshot's")
	var del strings.Builder
	for i := range 70 {
		fmt.Fprintf(&del, `{"product_id":"p%03d","_delete":true}`+"\n", i)
	}
	for _, c := range []struct {
		name  string
		gen   func() int64
		state catalog.State
	}{
		{"applied", func() int64 { return f.uploadDelta(`{"product_id":"p100","a":"2"}` + "\n") }, catalog.StateApplied},
		{"changing nothing", func() int64 { return f.uploadDelta(`{"product_id":"p100","a":"2"}` + "\n") }, catalog.StateApplied},
		{"held", func() int64 { return f.uploadDelta(del.String()) }, catalog.StateHeld},
		{"a dry run", func() int64 { return f.uploadDeltaDryRun(`{"product_id":"p101","a":"3"}` + "\n") }, catalog.StatePreviewed},
		{"csv", func() int64 { return f.uploadDeltaAs("csv", "product_id,a\np102,4\n") }, catalog.StateApplied},
	} {
		g := c.gen()
		f.settle(g)
		require.Equal(t, c.state, f.status(g).State, c.name)
		_, err := f.blobs.Open(context.Background(), keys.Problems("r1", g), "")
		require.NoError(t, err, "%s: the problems file of generation %d", c.name, g)
		require.Empty(t, f.object(keys.Problems("r1", g)), c.name)
		if c.name == "changing nothing" {
			require.Empty(t, f.planItems(g), "an applied generation that changes nothing has an empty plan")
		}
		if c.state == catalog.StateHeld { // confirmed: the next ones wait for no older generation
			require.NoError(t, f.store.Confirm(context.Background(), "r1", g))
			f.settle(g)
			require.Equal(t, catalog.StateApplied, f.status(g).State)
		}
	}
	g = f.uploadDelta(`{"product_id":"p1","a":"1"}` + "\n" + `{"product_id":"p1","a":"2"}` + "\n")
	f.settle(g)
	require.Equal(t, catalog.StateRejected, f.status(g).State)
	require.Contains(t, string(f.object(keys.Problems("r1", g))), "duplicate_product_id")
}

// A delta whose rows each merge a product past 256 KiB of canonical
// attributes (I11) is rejected attributes_too_large with every such row
// listed, in line order (section 4: the problems, not just the first, so
// the file is corrected in one round), in its status and its problems
// file; nothing changes.
func TestDeltaMergedPastTheAttributeLimitListsEveryRow(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	big := strings.Repeat("x", 200<<10)
	var full strings.Builder
	full.WriteString("product_id,a,b\n")
	for i := range 5 {
		fmt.Fprintf(&full, "p%d,%s,1\n", i, big)
	}
	f.settle(f.uploadFull(full.String()))
	before := f.catalogNow()
	var d strings.Builder
	for i := range 5 {
		if i == 2 {
			fmt.Fprintf(&d, `{"product_id":"p%d","b":"2"}`+"\n", i) // fits
			continue
		}
		fmt.Fprintf(&d, `{"product_id":"p%d","b":"%s"}`+"\n", i, big)
	}
	g := f.uploadDelta(d.String())
	f.settle(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "attributes_too_large", st.ErrorCode)
	var lines []int
	for _, p := range st.Problems {
		require.Equal(t, "attributes_too_large", p.Code)
		lines = append(lines, p.Line)
	}
	require.Equal(t, []int{1, 2, 4, 5}, lines)
	require.Equal(t, 4, strings.Count(string(f.object(keys.Problems("r1", g))), "attributes_too_large"))
	require.Equal(t, before, f.catalogNow())
}

// A delta is held in memory whole, so it is bounded apart from a full
// snapshot (Config.MaxDeltaRows, MaxDeltaBytes; 1,000,000 rows and 256 MiB
// decompressed as deployed): one past either is rejected, its message
// saying to send a full snapshot, and changes nothing; a full snapshot of
// the same rows applies.
func TestDeltaPastItsBoundsIsRejected(t *testing.T) {
	t.Parallel()
	f := newFixtureWith(t, 1000, func(c *diff.Config) { c.MaxDeltaRows, c.MaxDeltaBytes = 4, 200 })
	f.settle(f.uploadFull("product_id,a\np0,1\n"))
	before := f.catalogNow()
	for _, c := range []struct {
		name, data, code, says string
	}{
		{"five rows", "product_id,a\np1,1\np2,1\np3,1\np4,1\np5,1\n", "too_many_products", "more than 4 rows, the limit of a delta"},
		{"over 200 bytes", "product_id,a\np1," + strings.Repeat("y", 300) + "\n", "file_too_large", "the limit of a delta, 200 bytes"},
	} {
		g := f.uploadDelta(c.data)
		f.settle(g)
		st := f.status(g)
		require.Equal(t, catalog.StateRejected, st.State, c.name)
		require.Equal(t, c.code, st.ErrorCode, c.name)
		require.Contains(t, st.ErrorMessage, c.says, c.name)
		require.Contains(t, st.ErrorMessage, "send a full snapshot instead", c.name)
		require.Equal(t, before, f.catalogNow(), c.name)
	}
	g := f.uploadFull("product_id,a\np1,1\np2,1\np3,1\np4,1\np5,1\n")
	f.settle(g)
	require.Equal(t, catalog.StateApplied, f.status(g).State)
}

// Past the status's 100 problems, the problems file of a delta whose
// merges pass the attribute limit lists every such row.
func TestDeltaMergedPastTheLimitProblemsFileListsAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	big := strings.Repeat("x", 130<<10)
	const n = 120
	var full strings.Builder
	full.WriteString("product_id,a,b\n")
	for i := range n {
		fmt.Fprintf(&full, "p%03d,%s,1\n", i, big)
	}
	f.settle(f.uploadFull(full.String()))
	var d strings.Builder
	for i := range n {
		fmt.Fprintf(&d, `{"product_id":"p%03d","b":"%s"}`+"\n", i, big)
	}
	g := f.uploadDelta(d.String())
	f.settle(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "attributes_too_large", st.ErrorCode)
	require.Len(t, st.Problems, 100)
	require.True(t, st.MoreProblems)
	file := string(f.object(keys.Problems("r1", g)))
	require.Equal(t, n, strings.Count(file, `"attributes_too_large"`), file[:min(len(file), 500)])
	require.NotContains(t, file, `"truncated"`)
}
