package diff_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// applied uploads data and applies it: the next upload's baseline.
func (f *fixture) applied(data []byte) int64 {
	f.t.Helper()
	g := f.upload(data)
	f.diff(g)
	f.applyAll(f.take())
	require.Equal(f.t, catalog.StateApplied, f.status(g).State)
	return g
}

// colorCSV is n products with a price and a color, the first blank of them
// with an empty color.
func colorCSV(n, blank int) []byte {
	var b strings.Builder
	b.WriteString("product_id,price,color\n")
	for i := range n {
		color := "red"
		if i < blank {
			color = ""
		}
		fmt.Fprintf(&b, "p%03d,1,%s\n", i, color)
	}
	return []byte(b.String())
}

func priceCSV(n int) []byte {
	var b strings.Builder
	b.WriteString("product_id,price\n")
	for i := range n {
		fmt.Fprintf(&b, "p%03d,1\n", i)
	}
	return []byte(b.String())
}

// DESIGN 13: an upload that removes an attribute every product of a
// baseline of at least 100 had is held attribute_dropped, naming it; before
// mass_update (its names changed and it updates every product too).
func TestAttributeDroppedRemovedColumn(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	f.applied(colorCSV(200, 0))
	g := f.upload(priceCSV(200))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldAttributeDropped, st.ErrorCode)
	require.Contains(t, st.ErrorMessage, `attribute "color"`)
	require.Empty(t, f.take(), "nothing sent")

	// Confirmed, it applies.
	require.NoError(t, f.store.Confirm(context.Background(), "r1", g))
	f.diff(g)
	f.applyAll(f.take())
	require.Equal(t, catalog.StateApplied, f.status(g).State)
}

// The same for a JSON Lines key omitted from every product.
func TestAttributeDroppedRemovedKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	var base, next strings.Builder
	for i := range 150 {
		fmt.Fprintf(&base, `{"product_id":"p%03d","price":1,"gtin":"%d"}`+"\n", i, i)
		fmt.Fprintf(&next, `{"product_id":"p%03d","price":1}`+"\n", i)
	}
	f.applied([]byte(base.String()))
	g := f.upload([]byte(next.String()))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldAttributeDropped, st.ErrorCode)
	require.Contains(t, st.ErrorMessage, `"gtin"`)
}

// Blanked ("" in CSV) in more than hold_drop_pct of the products that had a
// value: held; at or under it: applied; the threshold is the retailer's.
func TestAttributeDroppedBlanked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t, 1000)
	f.applied(colorCSV(200, 0))
	g := f.upload(colorCSV(200, 120)) // 60% blanked
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldAttributeDropped, st.ErrorCode)
	require.Contains(t, st.ErrorMessage, `blanks attribute "color"`)
	require.Contains(t, st.ErrorMessage, "120 of the 200")

	g = f.upload(colorCSV(200, 80)) // 40%: under the default 50
	f.diff(g)
	f.applyAll(f.take())
	require.Equal(t, catalog.StateApplied, f.status(g).State)

	// 40 more of the 120 still valued (33%), with hold_drop_pct 30: held.
	p := catalog.DefaultHoldPolicy
	p.DropFraction = 0.3
	require.NoError(t, f.store.SetHoldPolicy(ctx, "r1", p))
	g = f.upload(colorCSV(200, 120))
	f.diff(g)
	st = f.status(g)
	require.Equal(t, catalog.StateHeld, st.State, st.ErrorMessage)
	require.Contains(t, st.ErrorMessage, "40 of the 120")
}

// Under 100 products no attribute_dropped; a deleting upload is
// mass_delete first.
func TestAttributeDroppedThresholdsAndOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	f.applied(colorCSV(99, 0))
	g := f.upload(priceCSV(99))
	f.diff(g)
	require.NotEqual(t, catalog.StateHeld, f.status(g).State, f.status(g).ErrorMessage)
	f.applyAll(f.take())
	require.Equal(t, catalog.StateApplied, f.status(g).State)

	f2 := newFixture(t, 1000)
	f2.applied(colorCSV(200, 0))
	g = f2.upload(priceCSV(50)) // deletes 150 and drops color
	f2.diff(g)
	st := f2.status(g)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, catalog.HoldMassDelete, st.ErrorCode)
}

// A baseline applied before the counts were kept never holds
// attribute_dropped.
func TestAttributeDroppedNeedsBaselineCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	base := f.applied(colorCSV(200, 0))
	require.NoError(t, f.store.SetAttributeCounts(context.Background(), "r1", base, nil))
	g := f.upload(colorCSV(200, 200))
	f.diff(g)
	require.NotEqual(t, catalog.StateHeld, f.status(g).State, f.status(g).ErrorMessage)
}
