package catalog

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// State is where a generation is in its life.
type State string

// Generation states, as the status route reports them.
const (
	StateAwaitingUpload State = "awaiting_upload"
	StateReceived       State = "received"
	StateDiffing        State = "diffing"
	StateApplying       State = "applying"
	StateApplied        State = "applied"
	StateSuperseded     State = "superseded"
	StateRejected       State = "rejected"
	StateHeld           State = "held"
	// StateExpired is a slot whose upload never arrived before its expiry
	// (or arrived too late to be taken, see the arrival function).
	StateExpired State = "expired"
	// StatePreviewed is a dry run read whole: its changes were counted
	// and its plan written, and nothing of it was applied (DESIGN 13).
	StatePreviewed State = "previewed"
)

// States lists every state, in the order of a generation's life.
var States = []State{StateAwaitingUpload, StateReceived, StateDiffing, StateApplying,
	StateApplied, StateSuperseded, StateRejected, StateHeld, StateExpired, StatePreviewed}

// Terminal reports whether nothing more happens to a generation in this state
// (held waits for a confirmation, so it is not terminal).
func (s State) Terminal() bool {
	return s == StateApplied || s == StateSuperseded || s == StateRejected || s == StateExpired || s == StatePreviewed
}

// HoldPolicy says when a snapshot is held for confirmation instead of
// applied (I8). Fractions are of the baseline's product count; the
// retailer sets them in percent (PUT .../settings).
type HoldPolicy struct {
	DeleteFraction float64 // hold when deletes > DeleteFraction * baseline products
	// UpdateFraction: hold when the set of attribute names differs from the
	// baseline's and updates > UpdateFraction * baseline products.
	UpdateFraction float64
	// DropFraction: hold when an attribute is blanked in more than
	// DropFraction of the products that had a value (attribute_dropped,
	// AttributeDropped).
	DropFraction float64
	MinProducts  int64 // ... and the baseline has at least this many products
}

// DefaultHoldPolicy holds deletes, or a rewrite under other attribute names,
// of more than half a catalog of at least 100 products.
var DefaultHoldPolicy = HoldPolicy{DeleteFraction: 0.5, UpdateFraction: 0.5, DropFraction: DefaultDropFraction, MinProducts: 100}

// HoldInput is what the hold rules look at: the baseline (the applied
// catalog) and what the new snapshot would change.
type HoldInput struct {
	BaselineProducts, NewProducts, Deletes, Updates int64
	// BaselineNames and NewNames are the attribute names (union over every
	// product) of the baseline and of the new snapshot; a nil BaselineNames
	// is unknown (a baseline from before names were kept) and never holds.
	BaselineNames, NewNames []string
	// Drop is the input of the attribute_dropped rule (AttributeDropped);
	// its zero value never holds.
	Drop DropInput
}

// Hold codes, first match wins when several apply.
const (
	HoldEmptySnapshot = "empty_snapshot"
	HoldMassDelete    = "mass_delete"
	HoldMassUpdate    = "mass_update"
)

// HoldCodes lists every hold code, first match first.
var HoldCodes = []string{HoldEmptySnapshot, HoldMassDelete, HoldAttributeDropped, HoldMassUpdate}

// HoldReason returns why a snapshot must be held, or "" when it may be
// applied: empty_snapshot, then mass_delete, then attribute_dropped, then
// mass_update.
func (p HoldPolicy) HoldReason(in HoldInput) (code, message string) {
	if in.NewProducts == 0 {
		return HoldEmptySnapshot, "the snapshot has no products; confirm to delete the whole catalog"
	}
	if in.BaselineProducts < p.MinProducts {
		return "", ""
	}
	base := float64(in.BaselineProducts)
	if float64(in.Deletes) > p.DeleteFraction*base {
		return HoldMassDelete, fmt.Sprintf("the snapshot deletes %d of %d products (over %s%%); confirm to apply it",
			in.Deletes, in.BaselineProducts, percent(p.DeleteFraction))
	}
	if code, msg := p.AttributeDropped(in.Drop); code != "" {
		return code, msg
	}
	if in.BaselineNames != nil && !slices.Equal(in.BaselineNames, in.NewNames) && float64(in.Updates) > p.UpdateFraction*base {
		return HoldMassUpdate, fmt.Sprintf("the snapshot's attribute names changed (%s) and it updates %d of %d products (over %s%%); confirm to apply it",
			namesChange(in.BaselineNames, in.NewNames), in.Updates, in.BaselineProducts, percent(p.UpdateFraction))
	}
	return "", ""
}

func percent(f float64) string { return strconv.FormatFloat(f*100, 'f', -1, 64) }

// namesChange describes how the attribute names changed, briefly.
func namesChange(before, after []string) string {
	var gone, added []string
	for _, n := range before {
		if _, ok := slices.BinarySearch(after, n); !ok {
			gone = append(gone, n)
		}
	}
	for _, n := range after {
		if _, ok := slices.BinarySearch(before, n); !ok {
			added = append(added, n)
		}
	}
	list := func(names []string) string {
		if len(names) > 5 {
			return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
		}
		return strings.Join(names, ", ")
	}
	var parts []string
	if len(gone) > 0 {
		parts = append(parts, "gone: "+list(gone))
	}
	if len(added) > 0 {
		parts = append(parts, "new: "+list(added))
	}
	return strings.Join(parts, "; ")
}
