package read

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
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
		got, n := appendPage(nil, rows, limit, MaxPageBytes)
		require.JSONEq(t, string(want), string(got), "limit %d", limit)
		require.Equal(t, len(page.Items), n)
	}
	got, n := appendPage(nil, nil, 10, MaxPageBytes)
	require.JSONEq(t, `{"items": [], "next_after": null}`, string(got))
	require.Zero(t, n)
}

// A page ends early, next_after set, rather than pass MaxPageBytes of JSON
// (Lambda's response limit is 6 MB): 1,000 products of 200 KB would make
// 200 MB. Its first product is always there, so paging goes on.
func TestPageEndsEarlyAtMaxBytes(t *testing.T) {
	t.Parallel()
	big := []byte(`{"d": "` + strings.Repeat("x", 200_000) + `"}`)
	var rows []catalog.Product
	for i := range 40 { // what a read stopped after MaxPageBytes of attributes returns
		rows = append(rows, catalog.Product{RetailerID: "r", ProductID: fmt.Sprintf("p%04d", i), Attributes: big, Generation: int64(i + 1)})
	}
	body, n := appendPage(nil, rows[:26], 1000, MaxPageBytes)
	require.Less(t, len(body)+1, MaxPageBytes)
	require.Equal(t, 24, n, "as many as fit")
	var page Page
	require.NoError(t, json.Unmarshal(body, &page))
	require.Len(t, page.Items, n)
	require.Equal(t, "p0023", *page.NextAfter)

	// One product larger than the page: alone on its page, and next_after
	// set even when the read returned nothing after it (it stopped on
	// bytes: there may be more).
	huge := []byte(`{"d": "` + strings.Repeat("x", MaxPageBytes) + `"}`)
	for _, rows := range [][]catalog.Product{
		{{ProductID: "a", Attributes: huge}, {ProductID: "b", Attributes: []byte(`{}`)}},
		{{ProductID: "a", Attributes: huge}},
	} {
		body, n = appendPage(nil, rows, 1000, MaxPageBytes)
		require.Equal(t, 1, n)
		require.NoError(t, json.Unmarshal(body, &page))
		require.Equal(t, "a", *page.NextAfter)
	}
}

// A page fits Lambda's response once escaped into it (a JSON string: each
// quote and backslash takes two bytes there): products whose attributes
// are full of quotes, backslashes and U+2028 (PostgreSQL prints it raw, the
// Lambda runtime escapes it), under MaxPageBytes of JSON but twice that
// escaped, make a page that ends early, next_after set, within
// httpapi.MaxLambdaBodyBytes; pages of plain attributes are cut at
// MaxPageBytes as before. A batch-get answer that would pass it is refused
// (batchTooLarge) as one over MaxBatchAnswerBytes is.
func TestPageFitsTheLambdaResponse(t *testing.T) {
	t.Parallel()
	nasty := []byte(`{"d": "` + strings.Repeat(`\"\\`+"\u2028", 25_000) + `"}`) // 225 kB, ~450 kB escaped
	var rows []catalog.Product
	for i := range 22 { // under 5 MB of attributes: all read
		rows = append(rows, catalog.Product{RetailerID: "r", ProductID: fmt.Sprintf("p%04d", i), Attributes: nasty, Generation: 1})
	}
	body, n := appendPage(nil, rows, 1000, MaxPageBytes)
	require.Less(t, len(body), MaxPageBytes)
	require.LessOrEqual(t, httpapi.LambdaStringBytes(append(body, '\n')), httpapi.MaxLambdaBodyBytes)
	require.Less(t, n, len(rows), "ends early")
	require.Greater(t, n, 5)
	var page Page
	require.NoError(t, json.Unmarshal(body, &page))
	require.Len(t, page.Items, n)
	require.Equal(t, rows[n-1].ProductID, *page.NextAfter)
	_, rest := appendPage(nil, rows[n:], 1000, MaxPageBytes)
	require.Equal(t, len(rows)-n, rest, "the rest on the next page")

	batch := append(appendBatch(nil, []string{"p"}, rows), '\n')
	require.Less(t, len(batch), MaxBatchAnswerBytes)
	require.True(t, batchTooLarge(batch), "fits 5 MB, not Lambda's 6 MB once escaped")
	require.False(t, batchTooLarge(append(appendBatch(nil, []string{"p"}, rows[:5]), '\n')))
}
