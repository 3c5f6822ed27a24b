package upload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/serve/upload"
)

type planPage struct {
	Items []struct {
		ProductID string                                        `json:"product_id"`
		Op        string                                        `json:"op"`
		Fields    map[string]struct{ From, To json.RawMessage } `json:"fields"`
	} `json:"items"`
	NextAfter *string `json:"next_after"`
}

// previewWithPlan makes generation gen of r1 a previewed dry run whose
// plan is items, written as the diff writes it.
func previewWithPlan(t *testing.T, f *fixture, items []catalog.PlanEntry) int64 {
	t.Helper()
	ctx := context.Background()
	gen, err := f.Store.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = f.Store.MarkArrived(ctx, "r1", gen, time.Now(), time.Hour)
	require.NoError(t, err)
	d, err := f.Store.BeginDiff(ctx, "r1", gen, "etag")
	require.NoError(t, err)
	require.True(t, d.DryRun)
	pages, index, err := catalog.BuildPlanPages(items)
	require.NoError(t, err)
	for n, p := range pages {
		require.NoError(t, f.Blobs.Put(ctx, keys.PlanPage("r1", gen, n), p))
	}
	require.NoError(t, f.Blobs.Put(ctx, keys.PlanIndex("r1", gen), index))
	require.NoError(t, f.Store.Preview(ctx, "r1", gen, "", "", catalog.Counts{Inserted: int64(len(items))}, len(pages), 0))
	return gen
}

func inserts(n, valueBytes int) []catalog.PlanEntry {
	items := make([]catalog.PlanEntry, n)
	v, _ := json.Marshal(map[string]string{"title": strings.Repeat("x", valueBytes)})
	for i := range items {
		id := fmt.Sprintf("p-%05d", i)
		line, changed, err := catalog.PlanLine(nil, id, nil, v)
		if err != nil || !changed {
			panic(fmt.Sprint(changed, err))
		}
		items[len(items)-1-i] = catalog.PlanEntry{ProductID: id, Line: line}
	}
	return items
}

// The plan route pages by product_id across the plan's page objects:
// limit (default 100) items after `after`, next_after set while items
// remain and null on the last page; every item once, in order.
func TestPlanPagesByProductID(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	gen := previewWithPlan(t, f, inserts(2500, 10)) // three page objects
	var p planPage
	require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", gen), token, "", &p))
	require.Len(t, p.Items, 100)
	require.Equal(t, "p-00000", p.Items[0].ProductID)
	require.Equal(t, "insert", p.Items[0].Op)
	require.JSONEq(t, "null", string(p.Items[0].Fields["title"].From))
	var seen []string
	after := ""
	for {
		var p planPage
		require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=999&after=%s", gen, after), token, "", &p))
		for _, it := range p.Items {
			seen = append(seen, it.ProductID)
		}
		if p.NextAfter == nil {
			break
		}
		require.Len(t, p.Items, 999)
		after = *p.NextAfter
	}
	require.Len(t, seen, 2500)
	for i, id := range seen {
		require.Equal(t, fmt.Sprintf("p-%05d", i), id)
	}
	require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?after=p-02499", gen), token, "", &p))
	require.Empty(t, p.Items)
	require.Nil(t, p.NextAfter)
	require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=1000&after=p-01499", gen), token, "", &p))
	require.Len(t, p.Items, 1000)
	require.Nil(t, p.NextAfter, "exactly the last 1000: no next page")
}

// A page ends early, next_after set, before it would pass 5 MB of JSON
// (DESIGN 13), and holds at least one item.
func TestPlanPageEndsAtFiveMegabytes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	gen := previewWithPlan(t, f, inserts(12, 900_000))
	var ids []string
	after, pages := "", 0
	for {
		var p planPage
		require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=1000&after=%s", gen, after), token, "", &p))
		pages++
		require.NotEmpty(t, p.Items)
		require.LessOrEqual(t, len(p.Items), 5, "5 items of 900 kB are under 5 MB, 6 are not")
		for _, it := range p.Items {
			ids = append(ids, it.ProductID)
		}
		if p.NextAfter == nil {
			break
		}
		after = *p.NextAfter
	}
	require.Len(t, ids, 12)
	require.Equal(t, 3, pages)
}

// No plan: 409 plan_unavailable for a generation awaiting its upload and
// one whose plan objects are gone; 404, 400, 403 and 401 as on every route.
func TestPlanUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	ctx := context.Background()
	slot, err := f.Store.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	var e errorBody
	require.Equal(t, http.StatusConflict, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", slot), token, "", &e))
	require.Equal(t, "plan_unavailable", e.Error.Code)

	// A preview whose plan objects are gone (past their retention).
	gen, err := f.Store.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = f.Store.MarkArrived(ctx, "r1", gen, time.Now(), time.Hour)
	require.NoError(t, err)
	_, err = f.Store.BeginDiff(ctx, "r1", gen, "etag")
	require.NoError(t, err)
	require.NoError(t, f.Store.Preview(ctx, "r1", gen, "", "", catalog.Counts{}, 1, 0))
	require.Equal(t, http.StatusConflict, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", gen), token, "", &e))
	require.Equal(t, "plan_unavailable", e.Error.Code)
	require.Equal(t, http.StatusNotFound, f.Call("GET", "/v1/retailers/r1/snapshots/99/plan", token, "", &e))
	require.Equal(t, http.StatusBadRequest, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=0", gen), token, "", &e))
	require.Equal(t, "invalid_limit", e.Error.Code)
	require.Equal(t, http.StatusForbidden, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", gen), f.Onboard("r2"), "", &e))
	require.Equal(t, http.StatusUnauthorized, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", gen), "", "", &e))
}

// pathological is a plan of n inserts whose every value is a JSON string
// full of what escaping grows: quotes and backslashes (2 bytes each in the
// Lambda response's JSON string, for 1 in the value's text... 4 for 2),
// control characters (\u0001: 7 for 6), HTML characters (<, >, &: 1 byte
// in the canonical form, 6 once json.Marshal escapes them, 7 in the
// Lambda string) and U+2028; valueBytes of it per value, 3 values a product.
func pathological(t *testing.T, n, valueBytes int) []catalog.PlanEntry {
	t.Helper()
	unit := "\"\\\x01\x1f<>&\u2028\"\"\\\\"
	value := strings.Repeat(unit, valueBytes/len(unit)+1)[:valueBytes]
	value = strings.ToValidUTF8(value, "")
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	require.NoError(t, enc.Encode(map[string]string{"a": value, "b": value, "c\"<\\": value}))
	attrs, err := snapshot.Canonicalize([]byte(strings.TrimSpace(b.String())))
	require.NoError(t, err)
	items := make([]catalog.PlanEntry, n)
	for i := range items {
		id := fmt.Sprintf("p-%05d-\"\\<", i)
		line, changed, err := catalog.PlanLine(nil, id, nil, attrs)
		require.NoError(t, err)
		require.True(t, changed)
		items[i] = catalog.PlanEntry{ProductID: id, Line: line}
	}
	return items
}

// A page of the plan fits Lambda's response limit once escaped (DESIGN
// 13: "A plan page also stops early at 5 MB" counted as the Lambda
// response carries it, as the problems route counts its file): values
// full of quotes, backslashes, control and HTML characters and U+2028,
// which grow up to sevenfold on the way, make pages that end early, each
// under 6,000,000 bytes as the upload Lambda returns it to API Gateway
// (its limit is 6,291,556), every item once and in order. Plain values
// still fill a page up to the 5 MB of raw JSON.
func TestPlanPageFitsTheLambdaResponse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	items := pathological(t, 400, 20_000)
	raw := 0
	for _, it := range items {
		raw += len(it.Line)
	}
	require.Greater(t, raw, 2*upload.MaxPlanBytes, "more than two pages of raw JSON")
	gen := previewWithPlan(t, f, items)
	var ids []string
	after, pages, largest := "", 0, 0
	for {
		path := fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=1000&after=%s", gen, url.QueryEscape(after))
		size := lambdaResponseBytes(t, f, path, token)
		require.LessOrEqual(t, size, 6_000_000, "page %d as the Lambda returns it", pages)
		largest = max(largest, size)
		var p planPage
		require.Equal(t, http.StatusOK, f.Call("GET", path, token, "", &p))
		pages++
		require.NotEmpty(t, p.Items)
		for _, it := range p.Items {
			ids = append(ids, it.ProductID)
			require.Len(t, it.Fields, 3)
		}
		if p.NextAfter == nil {
			break
		}
		require.Equal(t, ids[len(ids)-1], *p.NextAfter)
		after = *p.NextAfter
	}
	want := make([]string, len(items))
	for i, it := range items {
		want[i] = it.ProductID
	}
	slices.Sort(want)
	require.Equal(t, want, ids)
	t.Logf("%d items, %d bytes of raw JSON, in %d pages; the largest Lambda response %d bytes", len(items), raw, pages, largest)
}

// Paging abuse of the plan route (DESIGN 13): limit 0, -1, over 1000, not
// a number or absurdly long is 400 invalid_limit with a short message;
// an after that is no product of the plan starts after it (between ids,
// before the first, past the last: an empty last page); one that no
// product_id can be (not UTF-8, a control character, over 256 bytes) is
// 400 invalid_product_id, as on the storefront's pages.
func TestPlanPagingAbuse(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	gen := previewWithPlan(t, f, inserts(30, 10))
	path := func(query string) string { return fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?%s", gen, query) }
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	for _, limit := range []string{"0", "-1", "1001", "99999999999999999999", "1e3", "%20", strings.Repeat("9", 5000)} {
		require.Equal(t, http.StatusBadRequest, f.Call("GET", path("limit="+limit), token, "", &e), limit)
		require.Equal(t, "invalid_limit", e.Error.Code)
		require.Less(t, len(e.Error.Message), 200, "the message quotes a long limit cut short")
	}
	var p planPage
	require.Equal(t, http.StatusOK, f.Call("GET", path("limit=1000"), token, "", &p))
	require.Len(t, p.Items, 30)
	require.Nil(t, p.NextAfter)
	for _, c := range []struct {
		after string
		first string // "" for an empty page
	}{
		{"p-00010x", "p-00011"}, // between two ids
		{"a", "p-00000"},        // before the first
		{"p-00029", ""},         // the last
		{"zzz", ""},             // past the last
	} {
		p = planPage{}
		require.Equal(t, http.StatusOK, f.Call("GET", path("limit=5&after="+url.QueryEscape(c.after)), token, "", &p), c.after)
		if c.first == "" {
			require.Nil(t, p.NextAfter)
			require.Empty(t, p.Items, c.after)
			continue
		}
		require.Equal(t, c.first, p.Items[0].ProductID, c.after)
	}
	require.Equal(t, http.StatusOK, f.Call("GET", path("limit=5&after=p-00010x"), token, "", &p))
	require.NotNil(t, p.NextAfter)
	require.Equal(t, "p-00015", *p.NextAfter)
	for _, after := range []string{"%FF", "p-%00", "%0A", strings.Repeat("x", 257)} {
		require.Equal(t, http.StatusBadRequest, f.Call("GET", path("after="+after), token, "", &e), after)
		require.Equal(t, "invalid_product_id", e.Error.Code, after)
	}
}

// A previewed or held generation past the plan's bounds keeps no plan
// (Preview with no pages): 409 plan_unavailable, whose message says why
// (the bound of its bytes) and what it would change.
func TestPlanPastItsBoundsIsUnavailable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	token := f.Onboard("r1")
	ctx := context.Background()
	gen, err := f.Store.ReserveDryRun(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = f.Store.MarkArrived(ctx, "r1", gen, time.Now(), time.Hour)
	require.NoError(t, err)
	_, err = f.Store.BeginDiff(ctx, "r1", gen, "etag")
	require.NoError(t, err)
	require.NoError(t, f.Store.Preview(ctx, "r1", gen, "", "", catalog.Counts{Inserted: 150_000, Updated: 7}, -1, 0))
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.Equal(t, http.StatusConflict, f.Call("GET", fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan", gen), token, "", &e))
	require.Equal(t, "plan_unavailable", e.Error.Code)
	require.Contains(t, e.Error.Message, "150007 products")
	require.Contains(t, e.Error.Message, fmt.Sprintf("at most %d MB", catalog.MaxKeptPlanBytes>>20))
}
