package read

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/catalog"
)

func productJSON(p catalog.Product) Product {
	return Product{RetailerID: p.RetailerID, ProductID: p.ProductID, Attributes: p.Attributes,
		Generation: p.Generation, UpdatedAt: p.UpdatedAt.UTC()}
}

// The hand-written encoding says the same as encoding/json, for awkward
// product ids (quotes, backslashes, control characters, non-ASCII, slashes)
// and attributes as PostgreSQL prints jsonb.
func TestEncodingMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 891000, time.FixedZone("x", 3600))
	var rows []catalog.Product
	for i, id := range []string{"plain", `q"uote`, `back\slash`, "tab\tnew\nline\rcr", "ctl\x01\x1f", "é/ü 名前", "</script>&", "\u2028"} {
		rows = append(rows, catalog.Product{RetailerID: "r-1_x", ProductID: id,
			Attributes: []byte(`{"a": "x \"y\"", "n": [1, 2.5, null], "o": {"k": true}}`),
			Generation: int64(i + 1), UpdatedAt: at})
	}
	for _, p := range rows {
		want, err := json.Marshal(productJSON(p))
		require.NoError(t, err)
		got := appendProduct(nil, p)
		require.True(t, json.Valid(got), "%s", got)
		require.JSONEq(t, string(want), string(got))
	}
	for _, limit := range []int{1, 3, len(rows), len(rows) + 1} {
		page := Page{Items: []Product{}}
		for i, p := range rows {
			if i == limit {
				next := rows[limit-1].ProductID
				page.NextAfter = &next
				break
			}
			page.Items = append(page.Items, productJSON(p))
		}
		want, err := json.Marshal(page)
		require.NoError(t, err)
		require.JSONEq(t, string(want), string(appendPage(nil, rows, limit)), "limit %d", limit)
	}
	require.JSONEq(t, `{"items": [], "next_after": null}`, string(appendPage(nil, nil, 10)))
}
