package catalog_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// A plan line lists only the attributes whose values differ, an absent
// attribute equal to null, nested values compared whole; an insert every
// attribute from null, a delete every attribute to null; an update that
// changes nothing is no line.
func TestPlanLineListsOnlyWhatDiffers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, from, to string
		want           string // "" : no line
	}{
		{"update", `{"a":"1","b":{"x":[1,"}"]},"c":null,"d":"q\"}"}`, `{"a":"2","b":{"x":[1,"}"]},"d":"q\"}","e":true}`,
			`{"product_id":"p/1 x","op":"update","fields":{"a":{"from":"1","to":"2"},"e":{"from":null,"to":true}}}`},
		{"nested change", `{"b":{"x":[1,2]}}`, `{"b":{"x":[1,3]}}`,
			`{"product_id":"p/1 x","op":"update","fields":{"b":{"from":{"x":[1,2]},"to":{"x":[1,3]}}}}`},
		{"insert", "", `{"a":"1","n":null}`, `{"product_id":"p/1 x","op":"insert","fields":{"a":{"from":null,"to":"1"}}}`},
		{"delete", `{"a":"1","b":2}`, "", `{"product_id":"p/1 x","op":"delete","fields":{"a":{"from":"1","to":null},"b":{"from":2,"to":null}}}`},
		{"same", `{"a":"1","n":null}`, `{"a":"1"}`, ""},
	} {
		var from, to []byte
		if c.from != "" {
			from = []byte(c.from)
		}
		if c.to != "" {
			to = []byte(c.to)
		}
		line, changed, err := catalog.PlanLine([]byte("keep"), "p/1 x", from, to)
		require.NoError(t, err, c.name)
		if c.want == "" {
			require.False(t, changed, c.name)
			require.Equal(t, "keep", string(line), c.name)
			continue
		}
		require.True(t, changed, c.name)
		require.Equal(t, "keep"+c.want, string(line), c.name)
		require.True(t, json.Valid(line[4:]), c.name)
	}
}

// Pages hold at most PlanPageItems items, sorted; the index finds the page
// of any id.
func TestPlanPagesAndIndex(t *testing.T) {
	t.Parallel()
	var entries []catalog.PlanEntry
	for i := 2500; i > 0; i-- {
		id := string(rune('a'+i%26)) + string(rune('0'+i%10)) + string(rune(i))
		line, _, err := catalog.PlanLine(nil, id, nil, []byte(`{"a":1}`))
		require.NoError(t, err)
		entries = append(entries, catalog.PlanEntry{ProductID: id, Line: line})
	}
	pages, index, err := catalog.BuildPlanPages(entries)
	require.NoError(t, err)
	require.Len(t, pages, 3)
	var doc catalog.PlanIndexDoc
	require.NoError(t, json.Unmarshal(index, &doc))
	require.Equal(t, 1000, doc.Pages[0].Items)
	require.Equal(t, 0, doc.FirstPlanPage(""))
	require.Equal(t, 1, doc.FirstPlanPage(doc.Pages[1].First))
	require.Equal(t, 2, doc.FirstPlanPage(doc.Pages[2].First+"z"))
}

// BenchmarkPlanLine is the plan line of a first load's insert and of an
// update of two of six attributes (go test -bench PlanLine).
func BenchmarkPlanLine(b *testing.B) {
	to := []byte(`{"availability":"in stock","brand":"Acme","description":"A fine item, number 12, with \"quotes\"","price":"17.12","title":"P product 12","z":null}`)
	from := []byte(`{"availability":"in stock","brand":"Globex","description":"A fine item, number 12, with \"quotes\"","price":"17.13","title":"P product 12"}`)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		dst, _, _ = catalog.PlanLine(dst[:0], "p-00012", nil, to)
		dst, _, _ = catalog.PlanLine(dst[:0], "p-00012", from, to)
	}
}

// A plan line's product_id is written as json.Marshal writes it, for
// every ASCII byte and the runes it escapes (U+2028, U+2029) or not.
func TestPlanLineProductIDAsJSON(t *testing.T) {
	ids := []string{"é", "\u2028x", "a\u2029", "𝄞", "\u00ff"}
	for c := 0x20; c < 0x80; c++ {
		ids = append(ids, string(rune(c)), "p"+string(rune(c))+"q")
	}
	for _, id := range ids {
		line, _, err := catalog.PlanLine(nil, id, nil, []byte(`{}`))
		require.NoError(t, err)
		want, err := json.Marshal(id)
		require.NoError(t, err)
		require.Equal(t, `{"product_id":`+string(want)+`,"op":"insert","fields":{}}`, string(line), "%q", id)
	}
}
