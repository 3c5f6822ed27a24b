package upload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// PlanReader reads the plan objects the diff wrote (keys.PlanIndex,
// keys.PlanPage). s3blob.Store and inmem.Blobs implement it.
type PlanReader interface {
	// Open streams an object; blob.ErrNotFound when it does not exist.
	Open(ctx context.Context, key, ifMatch string) (blob.Object, error)
}

// MaxPlanBytes is the most JSON a page of the plan route holds (DESIGN
// 13): a page of large items ends early, with next_after set, rather than
// pass Lambda's 6 MB response limit. A page holds at least one item.
const MaxPlanBytes = 5_000_000

// DefaultPlanLimit is how many items a page of the plan holds unless asked.
const DefaultPlanLimit = 100

type planResponse struct {
	Items     []json.RawMessage `json:"items"`
	NextAfter *string           `json:"next_after"`
}

// planUnavailable is the answer for a generation that has no plan to give.
func planUnavailable(gen int64, why string) error {
	return catalog.Errorf(catalog.ErrConflict, "plan_unavailable", "generation %d has no plan: %s", gen, why)
}

// plan answers GET .../snapshots/{g}/plan?after=&limit=: what a previewed
// or held generation would change, or an applied one changed, field by
// field, in product_id order (DESIGN 13). It reads the plan's page index
// and the one or two pages the answer comes from, whatever the plan's size.
func (h *Handler) plan(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	gen, err := parseGeneration(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	query := r.URL.Query()
	limit, err := parseLimit(query.Get("limit"), DefaultPlanLimit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	st, err := h.store.Generation(r.Context(), retailer.ID, gen)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	switch {
	case st.State != catalog.StatePreviewed && st.State != catalog.StateHeld && st.State != catalog.StateApplied:
		err = planUnavailable(gen, fmt.Sprintf("it is %s (a plan is kept for previewed, held and applied generations)", st.State))
	case st.PlanPages == nil || h.Plans == nil:
		err = planUnavailable(gen, fmt.Sprintf("none was kept for it (an applied generation keeps one when it changes at most %d products "+
			"and its diff was not interrupted; a confirmed hold keeps its own unless it applied against another baseline)", catalog.MaxAppliedPlanOps))
	}
	var out planResponse
	if err == nil {
		out, err = h.readPlan(r.Context(), retailer.ID, gen, query.Get("after"), limit)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// readPlan reads the page of at most limit items after product id after
// (and at most MaxPlanBytes) from the plan's objects.
func (h *Handler) readPlan(ctx context.Context, retailerID string, gen int64, after string, limit int) (planResponse, error) {
	out := planResponse{Items: []json.RawMessage{}}
	open := func(key string) (io.ReadCloser, error) {
		obj, err := h.Plans.Open(ctx, key, "")
		if errors.Is(err, blob.ErrNotFound) {
			return nil, planUnavailable(gen, "its plan is no longer retained (kept as long as its upload, upload_retention_days)")
		}
		if err != nil {
			return nil, fmt.Errorf("plan of %s/%d: %w", retailerID, gen, err)
		}
		return obj.Body, nil
	}
	body, err := open(keys.PlanIndex(retailerID, gen))
	if err != nil {
		return out, err
	}
	var doc catalog.PlanIndexDoc
	err = json.NewDecoder(io.LimitReader(body, 64<<20)).Decode(&doc)
	body.Close()
	if err != nil {
		return out, fmt.Errorf("plan index of %s/%d: %w", retailerID, gen, err)
	}
	size, last := 0, ""
	for p := doc.FirstPlanPage(after); p < len(doc.Pages); p++ {
		body, err := open(keys.PlanPage(retailerID, gen, p))
		if err != nil {
			return out, err
		}
		full, err := appendPlanPage(&out, bufio.NewReader(body), after, limit, &size, &last)
		body.Close()
		if err != nil {
			return out, fmt.Errorf("plan page %d of %s/%d: %w", p, retailerID, gen, err)
		}
		if full {
			next := last
			out.NextAfter = &next
			return out, nil
		}
	}
	return out, nil
}

// appendPlanPage adds the items of one page after product id after to
// out, up to limit items and MaxPlanBytes; full reports that the answer
// ended with items left after it (its last id is *last).
func appendPlanPage(out *planResponse, page *bufio.Reader, after string, limit int, size *int, last *string) (full bool, err error) {
	for {
		line, err := page.ReadBytes('\n')
		line = bytes.TrimSuffix(line, []byte("\n"))
		if len(line) > 0 {
			var head struct {
				ProductID string `json:"product_id"`
			}
			if err := json.Unmarshal(line, &head); err != nil {
				return false, err
			}
			if head.ProductID > after || after == "" {
				if len(out.Items) >= limit || (len(out.Items) > 0 && *size+len(line)+1 > MaxPlanBytes) {
					return true, nil
				}
				*size += len(line) + 1
				*last = head.ProductID
				out.Items = append(out.Items, json.RawMessage(line))
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}
