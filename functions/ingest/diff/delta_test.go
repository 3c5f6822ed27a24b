package diff_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// uploadDelta reserves the next generation as a delta, puts its file and
// records its arrival (as the arrival function does).
func (f *fixture) uploadDelta(data string) int64 {
	f.t.Helper()
	gen, err := f.store.ReserveDelta(context.Background(), "r1", "", time.Now().Add(time.Hour), 0)
	require.NoError(f.t, err)
	require.NoError(f.t, f.blobs.Put(context.Background(), keys.Upload("r1", gen), []byte(data)))
	f.arrived(gen)
	return gen
}

func (f *fixture) arrived(gen int64) {
	f.t.Helper()
	_, err := f.store.MarkArrived(context.Background(), "r1", gen, time.Now(), time.Minute)
	require.NoError(f.t, err)
}

// uploadFull is upload with its arrival recorded.
func (f *fixture) uploadFull(data string) int64 {
	gen := f.upload([]byte(data))
	f.arrived(gen)
	return gen
}

// settle diffs gen and applies every chunk sent.
func (f *fixture) settle(gen int64) {
	f.t.Helper()
	f.diff(gen)
	f.applyAll(f.take())
}

// catalogNow is the retailer's catalog: product_id -> canonical attributes.
func (f *fixture) catalogNow() map[string]string {
	f.t.Helper()
	ps, err := f.store.Products(context.Background(), "r1", "", 1000, 1<<20, true)
	require.NoError(f.t, err)
	out := map[string]string{}
	for _, p := range ps {
		var v map[string]any
		require.NoError(f.t, json.Unmarshal(p.Attributes, &v))
		b, err := json.Marshal(v)
		require.NoError(f.t, err)
		out[p.ProductID] = string(b)
	}
	return out
}

// jsonl is the JSON Lines file of a catalog.
func jsonl(c map[string]string) string {
	var b strings.Builder
	for id, attrs := range c {
		obj := map[string]json.RawMessage{}
		if err := json.Unmarshal([]byte(attrs), &obj); err != nil {
			panic(err)
		}
		id, _ := json.Marshal(id)
		obj["product_id"] = id
		line, _ := json.Marshal(obj)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// A delta merges attributes, removes null ones, inserts, deletes (an absent
// product's delete changes nothing), and its index is the baseline's with
// its entries merged in: a full snapshot equal to the result changes nothing.
func TestDeltaMergesAndItsIndexServesTheNextFullSnapshot(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadFull(`{"product_id":"p1","a":1,"b":"x"}
{"product_id":"p2","a":2}
{"product_id":"p3","a":3}
`)
	f.settle(g1)
	g2 := f.uploadDelta(`{"product_id":"p1","a":5,"b":null}
{"product_id":"p2","_delete":true}
{"product_id":"p4","c":"new","d":null}
{"product_id":"p9","_delete":true}
{"product_id":"p3","a":3}
`)
	f.settle(g2)
	st := f.status(g2)
	require.Equal(t, catalog.StateApplied, st.State)
	require.Equal(t, catalog.ModeDelta, st.Mode)
	require.Equal(t, [4]int64{1, 1, 1, 2}, [4]int64{st.Inserted, st.Updated, st.Deleted, st.Unchanged})
	require.EqualValues(t, 3, st.Products)
	want := map[string]string{"p1": `{"a":5}`, "p3": `{"a":3}`, "p4": `{"c":"new"}`}
	require.Equal(t, want, f.catalogNow())

	g3 := f.uploadFull(jsonl(want))
	f.diff(g3)
	require.Empty(t, f.take(), "the delta's index holds its merged entries")
	st = f.status(g3)
	require.Equal(t, catalog.StateApplied, st.State)
	require.EqualValues(t, 3, st.Unchanged)
	require.Equal(t, catalog.ModeFull, st.Mode)
}

// I6: a delta that changes nothing sends nothing; CSV's _delete cell.
func TestDeltaWithoutChangeWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadFull("product_id,price\np1,3\np2,4\n")
	f.settle(g1)
	g2 := f.uploadDelta("product_id,price,_delete\np1,3,\np2,4,false\np7,,true\n")
	f.diff(g2)
	require.Empty(t, f.take())
	st := f.status(g2)
	require.Equal(t, catalog.StateApplied, st.State)
	require.EqualValues(t, 3, st.Unchanged)
	g3 := f.uploadDelta("product_id,price,_delete\np1,3,true\n")
	f.settle(g3)
	require.Equal(t, map[string]string{"p2": `{"price":"4"}`}, f.catalogNow())
}

// diffJobs records the diff jobs the handler sends.
type diffJobs struct{ gens []int64 }

func (d *diffJobs) SendDiffJob(_ context.Context, _ string, gen int64) error {
	d.gens = append(d.gens, gen)
	return nil
}

// Order (DESIGN 13): a delta waits for an older generation in progress and
// never supersedes it; once it ends the delta's diff job is sent, and the
// delta applies on top of it.
func TestDeltaWaitsForAnOlderGenerationInProgress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	jobs := &diffJobs{}
	f.h.Jobs = jobs
	g1 := f.uploadFull("product_id,a,b\np1,1,1\np2,2,2\n")
	f.settle(g1)
	g2 := f.uploadFull("product_id,a,b\np1,10,1\np2,20,2\np3,30,3\n")
	f.diff(g2)
	chunks := f.take()
	require.Equal(t, catalog.StateApplying, f.status(g2).State)
	g3 := f.uploadDelta("product_id,b\np1,B\np3,C\n")
	f.diff(g3)
	require.Equal(t, catalog.StateReceived, f.status(g3).State, "the delta waits")
	require.Equal(t, catalog.StateApplying, f.status(g2).State, "and does not supersede")
	require.Empty(t, f.take())
	f.applyAll(chunks)
	require.Equal(t, catalog.StateApplied, f.status(g2).State)
	waiting, err := f.store.WaitingDelta(context.Background(), "r1")
	require.NoError(t, err)
	require.Equal(t, g3, waiting)
	f.settle(g3)
	require.Equal(t, catalog.StateApplied, f.status(g3).State)
	require.Equal(t, map[string]string{"p1": `{"a":"10","b":"B"}`, "p2": `{"a":"20","b":"2"}`, "p3": `{"a":"30","b":"C"}`}, f.catalogNow())

	// A delta waiting for a held upload: a rejection of the older one (here
	// by its own diff) starts it at once.
	g4 := f.uploadFull("product_id,a\n\"bad\n")
	g5 := f.uploadDelta("product_id,b\np2,Z\n")
	f.diff(g5)
	require.Equal(t, catalog.StateReceived, f.status(g5).State)
	jobs.gens = nil
	f.diff(g4)
	require.Equal(t, catalog.StateRejected, f.status(g4).State)
	require.Equal(t, []int64{g5}, jobs.gens, "the waiting delta's diff job was sent")
	f.settle(g5)
	require.Equal(t, `{"a":"20","b":"Z"}`, f.catalogNow()["p2"])
}

// A newer full snapshot that arrives before a waiting delta is applied
// supersedes it; a newer delta supersedes nothing.
func TestNewerFullSnapshotSupersedesAWaitingDelta(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadFull("product_id,a\np1,1\n")
	f.settle(g1)
	g2 := f.uploadFull("product_id,a\np1,2\np2,2\n")
	f.diff(g2)
	old := f.take()
	g3 := f.uploadDelta("product_id,a\np1,3\n")
	g4 := f.uploadDelta("product_id,a\np2,4\n")
	f.diff(g3)
	f.diff(g4)
	require.Equal(t, catalog.StateReceived, f.status(g3).State)
	require.Equal(t, catalog.StateReceived, f.status(g4).State)
	require.Equal(t, catalog.StateApplying, f.status(g2).State)
	g5 := f.uploadFull("product_id,a\np1,5\n")
	f.settle(g5)
	f.applyAll(old)
	for _, g := range []int64{g2, g3, g4} {
		require.Equal(t, catalog.StateSuperseded, f.status(g).State, "generation %d", g)
	}
	f.diff(g3)
	require.Equal(t, catalog.StateSuperseded, f.status(g3).State)
	require.Equal(t, map[string]string{"p1": `{"a":"5"}`}, f.catalogNow())
}

// half applies the first of gen's chunks and leaves the rest unapplied.
func (f *fixture) half(gen int64) {
	f.t.Helper()
	f.diff(gen)
	chunks := f.take()
	require.Greater(f.t, len(chunks), 1, "several chunks")
	f.applyAll(chunks[:1])
}

// wide is a CSV catalog of n products whose attribute a is v.
func wide(n int, v string) string {
	var b strings.Builder
	b.WriteString("product_id,a\n")
	for i := range n {
		fmt.Fprintf(&b, "p%02d,%s\n", i, v)
	}
	return b.String()
}

func wideCatalog(n int, v string, over map[string]string) map[string]string {
	c := map[string]string{}
	for i := range n {
		c[fmt.Sprintf("p%02d", i)] = fmt.Sprintf(`{"a":"%s"}`, v)
	}
	maps.Copy(c, over)
	for k, v := range over {
		if v == "" {
			delete(c, k)
		}
	}
	return c
}

// I5 across deltas: a generation stopped half way is repaired by the next
// delta (laid over the baseline's own catalog, not the shard's half-written
// rows), and a delta stopped half way by the next full snapshot.
func TestDeltaRepairsAndIsRepaired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadFull(wide(12, "1"))
	f.settle(g1)
	g2 := f.uploadFull(wide(12, "2"))
	f.half(g2)
	g3 := f.uploadDelta("product_id,a\np03,3\n")
	f.diff(g3)
	require.Equal(t, catalog.StateReceived, f.status(g3).State)
	undo, err := f.store.Reject(context.Background(), "r1", g2, catalog.Rejection{Code: catalog.CodeApplyFailed, Message: "test"})
	require.NoError(t, err)
	require.True(t, undo.Rejected)
	require.Zero(t, undo.Generation, "no undo: the waiting delta repairs")
	f.settle(g3)
	require.Equal(t, catalog.StateApplied, f.status(g3).State)
	require.Equal(t, wideCatalog(12, "1", map[string]string{"p03": `{"a":"3"}`}), f.catalogNow())

	// A delta stopped half way, then a full snapshot equal to the catalog
	// before it: every row the delta wrote is repaired.
	var d strings.Builder
	d.WriteString("product_id,a\n")
	for i := range 12 {
		fmt.Fprintf(&d, "p%02d,9\n", i)
	}
	g4 := f.uploadDelta(d.String())
	f.half(g4)
	require.NotEqual(t, wideCatalog(12, "1", map[string]string{"p03": `{"a":"3"}`}), f.catalogNow())
	g5 := f.uploadFull(jsonl(wideCatalog(12, "1", map[string]string{"p03": `{"a":"3"}`})))
	f.settle(g5)
	require.Equal(t, catalog.StateApplied, f.status(g5).State)
	require.Equal(t, wideCatalog(12, "1", map[string]string{"p03": `{"a":"3"}`}), f.catalogNow())

	// And a delta stopped half way, repaired by the next delta, which
	// waited for it.
	g6 := f.uploadDelta(d.String())
	f.half(g6)
	g7 := f.uploadDelta("product_id,a\np05,5\n")
	f.diff(g7)
	require.Equal(t, catalog.StateReceived, f.status(g7).State)
	undo, err = f.store.Reject(context.Background(), "r1", g6, catalog.Rejection{Code: catalog.CodeApplyFailed, Message: "test"})
	require.NoError(t, err)
	require.Zero(t, undo.Generation)
	f.settle(g7)
	require.Equal(t, wideCatalog(12, "1", map[string]string{"p03": `{"a":"3"}`, "p05": `{"a":"5"}`}), f.catalogNow())
}

// Rollback to a delta generation is the catalog as it stood after it, and
// the undo (I10) of a generation rejected half way after a delta returns
// the catalog to that delta's catalog.
func TestRollbackAndUndoToADelta(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadFull(wide(12, "1"))
	f.settle(g1)
	g2 := f.uploadDelta("product_id,a,_delete\np00,A,\np01,,true\np99,new,\n")
	f.settle(g2)
	after2 := wideCatalog(12, "1", map[string]string{"p00": `{"a":"A"}`, "p01": "", "p99": `{"a":"new"}`})
	require.Equal(t, after2, f.catalogNow())
	g3 := f.uploadFull(wide(12, "3"))
	f.settle(g3)

	g4, err := f.store.Rollback(context.Background(), "r1", g2, 0)
	require.NoError(t, err)
	f.settle(g4)
	st := f.status(g4)
	require.Equal(t, catalog.StateApplied, st.State)
	require.Equal(t, catalog.ModeRollback, st.Mode)
	require.Equal(t, after2, f.catalogNow(), "the catalog as it stood after the delta")

	g5 := f.uploadDelta(`{"product_id":"p02","b":"x"}` + "\n")
	f.settle(g5)
	after5 := wideCatalog(12, "1", map[string]string{"p00": `{"a":"A"}`, "p01": "", "p99": `{"a":"new"}`, "p02": `{"a":"1","b":"x"}`})
	require.Equal(t, after5, f.catalogNow())

	g6 := f.uploadFull(wide(12, "6"))
	f.half(g6)
	undo, err := f.store.Reject(context.Background(), "r1", g6, catalog.Rejection{Code: catalog.CodeApplyFailed, Message: "test"})
	require.NoError(t, err)
	require.NotZero(t, undo.Generation)
	require.Equal(t, g5, undo.Source)
	f.settle(undo.Generation)
	require.Equal(t, catalog.StateApplied, f.status(undo.Generation).State)
	require.Equal(t, after5, f.catalogNow(), "the undo returns to the delta's catalog")
}

// Holds apply to a delta (I8): deleting more than the threshold is held
// mass_delete, nothing sent, until confirmed.
func TestDeltaMassDeleteIsHeld(t *testing.T) {
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
	g2 := f.uploadDelta(del.String())
	f.diff(g2)
	require.Empty(t, f.take())
	st := f.status(g2)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldMassDelete, st.ErrorCode)
	require.EqualValues(t, 70, st.Deleted)
	require.Len(t, f.catalogNow(), 120)
	require.NoError(t, f.store.Confirm(context.Background(), "r1", g2))
	f.settle(g2)
	require.Equal(t, catalog.StateApplied, f.status(g2).State)
	require.Len(t, f.catalogNow(), 50)
}

// A delta is checked for attribute drift on the products it names (DESIGN
// 13): removing b (null) from 40 of the 110 named products that had it
// applies, removing a from 60 of the 111 that had it (over hold_drop_pct
// 50) is held attribute_dropped; the catalog the delta
// leaves keeps its per-attribute counts, so the next full snapshot that
// drops a column is held too.
func TestDeltaAttributeDroppedIsHeld(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	var full strings.Builder
	full.WriteString("product_id,a,b\n")
	for i := range 120 {
		fmt.Fprintf(&full, "p%03d,1,x\n", i)
	}
	g1 := f.uploadFull(full.String())
	f.settle(g1)
	other := map[string]string{"a": "b", "b": "a"}
	blanking := func(attr string, n int) string {
		var d strings.Builder
		d.WriteString(`{"product_id":"new","a":"2"}` + "\n") // an insert counts as named
		for i := range 110 {
			if i < n {
				fmt.Fprintf(&d, `{"product_id":"p%03d","%s":null}`+"\n", i, attr)
			} else {
				fmt.Fprintf(&d, `{"product_id":"p%03d","%s":"3"}`+"\n", i, other[attr])
			}
		}
		return d.String()
	}
	g2 := f.uploadDelta(blanking("b", 40))
	f.settle(g2)
	st := f.status(g2)
	require.Equal(t, catalog.StateApplied, st.State, "40 of 110 is under 50%%: %s %s", st.ErrorCode, st.ErrorMessage)
	require.Len(t, f.catalogNow(), 121)

	g3 := f.uploadDelta(blanking("a", 60))
	f.diff(g3)
	require.Empty(t, f.take())
	st = f.status(g3)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldAttributeDropped, st.ErrorCode)
	require.Contains(t, st.ErrorMessage, "60 of the 111")

	var noA strings.Builder
	noA.WriteString("product_id,b\n")
	for i := range 120 {
		fmt.Fprintf(&noA, "p%03d,x\n", i)
	}
	fmt.Fprintf(&noA, "new,x\n")
	g4 := f.uploadFull(noA.String())
	f.diff(g4)
	st = f.status(g4)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldAttributeDropped, st.ErrorCode, "the delta kept the counts of the catalog it left: every product has a")
}

// A delta may be a retailer's first upload: it inserts what it names into
// the empty catalog (there is no baseline, and so no baseline counts).
func TestDeltaAsTheFirstUpload(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g1 := f.uploadDelta(`{"product_id":"a","price":"1"}` + "\n" + `{"product_id":"b","_delete":true}` + "\n")
	f.settle(g1)
	st := f.status(g1)
	require.Equal(t, catalog.StateApplied, st.State, "%s %s", st.ErrorCode, st.ErrorMessage)
	require.Equal(t, map[string]string{"a": `{"price":"1"}`}, f.catalogNow())
}
