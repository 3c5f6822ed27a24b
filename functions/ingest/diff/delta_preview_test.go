package diff_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// uploadDeltaDryRun reserves the next generation as a delta's dry run,
// puts its file and records its arrival.
func (f *fixture) uploadDeltaDryRun(data string) int64 {
	f.t.Helper()
	gen, err := f.store.ReserveDeltaDryRun(context.Background(), "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(f.t, err)
	require.NoError(f.t, f.blobs.Put(context.Background(), keys.Upload("r1", gen), []byte(data)))
	f.arrived(gen)
	return gen
}

// planItems reads the plan gen's diff wrote (its first page; the plans
// here are small): product_id -> op and each field's from -> to.
func (f *fixture) planItems(gen int64) map[string]string {
	f.t.Helper()
	st := f.status(gen)
	require.NotNil(f.t, st.PlanPages)
	out := map[string]string{}
	if *st.PlanPages == 0 {
		return out
	}
	require.Equal(f.t, 1, *st.PlanPages)
	for _, line := range bytes.Split(bytes.TrimSpace(f.object(keys.PlanPage("r1", gen, 0))), []byte("\n")) {
		var item struct {
			ProductID string                                `json:"product_id"`
			Op        string                                `json:"op"`
			Fields    map[string]map[string]json.RawMessage `json:"fields"`
		}
		require.NoError(f.t, json.Unmarshal(line, &item))
		var fields []string
		for name, ft := range item.Fields {
			fields = append(fields, fmt.Sprintf("%s:%s->%s", name, ft["from"], ft["to"]))
		}
		slices.Sort(fields)
		out[item.ProductID] = item.Op + " " + strings.Join(fields, " ")
	}
	return out
}

// The dry run of a delta (DESIGN 13) is merged into the catalog's live
// values when its file arrives, without waiting for an older generation
// in progress: it ends previewed with a delta's counts and its plan field
// by field, sends no chunk, writes no index and no event, and leaves the
// older generation applying; applying that one then, the catalog is its.
// A real delta never waits for a dry run in progress, and the same delta
// uploaded for real changes what the plan said.
func TestDeltaDryRunChangesNothingAndWaitsForNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadFull(`{"product_id":"p1","a":1,"b":"x"}
{"product_id":"p2","a":2}
{"product_id":"p3","a":3}
`)
	f.settle(g1)
	g2 := f.uploadFull(`{"product_id":"p1","a":1,"b":"x"}
{"product_id":"p2","a":2}
{"product_id":"p3","a":3}
{"product_id":"p5","a":5}
`)
	f.diff(g2)
	older := f.take()
	require.Equal(t, catalog.StateApplying, f.status(g2).State)

	delta := `{"product_id":"p1","a":5,"b":null}
{"product_id":"p2","_delete":true}
{"product_id":"p4","c":"new","d":null}
{"product_id":"p9","_delete":true}
{"product_id":"p3","a":3}
`
	g3 := f.uploadDeltaDryRun(delta)
	f.diff(g3)
	st := f.status(g3)
	require.Equal(t, catalog.StatePreviewed, st.State, "it waits for no older generation: %s %s", st.ErrorCode, st.ErrorMessage)
	require.True(t, st.DryRun)
	require.Equal(t, catalog.ModeDelta, st.Mode)
	require.Empty(t, st.ErrorCode)
	require.Equal(t, [4]int64{1, 1, 1, 2}, [4]int64{st.Inserted, st.Updated, st.Deleted, st.Unchanged})
	require.Empty(t, f.take(), "a preview sends no chunk")
	_, err := f.blobs.Get(context.Background(), keys.Index("r1", g3))
	require.ErrorIs(t, err, blob.ErrNotFound, "a preview writes no index")
	require.Equal(t, map[string]string{
		"p1": `update a:1->5 b:"x"->null`,
		"p2": `delete a:2->null`,
		"p4": `insert c:null->"new"`,
	}, f.planItems(g3))
	require.Equal(t, catalog.StateApplying, f.status(g2).State, "a preview stops nothing")
	var events int
	require.NoError(t, f.store.Shards[0].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE retailer_id = 'r1' AND generation = $1`, g3).Scan(&events))
	require.Zero(t, events, "a preview emits no event")
	f.applyAll(older)
	require.Equal(t, catalog.StateApplied, f.status(g2).State)
	wantG2 := map[string]string{"p1": `{"a":1,"b":"x"}`, "p2": `{"a":2}`, "p3": `{"a":3}`, "p5": `{"a":5}`}
	require.Equal(t, wantG2, f.catalogNow())

	// A dry run received and not yet diffed makes no real delta wait, and
	// is no waiting delta itself.
	g4 := f.uploadDeltaDryRun(delta)
	g5 := f.uploadDelta(delta)
	waiting, err := f.store.WaitingDelta(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, g5, waiting, "the real delta is the waiting one, and it waits for nothing")
	f.settle(g5)
	st = f.status(g5)
	require.Equal(t, catalog.StateApplied, st.State, "%s %s", st.ErrorCode, st.ErrorMessage)
	require.Equal(t, map[string]string{"p1": `{"a":5}`, "p3": `{"a":3}`, "p4": `{"c":"new"}`, "p5": `{"a":5}`}, f.catalogNow(),
		"the real delta changed what the preview's plan said")
	f.diff(g4)
	st = f.status(g4)
	require.Equal(t, catalog.StatePreviewed, st.State)
	require.Equal(t, [4]int64{0, 0, 0, 5}, [4]int64{st.Inserted, st.Updated, st.Deleted, st.Unchanged},
		"read against the catalog as it is when it is read: the delta is applied already")
	require.Empty(t, f.planItems(g4))
}

// The dry run of a delta that a real upload would hold ends previewed,
// its error naming the hold (here mass_delete) with the preview's prefix;
// a bad delta ends rejected with its problems, as a real one.
func TestDeltaDryRunNamesTheHoldAndIsRejectedAsADelta(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	var full, del strings.Builder
	full.WriteString("product_id,a\n")
	del.WriteString("product_id,_delete\n")
	for i := range 120 {
		fmt.Fprintf(&full, "p%03d,1\n", i)
		if i < 70 {
			fmt.Fprintf(&del, "p%03d,true\n", i)
		}
	}
	g1 := f.uploadFull(full.String())
	f.settle(g1)
	g2 := f.uploadDeltaDryRun(del.String())
	f.diff(g2)
	require.Empty(t, f.take())
	st := f.status(g2)
	require.Equal(t, catalog.StatePreviewed, st.State)
	require.Equal(t, catalog.HoldMassDelete, st.ErrorCode)
	require.True(t, strings.HasPrefix(st.ErrorMessage, "a real upload of this file would be held: "), st.ErrorMessage)
	require.EqualValues(t, 70, st.Deleted)
	require.Len(t, f.planItems(g2), 70)
	require.Len(t, f.catalogNow(), 120)

	g3 := f.uploadDeltaDryRun("product_id,a,_delete\np1,1,\np1,2,\np2,,yes\n")
	f.diff(g3)
	st = f.status(g3)
	require.Equal(t, catalog.StateRejected, st.State)
	require.True(t, st.DryRun)
	require.Len(t, st.Problems, 2, "%+v", st.Problems)
	require.Equal(t, "duplicate_product_id", st.Problems[0].Code)
	require.Equal(t, "unsupported_value", st.Problems[1].Code)
}
