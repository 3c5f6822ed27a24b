package catalog

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
)

func h(s string) Hash { return HashAttributes([]byte(s)) }

func entries(kv ...string) []IndexEntry {
	var out []IndexEntry
	for i := 0; i < len(kv); i += 2 {
		out = append(out, IndexEntry{ProductID: kv[i], Hash: h(kv[i+1])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProductID < out[j].ProductID })
	for i := range out {
		out[i].Line = int32(i + 1)
	}
	return out
}

func TestIndexRoundTrip(t *testing.T) {
	t.Parallel()
	in := entries("a", "1", "ab", "2", "abc", "3", "b", "4", "b\x00", "5", "é", "6")
	for i := range in {
		in[i].Line = 0 // an index keeps ids and hashes only
	}
	var buf bytes.Buffer
	w := NewIndexWriter(&buf)
	for _, e := range in {
		require.NoError(t, w.Add(e))
	}
	require.NoError(t, w.Close())
	r := NewIndexReader(&buf)
	var out []IndexEntry
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out = append(out, e)
	}
	require.Equal(t, in, out)
}

func TestIndexRejectsDisorderAndCorruption(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	w := NewIndexWriter(&buf)
	require.NoError(t, w.Add(IndexEntry{ProductID: "b"}))
	require.Error(t, w.Add(IndexEntry{ProductID: "a"}))
	require.Error(t, w.Add(IndexEntry{ProductID: "b"}))
	require.NoError(t, w.Close())
	truncated := buf.Bytes()[:buf.Len()-3]
	_, err := NewIndexReader(bytes.NewReader(truncated)).Next()
	require.Error(t, err)
	_, err = NewIndexReader(bytes.NewReader([]byte("nope"))).Next()
	require.Error(t, err)
}

func TestEmptyIndex(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	require.NoError(t, NewIndexWriter(&buf).Close())
	_, err := NewIndexReader(&buf).Next()
	require.Equal(t, io.EOF, err)
}

// ids maps the lines of a plan's Upserts to their product ids.
func ids(es []IndexEntry, lines []int32) []string {
	var out []string
	for _, l := range lines {
		for _, e := range es {
			if e.Line == l {
				out = append(out, e.ProductID)
			}
		}
	}
	return out
}

func TestMergeClassifies(t *testing.T) {
	t.Parallel()
	base := entries("a", "1", "b", "2", "c", "3", "d", "4")
	next := entries("a", "1", "b", "x", "d", "4", "e", "5")
	plan, err := Merge(next, &SliceIterator{Entries: base}, nil)
	require.NoError(t, err)
	require.Equal(t, []string{"b", "e"}, ids(next, plan.Upserts))
	require.Equal(t, []string{"c"}, plan.Deletes)
	require.EqualValues(t, 1, plan.Inserted)
	require.EqualValues(t, 1, plan.Updated)
	require.EqualValues(t, 1, plan.Deleted)
	require.EqualValues(t, 2, plan.Unchanged)
	require.EqualValues(t, 0, plan.Repaired)
}

func TestMergeWithoutBaselineInsertsAll(t *testing.T) {
	t.Parallel()
	next := entries("a", "1", "b", "2")
	plan, err := Merge(next, nil, nil)
	require.NoError(t, err)
	require.EqualValues(t, 2, plan.Inserted)
	require.Len(t, plan.Upserts, 2)
}

// The DESIGN's I5 example: gen 7 changes X from a to b and is stopped after
// writing X; gen 8 has X = a again. A diff of 8 against 6 alone sees no change.
func TestMergeRepairsWhatStoppedGenerationsTouched(t *testing.T) {
	t.Parallel()
	g6 := entries("x", "a", "y", "1", "z", "1")
	g7 := entries("x", "b", "y", "1", "new", "n") // changed x, inserted new, deleted z
	g8 := entries("x", "a", "y", "1", "z", "1")
	plan, err := Merge(g8, &SliceIterator{Entries: g6}, []IndexIterator{&SliceIterator{Entries: g7}})
	require.NoError(t, err)
	require.Equal(t, []string{"x", "z"}, ids(g8, plan.Upserts), "x and z restored")
	require.Equal(t, []string{"new"}, plan.Deletes, "what 7 may have inserted is removed")
	require.EqualValues(t, 3, plan.Unchanged)
	require.EqualValues(t, 3, plan.Repaired)
	require.Zero(t, plan.Inserted+plan.Updated+plan.Deleted)
}

func TestMergeRejectsUnsortedIndex(t *testing.T) {
	t.Parallel()
	bad := []IndexEntry{{ProductID: "b"}, {ProductID: "a"}}
	_, err := Merge(nil, &SliceIterator{Entries: bad}, nil)
	require.Error(t, err)
}

// Property: for random baselines, stopped generations and new snapshots, the
// catalog that results from the baseline, any subset of the stopped
// generations' writes, then the plan's ops (with the apply's rule: write only
// when different) equals the new snapshot.
func TestMergeProperty(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		gen := func() map[string]string {
			m := map[string]string{}
			for i := 0; i < 30; i++ {
				if rng.IntN(3) > 0 {
					m[fmt.Sprintf("p%02d", i)] = fmt.Sprint(rng.IntN(3))
				}
			}
			return m
		}
		toEntries := func(m map[string]string) []IndexEntry {
			var kv []string
			for k, v := range m {
				kv = append(kv, k, v)
			}
			return entries(kv...)
		}
		base := gen()
		db := map[string]string{}
		for k, v := range base {
			db[k] = v
		}
		var stopped []IndexIterator
		for s := rng.IntN(3); s > 0; s-- {
			g := gen()
			stopped = append(stopped, &SliceIterator{Entries: toEntries(g)})
			// a stopped generation wrote a random part of its differences
			for k := range union(base, g) {
				if base[k] != g[k] && rng.IntN(2) == 0 {
					if v, ok := g[k]; ok {
						db[k] = v
					} else {
						delete(db, k)
					}
				}
			}
		}
		next := gen()
		ne := toEntries(next)
		plan, err := Merge(ne, &SliceIterator{Entries: toEntries(base)}, stopped)
		require.NoError(t, err)
		for _, id := range ids(ne, plan.Upserts) {
			db[id] = next[id]
		}
		for _, id := range plan.Deletes {
			delete(db, id)
		}
		require.Equal(t, next, db, "seed %d", seed)
	}
}

func union(a, b map[string]string) map[string]bool {
	out := map[string]bool{}
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

func TestHoldPolicy(t *testing.T) {
	t.Parallel()
	p := DefaultHoldPolicy
	names := []string{"brand", "price", "title"}
	renamed := []string{"Brand", "Price", "Title"}
	for _, tc := range []struct {
		in   HoldInput
		want string
		why  string
	}{
		{HoldInput{BaselineProducts: 1000, NewProducts: 0, Deletes: 1000}, HoldEmptySnapshot, "empty"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 400, Deletes: 600}, HoldMassDelete, "more than half deleted"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 500, Deletes: 500}, "", "exactly half is not more than half"},
		{HoldInput{BaselineProducts: 99, NewProducts: 1, Deletes: 98}, "", "small catalogs are not held"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 1000, Updates: 1000, BaselineNames: names, NewNames: renamed}, HoldMassUpdate, "renamed columns rewrite every row"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 1000, Updates: 1000, BaselineNames: names, NewNames: names}, "", "same names: a price change of every row is normal"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 1000, Updates: 500, BaselineNames: names, NewNames: renamed}, "", "exactly half updated"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 1000, Updates: 1000, NewNames: renamed}, "", "baseline names unknown"},
		{HoldInput{BaselineProducts: 99, NewProducts: 99, Updates: 99, BaselineNames: names, NewNames: renamed}, "", "small catalog"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 300, Deletes: 700, Updates: 300, BaselineNames: names, NewNames: renamed}, HoldMassDelete, "mass_delete first"},
		{HoldInput{BaselineProducts: 1000, NewProducts: 0, Deletes: 1000, BaselineNames: names}, HoldEmptySnapshot, "empty first"},
	} {
		code, msg := p.HoldReason(tc.in)
		require.Equal(t, tc.want, code, tc.why)
		if code == HoldMassUpdate {
			require.Contains(t, msg, "gone: brand, price, title; new: Brand, Price, Title")
		}
	}
	strict := HoldPolicy{DeleteFraction: 0.1, UpdateFraction: 0, MinProducts: 100}
	code, _ := strict.HoldReason(HoldInput{BaselineProducts: 1000, NewProducts: 850, Deletes: 150})
	require.Equal(t, HoldMassDelete, code, "a retailer's own threshold")
	code, _ = strict.HoldReason(HoldInput{BaselineProducts: 1000, NewProducts: 1000, Updates: 1, BaselineNames: names, NewNames: renamed})
	require.Equal(t, HoldMassUpdate, code)
}

func TestValidateRetailerID(t *testing.T) {
	t.Parallel()
	require.NoError(t, ValidateRetailerID("Acme_1-x"))
	for _, bad := range []string{"", "a b", "a/b", "é", string(make([]byte, 65))} {
		require.Error(t, ValidateRetailerID(bad), bad)
	}
}

// The index reader refuses an index whose ids do not strictly increase
// (the merge trusts it).
func TestIndexReaderRejectsDisorder(t *testing.T) {
	t.Parallel()
	entry := func(shared int, suffix string) []byte {
		b := []byte{byte(shared), byte(len(suffix))}
		return append(append(b, suffix...), make([]byte, 16)...)
	}
	for name, body := range map[string][]byte{
		"smaller": append(entry(0, "b"), entry(0, "a")...),
		"equal":   append(entry(0, "b"), entry(1, "")...),
		"shorter": append(entry(0, "ba"), entry(1, "")...),
	} {
		r := NewIndexReader(bytes.NewReader(append([]byte(IndexMagic), body...)))
		_, err := r.NextRef()
		require.NoError(t, err, name)
		_, err = r.NextRef()
		require.ErrorContains(t, err, "out of order", name)
	}
}

// Without stopped generations the merge takes its short way: the same plan
// as the general walk with a stopped generation equal to the baseline
// (which touched nothing).
func TestMergeShortWayMatches(t *testing.T) {
	t.Parallel()
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		gen := func() []IndexEntry {
			var kv []string
			for i := 0; i < 40; i++ {
				if rng.IntN(3) > 0 {
					kv = append(kv, fmt.Sprintf("p%02d", i), fmt.Sprint(rng.IntN(3)))
				}
			}
			return entries(kv...)
		}
		base, next := gen(), gen()
		short, err := Merge(next, &SliceIterator{Entries: base}, nil)
		require.NoError(t, err)
		long, err := Merge(next, &SliceIterator{Entries: base}, []IndexIterator{&SliceIterator{Entries: base}})
		require.NoError(t, err)
		require.Equal(t, long, short, "seed %d", seed)
	}
}
