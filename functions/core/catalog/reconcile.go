package catalog

import "time"

// ReconcileRun is one reconciliation: of one retailer, or of every one.
type ReconcileRun struct {
	ID          string
	RetailerID  string // "" for every retailer
	Repair      bool
	Scheduled   bool
	RequestedAt time.Time
	// Total is how many retailers the run checks; 0 while a run of every
	// retailer is still listing them.
	Total      int
	FinishedAt *time.Time // set when every retailer has a result
}

// ReconcileResult is what reconciling one retailer found (and repaired).
type ReconcileResult struct {
	RunID      string
	RetailerID string
	Generation int64 // the newest applied generation compared against (0: none)
	CheckedAt  time.Time
	Products   int64 // the products of that generation's snapshot
	Rows       int64 // the live rows of the catalog
	// Missing: in the snapshot, not in the catalog; Extra: in the catalog,
	// not in the snapshot; Different: in both, with other attributes.
	Missing, Extra, Different int64
	// Repaired rows were rewritten to the snapshot's value; Unrepaired
	// could not be (a newer generation owns the row, or the snapshot's
	// upload is gone).
	Repaired, Unrepaired int64
	Examples             []string // up to 10 divergent product ids, in order
	Skipped              string   // why it was not checked (a generation being applied), "" when checked
	Error                string   // why it failed, "" when it did not
}

// Divergent reports whether the catalog differed from its snapshot.
func (r ReconcileResult) Divergent() bool { return r.Missing+r.Extra+r.Different > 0 }

// RepairResult is what one fenced repair transaction did.
type RepairResult struct {
	Superseded bool     // a newer generation took over: nothing written
	Written    int64    // rows rewritten or tombstoned
	Fenced     []string // ids a newer generation owns, left alone
	Seq        int      // the repair's change event (seq after the generation's chunks)
}

// ReconcileReport is a run as far as it has got.
type ReconcileReport struct {
	Run ReconcileRun
	// Results: retailers with a result; Checked: of those, compared (not
	// skipped, not failed); Divergent: of those, differing.
	Results, Checked, Divergent int
	// Notable are the divergent, skipped and failed results, in retailer order (at most the limit asked).
	Notable []ReconcileResult
}
