package catalog

import (
	"fmt"
	"slices"
)

// HoldAttributeDropped is the hold of an upload that removes or blanks an
// attribute the catalog had (DESIGN 13, "Attribute drift is held").
const HoldAttributeDropped = "attribute_dropped"

// DefaultDropFraction is the default HoldPolicy.DropFraction (hold_drop_pct 50).
const DefaultDropFraction = 0.5

// AttributeCount is what a snapshot holds of one attribute: how many of its
// products have it (Present: a CSV column is present in every product, a
// JSON key only where it is given) and how many of those have a value
// other than "" or null (Valued).
type AttributeCount struct {
	Present int64 `json:"present"`
	Valued  int64 `json:"valued"`
}

// AttributeCounts are a snapshot's AttributeCount by attribute name. nil is
// unknown (a baseline applied before the counts were kept): it never holds.
type AttributeCounts map[string]AttributeCount

// DropInput is what the attribute_dropped rule looks at.
//
// For a full snapshot: Products is the baseline's product count, Baseline
// and Upload the per-attribute counts of the baseline and of the upload,
// and, per attribute, Had the products in both that had a value in the
// baseline and Blanked those of them whose value in the upload is "" or
// null (deleted products are not counted). Had and Blanked may be left nil
// when BlankCandidates proves that no attribute can pass the threshold.
//
// For a delta ("a delta is checked only on the products it names"):
// Products is how many products it names, Baseline and Upload nil (a delta
// removes nothing by omission), Had[a] the named products that had a value
// of a and Blanked[a] those of them the delta sets to "" or null.
type DropInput struct {
	Products         int64
	Baseline, Upload AttributeCounts
	Had, Blanked     map[string]int64
}

// AttributeDropped returns the attribute_dropped hold and its message
// (naming the attribute), or "" when in passes: with at least MinProducts
// products, an attribute present in every product of the baseline and in no
// product of the upload (removed), or blanked in more than DropFraction of
// the Had products (a removed attribute first, then the first blanked one
// by name). A nil Baseline never holds for removal.
func (p HoldPolicy) AttributeDropped(in DropInput) (code, message string) {
	if in.Products < p.MinProducts {
		return "", ""
	}
	if in.Baseline != nil {
		for _, name := range sortedNames(in.Baseline) {
			if in.Baseline[name].Present == in.Products && in.Upload[name].Present == 0 {
				return HoldAttributeDropped, fmt.Sprintf("the snapshot drops attribute %s, which every one of the %d products had; confirm to apply it",
					quoteName(name), in.Products)
			}
		}
	}
	for _, name := range sortedNames(in.Had) {
		had, blanked := in.Had[name], in.Blanked[name]
		if had > 0 && float64(blanked) > p.dropFraction()*float64(had) {
			return HoldAttributeDropped, fmt.Sprintf(`the snapshot blanks attribute %s ("" or null) in %d of the %d products that had a value (over %s%%); confirm to apply it`,
				quoteName(name), blanked, had, percent(p.dropFraction()))
		}
	}
	return "", ""
}

// BlankCandidates returns the attributes whose blank rule the counts alone
// cannot clear, sorted: at most updates products can be blanked (unchanged
// ones keep their values), and at most those of the upload that hold "" or
// null; at least the baseline's valued products less the deleted ones had a
// value. An attribute where even the most blanks over the fewest that had
// a value stay within DropFraction cannot hold, and needs no per-product
// comparison. nil when none can (the ordinary daily upload, updating a few
// percent of the catalog) or the rule does not apply (fewer than
// MinProducts, counts unknown).
func (p HoldPolicy) BlankCandidates(products int64, baseline, upload AttributeCounts, updates, deletes int64) []string {
	if products < p.MinProducts || baseline == nil || upload == nil {
		return nil
	}
	var out []string
	for _, name := range sortedNames(upload) {
		u := upload[name]
		if baseline[name].Valued == 0 {
			continue // no product had a value to lose
		}
		most := min(updates, u.Present-u.Valued)
		fewest := max(0, baseline[name].Valued-deletes)
		if most > 0 && float64(most) > p.dropFraction()*float64(fewest) {
			out = append(out, name)
		}
	}
	return out
}

func (p HoldPolicy) dropFraction() float64 { return p.DropFraction }

func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// quoteName quotes an attribute name for a message, cut to 200 bytes.
func quoteName(name string) string {
	if len(name) > 200 {
		cut := 200
		for cut > 0 && name[cut]&0xC0 == 0x80 {
			cut--
		}
		name = name[:cut] + "…"
	}
	return fmt.Sprintf("%q", name)
}
