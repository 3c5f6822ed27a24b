package catalog_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

func TestAttributeDropped(t *testing.T) {
	t.Parallel()
	p := catalog.DefaultHoldPolicy
	base := catalog.AttributeCounts{"price": {Present: 200, Valued: 200}, "color": {Present: 150, Valued: 100}}
	// Removed: present in every product of the baseline, in none of the upload.
	code, msg := p.AttributeDropped(catalog.DropInput{Products: 200, Baseline: base,
		Upload: catalog.AttributeCounts{"color": {Present: 200, Valued: 200}}})
	require.Equal(t, catalog.HoldAttributeDropped, code)
	require.Contains(t, msg, `"price"`)
	// color was not in every product: its removal alone does not hold.
	code, _ = p.AttributeDropped(catalog.DropInput{Products: 200, Baseline: base,
		Upload: catalog.AttributeCounts{"price": {Present: 200, Valued: 200}}})
	require.Empty(t, code)
	// A baseline under 100 products, or of unknown counts, never holds.
	code, _ = p.AttributeDropped(catalog.DropInput{Products: 99, Baseline: catalog.AttributeCounts{"price": {Present: 99, Valued: 99}},
		Upload: catalog.AttributeCounts{}})
	require.Empty(t, code)
	code, _ = p.AttributeDropped(catalog.DropInput{Products: 200, Upload: catalog.AttributeCounts{}})
	require.Empty(t, code)
	// Blanked: over DropFraction of those that had a value.
	code, msg = p.AttributeDropped(catalog.DropInput{Products: 200, Had: map[string]int64{"color": 100}, Blanked: map[string]int64{"color": 51}})
	require.Equal(t, catalog.HoldAttributeDropped, code)
	require.Contains(t, msg, `"color"`)
	require.Contains(t, msg, "51 of the 100")
	code, _ = p.AttributeDropped(catalog.DropInput{Products: 200, Had: map[string]int64{"color": 100}, Blanked: map[string]int64{"color": 50}})
	require.Empty(t, code, "exactly the threshold passes")
	p.DropFraction = 0
	code, _ = p.AttributeDropped(catalog.DropInput{Products: 200, Had: map[string]int64{"color": 100}, Blanked: map[string]int64{"color": 1}})
	require.Equal(t, catalog.HoldAttributeDropped, code, "0 holds any blank")
	p.DropFraction = 1
	code, _ = p.AttributeDropped(catalog.DropInput{Products: 200, Had: map[string]int64{"color": 100}, Blanked: map[string]int64{"color": 100}})
	require.Empty(t, code, "100 never holds for blanks")
}

// The counts alone clear the blank rule for the ordinary upload: few
// updates cannot blank over half of an attribute's values.
func TestBlankCandidates(t *testing.T) {
	t.Parallel()
	p := catalog.DefaultHoldPolicy
	base := catalog.AttributeCounts{"price": {Present: 1000, Valued: 1000}, "color": {Present: 1000, Valued: 400}}
	up := catalog.AttributeCounts{"price": {Present: 1000, Valued: 400}, "color": {Present: 1000, Valued: 400}, "new": {Present: 1000, Valued: 0}}
	require.Nil(t, p.BlankCandidates(1000, base, up, 30, 0), "30 updates")
	require.Equal(t, []string{"color", "price"}, p.BlankCandidates(1000, base, up, 600, 0))
	require.Equal(t, []string{"price"}, p.BlankCandidates(1000, base, catalog.AttributeCounts{"price": {Present: 1000}}, 600, 0))
	require.Nil(t, p.BlankCandidates(99, base, up, 600, 0), "under MinProducts")
	require.Nil(t, p.BlankCandidates(1000, nil, up, 600, 0), "unknown baseline counts")
}

// attribute_dropped comes after empty_snapshot and mass_delete, before
// mass_update.
func TestHoldOrderWithAttributeDropped(t *testing.T) {
	t.Parallel()
	p := catalog.DefaultHoldPolicy
	require.Equal(t, []string{"empty_snapshot", "mass_delete", "attribute_dropped", "mass_update"}, catalog.HoldCodes)
	drop := catalog.DropInput{Products: 200, Baseline: catalog.AttributeCounts{"price": {Present: 200, Valued: 200}}, Upload: catalog.AttributeCounts{}}
	in := catalog.HoldInput{BaselineProducts: 200, NewProducts: 200, Deletes: 150, Updates: 200,
		BaselineNames: []string{"price"}, NewNames: []string{}, Drop: drop}
	code, _ := p.HoldReason(in)
	require.Equal(t, catalog.HoldMassDelete, code)
	in.Deletes = 0
	code, _ = p.HoldReason(in)
	require.Equal(t, catalog.HoldAttributeDropped, code)
	in.Drop = catalog.DropInput{}
	code, _ = p.HoldReason(in)
	require.Equal(t, catalog.HoldMassUpdate, code)
}
