package diff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
)

// catalogAll is catalogNow past its first 1,000 products.
func (f *fixture) catalogAll() map[string]string {
	f.t.Helper()
	out := map[string]string{}
	after := ""
	for {
		ps, err := f.store.Products(context.Background(), "r1", after, 1000, 1<<24, true)
		require.NoError(f.t, err)
		for _, p := range ps {
			var v map[string]any
			require.NoError(f.t, json.Unmarshal(p.Attributes, &v))
			b, err := json.Marshal(v)
			require.NoError(f.t, err)
			out[p.ProductID] = string(b)
		}
		if len(ps) < 1000 {
			return out
		}
		after = ps[len(ps)-1].ProductID
	}
}

// planAll reads every page of gen's plan, checking that the items are in
// product_id order and that the index names each page's first id and
// items: product_id -> op and fields, as planItems.
func (f *fixture) planAll(gen int64) map[string]string {
	f.t.Helper()
	st := f.status(gen)
	require.NotNil(f.t, st.PlanPages, "generation %d keeps a plan", gen)
	var index catalog.PlanIndexDoc
	require.NoError(f.t, json.Unmarshal(f.object(keys.PlanIndex("r1", gen)), &index))
	require.Len(f.t, index.Pages, *st.PlanPages)
	out := map[string]string{}
	last := ""
	for n, ref := range index.Pages {
		lines := bytes.Split(bytes.TrimSpace(f.object(keys.PlanPage("r1", gen, n))), []byte("\n"))
		require.Len(f.t, lines, ref.Items, "page %d", n)
		for i, line := range lines {
			var item struct {
				ProductID string                                `json:"product_id"`
				Op        string                                `json:"op"`
				Fields    map[string]map[string]json.RawMessage `json:"fields"`
			}
			require.NoError(f.t, json.Unmarshal(line, &item))
			if i == 0 {
				require.Equal(f.t, ref.First, item.ProductID, "page %d", n)
			}
			require.Less(f.t, last, item.ProductID, "in product_id order")
			last = item.ProductID
			var fields []string
			for name, ft := range item.Fields {
				fields = append(fields, fmt.Sprintf("%s:%s->%s", name, ft["from"], ft["to"]))
			}
			slices.Sort(fields)
			out[item.ProductID] = item.Op + " " + strings.Join(fields, " ")
		}
	}
	return out
}

// changedBetween is what taking the catalog from before to after changes,
// field by field, as planAll reads a plan.
func changedBetween(t *testing.T, before, after map[string]string) map[string]string {
	t.Helper()
	obj := func(s string) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		if s != "" {
			require.NoError(t, json.Unmarshal([]byte(s), &m))
		}
		return m
	}
	out := map[string]string{}
	ids := map[string]bool{}
	for id := range before {
		ids[id] = true
	}
	for id := range after {
		ids[id] = true
	}
	for id := range ids {
		b, inB := before[id]
		a, inA := after[id]
		op := "update"
		switch {
		case !inB:
			op = "insert"
		case !inA:
			op = "delete"
		}
		bo, ao := obj(b), obj(a)
		var fields []string
		for name, v := range bo {
			if w, ok := ao[name]; !ok {
				fields = append(fields, fmt.Sprintf("%s:%s->null", name, v))
			} else if string(w) != string(v) {
				fields = append(fields, fmt.Sprintf("%s:%s->%s", name, v, w))
			}
		}
		for name, w := range ao {
			if _, ok := bo[name]; !ok {
				fields = append(fields, fmt.Sprintf("%s:null->%s", name, w))
			}
		}
		if len(fields) == 0 && op == "update" {
			continue // an insert or a delete is a change without any field too
		}
		slices.Sort(fields)
		out[id] = op + " " + strings.Join(fields, " ")
	}
	return out
}

// With a plan budget of a few KB (Config.PlanMemoryBytes), every plan of
// a few thousand operations spills as sorted runs and is merged, and is
// still, field for field, what its generation changes: the applied plan
// of a first load and of an update, the plans of a full snapshot's dry
// run and of the same upload held (equal to what confirming it changes),
// and those of a delta's dry run and of the delta applied.
func TestPlanSpilledIsWhatTheGenerationChanged(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1<<20)
	var logs bytes.Buffer // the diff's, to see that each plan spilled
	cfg := diff.Config{ChunkRows: 500, InflightCap: 20, LargeThreshold: 1 << 20, SmallQueueURL: "small", LargeQueueURL: "large",
		PlanMemoryBytes: 4 << 10, SpillDir: t.TempDir()}
	f.h = diff.New(cfg, f.store, f.blobs, f.queue, slog.New(slog.NewJSONHandler(&logs, nil)))
	f.h.Metrics = metrics.New(f.metrics, metrics.Options{Function: "diff"})
	spilled := func(what string) {
		t.Helper()
		require.Contains(t, logs.String(), "the plan's sorted runs spilled to disk", what)
		logs.Reset()
	}
	file := func(n int, row func(i int) string) string {
		var b strings.Builder
		for i := range n {
			if r := row(i); r != "" {
				b.WriteString(r + "\n")
			}
		}
		return b.String()
	}

	// A first load: its applied plan inserts every product.
	day1 := file(3000, func(i int) string { return fmt.Sprintf(`{"product_id":"p%05d","a":%d,"b":"x%d"}`, i, i, i) })
	g := f.uploadFull(day1)
	f.settle(g)
	require.Equal(t, catalog.StateApplied, f.status(g).State)
	after := f.catalogAll()
	require.Len(t, after, 3000)
	require.Equal(t, changedBetween(t, nil, after), f.planAll(g), "a first load's applied plan")
	spilled("a first load")

	// Day 2 deletes over half (held mass_delete), updates, inserts: its dry
	// run's plan and the held upload's are what confirming it changes.
	day2 := file(3500, func(i int) string {
		switch {
		case i < 1600:
			return ""
		case i < 2600:
			return fmt.Sprintf(`{"product_id":"p%05d","a":%d,"b":"x%d","c":[%d,"y"]}`, i, i+1, i, i)
		}
		return fmt.Sprintf(`{"product_id":"p%05d","a":%d,"b":"x%d"}`, i, i, i)
	})
	before := after
	pv := f.uploadDryRun(day2)
	f.diff(pv)
	require.Equal(t, catalog.StatePreviewed, f.status(pv).State)
	spilled("a dry run")
	g = f.uploadFull(day2)
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateHeld, st.State, "%s %s", st.ErrorCode, st.ErrorMessage)
	spilled("a held upload")
	held := f.planAll(g)
	require.NoError(t, f.store.Confirm(context.Background(), "r1", g))
	f.settle(g)
	require.Equal(t, catalog.StateApplied, f.status(g).State)
	after = f.catalogAll()
	want := changedBetween(t, before, after)
	require.Len(t, want, 1600+1000+500)
	require.Equal(t, want, held, "the held upload's plan")
	require.Equal(t, want, f.planAll(pv), "the dry run's plan")

	// Day 3 updates most products: its applied plan, against a baseline.
	day3 := file(3500, func(i int) string {
		if i < 1600 || i%7 == 0 {
			return fmt.Sprintf(`{"product_id":"p%05d","a":%d,"b":"x%d"}`, i, i, i)
		}
		return fmt.Sprintf(`{"product_id":"p%05d","a":%d,"b":"z%d","c":[%d,"y"]}`, i, i+2, i, i)
	})
	before = after
	g = f.uploadFull(day3)
	f.settle(g)
	require.Equal(t, catalog.StateApplied, f.status(g).State)
	after = f.catalogAll()
	want = changedBetween(t, before, after)
	require.Greater(t, len(want), 3000)
	require.Equal(t, want, f.planAll(g), "an update's applied plan")
	spilled("an update")

	// A delta: its dry run's plan and its applied plan.
	delta := file(3600, func(i int) string {
		switch {
		case i%10 == 0:
			return fmt.Sprintf(`{"product_id":"p%05d","_delete":true}`, i)
		case i%10 == 1:
			return fmt.Sprintf(`{"product_id":"p%05d","c":null}`, i)
		}
		return fmt.Sprintf(`{"product_id":"p%05d","a":%d}`, i, i+3)
	})
	before = after
	pv = f.uploadDeltaDryRun(delta)
	f.diff(pv)
	require.Equal(t, catalog.StatePreviewed, f.status(pv).State)
	spilled("a delta's dry run")
	g = f.uploadDelta(delta)
	f.settle(g)
	st = f.status(g)
	require.Equal(t, catalog.StateApplied, st.State, "%s %s", st.ErrorCode, st.ErrorMessage)
	spilled("a delta")
	after = f.catalogAll()
	want = changedBetween(t, before, after)
	require.Greater(t, len(want), 3000)
	require.Equal(t, want, f.planAll(g), "a delta's applied plan")
	require.Equal(t, want, f.planAll(pv), "a delta's dry run's plan")
}
