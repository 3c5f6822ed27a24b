package ops

import (
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

type reconcileRequest struct {
	RetailerID string `json:"retailer_id"`
	Repair     bool   `json:"repair"`
}

type reconcileStarted struct {
	RunID string `json:"run_id"`
}

// adminRequest authenticates an operator's request and decodes its JSON
// body (at most maxBytes) into req; *retailerID, a field of req, is
// validated when given.
func (h *Handler) adminRequest(r *http.Request, maxBytes int64, req any, retailerID *string) error {
	if err := h.authAdmin(r); err != nil {
		return err
	}
	if err := httpapi.DecodeJSON(r, maxBytes, req); err != nil {
		return err
	}
	if *retailerID != "" {
		return catalog.ValidateRetailerID(*retailerID)
	}
	return nil
}

// POST /v1/admin/reconcile {"retailer_id"?, "repair": false} -> 202 {"run_id"}.
func (h *Handler) startReconcile(w http.ResponseWriter, r *http.Request) {
	var req reconcileRequest
	if err := h.adminRequest(r, 1<<16, &req, &req.RetailerID); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	runID, err := h.StartReconcile(r.Context(), req.RetailerID, req.Repair, false)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusAccepted, reconcileStarted{RunID: runID})
}

// ReconcileDivergence is one retailer's divergence in a report.
type ReconcileDivergence struct {
	RetailerID string   `json:"retailer_id"`
	Generation int64    `json:"generation"`
	Missing    int64    `json:"missing"`
	Extra      int64    `json:"extra"`
	Different  int64    `json:"different"`
	Repaired   int64    `json:"repaired"`
	Unrepaired int64    `json:"unrepaired"`
	Examples   []string `json:"examples"`
}

// ReconcileSkip is a retailer a run could not check, and why.
type ReconcileSkip struct {
	RetailerID string `json:"retailer_id"`
	Reason     string `json:"reason"`
	// Failed: the check failed after its retries (Reason says how); not
	// failed: skipped on purpose (a generation being applied).
	Failed bool `json:"failed"`
}

// ReconcileRunReport is the answer of GET /v1/admin/reconcile/{run_id}.
type ReconcileRunReport struct {
	RunID            string                `json:"run_id"`
	State            string                `json:"state"` // running or done
	RetailerID       *string               `json:"retailer_id"`
	Repair           bool                  `json:"repair"`
	RequestedAt      time.Time             `json:"requested_at"`
	FinishedAt       *time.Time            `json:"finished_at"`
	RetailersTotal   *int                  `json:"retailers_total"` // null while a run of every retailer lists them
	RetailersChecked int                   `json:"retailers_checked"`
	Divergent        []ReconcileDivergence `json:"divergent"`
	Skipped          []ReconcileSkip       `json:"skipped"`
}

// GET /v1/admin/reconcile/{run_id}.
func (h *Handler) reconcileReport(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	runID := r.PathValue("run_id")
	if !validRunID(runID) {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_run_id", "run id %q is not one (rc- and 16 hex digits)", runID))
		return
	}
	rep, err := h.store.ReconcileReport(r.Context(), runID, reportLimit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, reportJSON(rep))
}

func reportJSON(rep catalog.ReconcileReport) ReconcileRunReport {
	out := ReconcileRunReport{RunID: rep.Run.ID, State: "running", Repair: rep.Run.Repair,
		RequestedAt: rep.Run.RequestedAt.UTC(), RetailersChecked: rep.Checked,
		Divergent: []ReconcileDivergence{}, Skipped: []ReconcileSkip{}}
	if rep.Run.FinishedAt != nil {
		out.State = "done"
		at := rep.Run.FinishedAt.UTC()
		out.FinishedAt = &at
	}
	if rep.Run.RetailerID != "" {
		id := rep.Run.RetailerID
		out.RetailerID = &id
	}
	if rep.Run.Total > 0 || out.State == "done" {
		total := rep.Run.Total
		out.RetailersTotal = &total
	}
	for _, res := range rep.Notable {
		switch {
		case res.Skipped != "":
			out.Skipped = append(out.Skipped, ReconcileSkip{RetailerID: res.RetailerID, Reason: res.Skipped})
		case res.Error != "":
			out.Skipped = append(out.Skipped, ReconcileSkip{RetailerID: res.RetailerID, Reason: "failed: " + res.Error, Failed: true})
		}
		if res.Divergent() {
			examples := res.Examples
			if examples == nil {
				examples = []string{}
			}
			out.Divergent = append(out.Divergent, ReconcileDivergence{RetailerID: res.RetailerID, Generation: res.Generation,
				Missing: res.Missing, Extra: res.Extra, Different: res.Different, Repaired: res.Repaired,
				Unrepaired: res.Unrepaired, Examples: examples})
		}
	}
	return out
}
