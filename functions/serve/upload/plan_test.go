package upload_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
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
