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
	"github.com/retailcatalog/catalog/functions/core/snapshot"
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

// maxPlanLambdaBytes bounds a page as the Lambda response carries it, a
// JSON string (as httpapi.MaxLambdaBodyBytes bounds a problems file):
// each quote and backslash of the page takes two bytes there, so 5 MB of
// values full of them would pass Lambda's 6,291,556 bytes. A page ends
// early, next_after set, before its escaped size would pass this (the
// rest is the headers'). The page itself is written without HTML
// escaping (the canonical form's), which would grow <, > and & sixfold.
const maxPlanLambdaBytes = httpapi.MaxLambdaBodyBytes

// planEnvelopeBytes is room, in the Lambda string, for the page's JSON
// around its items and next_after's value: {"items":[ ... ],"next_after":}
// and the newline, escaped.
const planEnvelopeBytes = 64

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
		err = planUnavailable(gen, noPlanKept(st))
	}
	after := query.Get("after")
	if err == nil && after != "" && !snapshot.ValidProductID(after) {
		// As on the storefront's pages: no product_id can be this.
		err = catalog.Errorf(catalog.ErrInvalid, "invalid_product_id", "after must be a product_id: 1-%d bytes of UTF-8 without control characters",
			snapshot.MaxProductIDBytes)
	}
	var out planResponse
	if err == nil {
		out, err = h.readPlan(r.Context(), retailer.ID, gen, after, limit)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	// Without HTML escaping: the items are the canonical form's text, as
	// the page's size was counted (json.Marshal would make each <, > and &
	// six bytes).
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		httpapi.WriteError(w, r, h.log, fmt.Errorf("plan of %s/%d: encode the page: %w", retailer.ID, gen, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(body.Bytes())
}

// noPlanKept says why a previewed, held or applied generation has no plan.
func noPlanKept(st catalog.GenerationStatus) string {
	bounds := fmt.Sprintf("a plan is kept for a generation whose plan lines take at most %d MB of the diff's temporary storage, "+
		"where they are sorted", catalog.MaxKeptPlanBytes>>20)
	changes := st.Inserted + st.Updated + st.Deleted
	switch st.State {
	case catalog.StatePreviewed, catalog.StateHeld:
		return fmt.Sprintf("none was kept for it: it would change %d products, and %s; its status has the counts", changes, bounds)
	}
	return fmt.Sprintf("none was kept for it: it changed %d products, and %s, when its diff was not interrupted "+
		"(a confirmed hold keeps its own unless it applied against another baseline); its change events say what it changed", changes, bounds)
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
	size, last := planSize{}, ""
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

// planSize is the size of a page's items so far: as JSON, and as the
// Lambda response's JSON string carries them.
type planSize struct {
	raw, escaped int
}

// add adds an item of line to the page when it keeps the page within
// MaxPlanBytes of JSON and maxPlanLambdaBytes once escaped into the Lambda
// response, counting next_after (the item may be the page's last, and
// next_after then its id); first, the page's first item is added
// whatever its size. It reports whether the item was added.
func (s *planSize) add(line []byte, productID string, first bool) bool {
	raw := len(line) + 1 // and its comma
	escaped := httpapi.LambdaStringBytes(line) - 3 + 1
	id := snapshot.AppendJSONString(nil, productID)
	nextRaw, nextEscaped := len(id), httpapi.LambdaStringBytes(id)-3
	if !first && (s.raw+raw+nextRaw+planEnvelopeBytes > MaxPlanBytes ||
		s.escaped+escaped+nextEscaped+planEnvelopeBytes > maxPlanLambdaBytes) {
		return false
	}
	s.raw, s.escaped = s.raw+raw, s.escaped+escaped
	return true
}

// appendPlanPage adds the items of one page after product id after to
// out, up to limit items, MaxPlanBytes and maxPlanLambdaBytes (planSize);
// full reports that the answer ended with items left after it (its last
// id is *last). A page holds at least one item.
func appendPlanPage(out *planResponse, page *bufio.Reader, after string, limit int, size *planSize, last *string) (full bool, err error) {
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
				if len(out.Items) >= limit || !size.add(line, head.ProductID, len(out.Items) == 0) {
					return true, nil
				}
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
