package catalog

import "fmt"

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
)

// States lists every state, in the order of a generation's life.
var States = []State{StateAwaitingUpload, StateReceived, StateDiffing, StateApplying,
	StateApplied, StateSuperseded, StateRejected, StateHeld, StateExpired}

// Terminal reports whether nothing more happens to a generation in this state
// (held waits for a confirmation, so it is not terminal).
func (s State) Terminal() bool {
	return s == StateApplied || s == StateSuperseded || s == StateRejected || s == StateExpired
}

// HoldPolicy says when a snapshot is held for confirmation instead of applied (I8).
type HoldPolicy struct {
	DeleteFraction float64 // hold when deletes > DeleteFraction * baseline products
	MinProducts    int64   // ... and the baseline has at least this many products
}

// DefaultHoldPolicy holds deletes of more than half a catalog of at least 100 products.
var DefaultHoldPolicy = HoldPolicy{DeleteFraction: 0.5, MinProducts: 100}

// HoldReason returns why a snapshot of newProducts rows that deletes deletes
// of baselineProducts must be held, or "" when it may be applied.
func (p HoldPolicy) HoldReason(baselineProducts, newProducts, deletes int64) (code, message string) {
	if newProducts == 0 {
		return "empty_snapshot", "the snapshot has no products; confirm to delete the whole catalog"
	}
	if baselineProducts >= p.MinProducts && float64(deletes) > p.DeleteFraction*float64(baselineProducts) {
		return "mass_delete", fmt.Sprintf("the snapshot deletes %d of %d products (over %.0f%%); confirm to apply it",
			deletes, baselineProducts, p.DeleteFraction*100)
	}
	return "", ""
}
