package ops

import (
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// OutboxQueue is the name catalogctl dlq takes for the parked change
// events of the shards' outboxes (DESIGN 8, "Bounds").
const OutboxQueue = "outbox"

// ParkedEventJSON is a parked change event as dlq list outbox shows it.
type ParkedEventJSON struct {
	EventID    string    `json:"event_id"` // the id it is published under
	Type       string    `json:"type"`
	RetailerID string    `json:"retailer_id"`
	Generation int64     `json:"generation"`
	Seq        *int      `json:"seq,omitempty"` // the chunk (catalog.changes)
	Shard      int       `json:"shard"`
	Attempts   int       `json:"attempts"`   // failed publishes counted against it
	LastError  string    `json:"last_error"` // why the last publish failed (at most 512 bytes)
	CreatedAt  time.Time `json:"created_at"` // when it was written to the outbox
	ParkedAt   time.Time `json:"parked_at"`
}

// ParkedOutboxJSON is the answer of GET /v1/admin/outbox/parked.
type ParkedOutboxJSON struct {
	Queue  string            `json:"queue"`  // "outbox"
	Parked int64             `json:"parked"` // parked events in all (of the retailer asked for)
	Events []ParkedEventJSON `json:"events"` // first parked first
}

// outboxParked lists up to ?limit= (1-100, default 20) parked change
// events, of ?retailer_id= or of every retailer, first parked first.
func (h *Handler) outboxParked(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	retailerID := r.URL.Query().Get("retailer_id")
	limit, err := limitParam(r, 20, 100)
	if err == nil {
		err = h.knownRetailer(r, retailerID)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	parked, total, err := h.store.ParkedOutbox(r.Context(), retailerID, limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := ParkedOutboxJSON{Queue: OutboxQueue, Parked: total, Events: []ParkedEventJSON{}}
	for _, e := range parked {
		j := ParkedEventJSON{EventID: message.EventID(e.Type, e.RetailerID, e.Generation, e.Seq), Type: e.Type,
			RetailerID: e.RetailerID, Generation: e.Generation, Shard: e.Shard, Attempts: e.Attempts,
			LastError: e.LastError, CreatedAt: e.CreatedAt.UTC(), ParkedAt: e.ParkedAt.UTC()}
		if e.Type == message.TypeChanges {
			seq := e.Seq
			j.Seq = &seq
		}
		out.Events = append(out.Events, j)
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// outboxRedrive puts parked change events back in their outboxes, attempts
// reset: every one, or those of {"retailer_id"}, up to {"limit"}; the
// relay's sweeper publishes them at its next run, under their ids. Safe to
// run any number of times: consumers ignore what they have seen.
func (h *Handler) outboxRedrive(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req struct {
		RetailerID string `json:"retailer_id"`
		Limit      *int   `json:"limit"`
	}
	if err := httpapi.DecodeJSON(r, 1<<10, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	limit, err := redriveLimit(req.Limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if err := h.knownRetailer(r, req.RetailerID); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	moved, left, err := h.store.UnparkOutbox(r.Context(), req.RetailerID, limit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "parked change events re-driven: the sweeper publishes them", "retailer_id", req.RetailerID,
		"moved", moved, "left", left)
	httpapi.WriteJSON(w, http.StatusOK, RedriveResponse{Queue: OutboxQueue, Moved: int(moved), Left: int(left)})
}

// knownRetailer checks a retailer id a request names ("" none): valid, and
// registered (catalog.ErrNotFound otherwise).
func (h *Handler) knownRetailer(r *http.Request, retailerID string) error {
	if retailerID == "" {
		return nil
	}
	if err := catalog.ValidateRetailerID(retailerID); err != nil {
		return err
	}
	_, err := h.store.Retailer(r.Context(), retailerID)
	return err
}
