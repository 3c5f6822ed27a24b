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
