package control

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// Settings is the body of PUT and the answer of GET
// /v1/retailers/{retailer_id}/settings: the retailer's hold thresholds, in
// percent of the baseline's product count (I8).
type Settings struct {
	RetailerID    string   `json:"retailer_id,omitempty"`
	HoldDeletePct *float64 `json:"hold_delete_pct"`
	HoldUpdatePct *float64 `json:"hold_update_pct"`
	// HoldDropPct is attribute_dropped's threshold: percent of the products
	// that had a value of an attribute (DESIGN 13).
	HoldDropPct *float64 `json:"hold_drop_pct"`
}

func settingsOf(r catalog.Retailer) Settings {
	del, upd, drop := r.Hold.DeleteFraction*100, r.Hold.UpdateFraction*100, r.Hold.DropFraction*100
	return Settings{RetailerID: r.ID, HoldDeletePct: &del, HoldUpdatePct: &upd, HoldDropPct: &drop}
}

func (h *Handler) getSettings(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, settingsOf(retailer))
}

// putSettings sets the hold thresholds given (either or both), each a
// percentage from 0 to 100.
func (h *Handler) putSettings(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req struct {
		HoldDeletePct json.RawMessage `json:"hold_delete_pct"`
		HoldUpdatePct json.RawMessage `json:"hold_update_pct"`
		HoldDropPct   json.RawMessage `json:"hold_drop_pct"`
	}
	if err := httpapi.DecodeJSON(r, 1<<16, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	absent := func(raw json.RawMessage) bool { return raw == nil || string(raw) == "null" }
	if absent(req.HoldDeletePct) && absent(req.HoldUpdatePct) && absent(req.HoldDropPct) {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_settings",
			`give "hold_delete_pct", "hold_update_pct" or "hold_drop_pct" (percent, 0 to 100)`))
		return
	}
	p := retailer.Hold
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		into *float64
	}{{"hold_delete_pct", req.HoldDeletePct, &p.DeleteFraction}, {"hold_update_pct", req.HoldUpdatePct, &p.UpdateFraction},
		{"hold_drop_pct", req.HoldDropPct, &p.DropFraction}} {
		if absent(f.raw) {
			continue
		}
		var pct float64
		if err := json.Unmarshal(f.raw, &pct); err != nil || pct < 0 || pct > 100 {
			httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_settings",
				"%s must be a number from 0 to 100, got %s", f.name, f.raw))
			return
		}
		*f.into = pct / 100
	}
	if err := h.store.SetHoldPolicy(r.Context(), retailer.ID, p); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	retailer.Hold = p
	h.log.InfoContext(r.Context(), "hold thresholds set", "retailer_id", retailer.ID,
		"hold_delete_pct", p.DeleteFraction*100, "hold_update_pct", p.UpdateFraction*100, "hold_drop_pct", p.DropFraction*100)
	httpapi.WriteJSON(w, http.StatusOK, settingsOf(retailer))
}

type tokenResponse struct {
	Token string `json:"token"`
}

// rotateToken gives the retailer a new token; the old one stops working at
// once (upload URLs handed out stay valid until they expire: they carry no
// token). The change is conditional on the token it replaces, the one the
// request carries (the stored one for the admin's token): of concurrent
// rotations one answers 201 with the token that works, the others 409
// token_rotated.
func (h *Handler) rotateToken(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	replaces := retailer.TokenHash
	if token := httpapi.Bearer(r); !h.isAdmin(token) {
		replaces = HashToken(token)
	}
	h.newToken(w, r, retailer.ID, replaces)
}

// recoverToken is rotateToken with the admin token, for a retailer that
// lost its own: it replaces the token stored when the request came, so of
// concurrent recoveries (or a recovery racing a rotation) one wins and the
// others answer 409 token_rotated.
func (h *Handler) recoverToken(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("retailer_id")
	retailer, err := h.authAdminFor(r, id)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.newToken(w, r, id, retailer.TokenHash)
}

// newToken replaces the retailer's token whose hash is replaces by a new one.
func (h *Handler) newToken(w http.ResponseWriter, r *http.Request, retailerID string, replaces []byte) {
	token := newToken()
	if err := h.store.SetToken(r.Context(), retailerID, replaces, HashToken(token)); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "retailer token replaced", "retailer_id", retailerID)
	httpapi.WriteJSON(w, http.StatusCreated, tokenResponse{Token: token})
}

// authAdminFor checks the admin token and that retailerID is a valid id of
// a registered retailer, and returns it.
func (h *Handler) authAdminFor(r *http.Request, retailerID string) (catalog.Retailer, error) {
	if err := catalog.ValidateRetailerID(retailerID); err != nil {
		return catalog.Retailer{}, err
	}
	if err := h.authAdmin(r); err != nil {
		return catalog.Retailer{}, err
	}
	return h.store.Retailer(r.Context(), retailerID)
}

// OffboardResponse is the answer of DELETE /v1/admin/retailers/{retailer_id}.
type OffboardResponse struct {
	RetailerID string `json:"retailer_id"`
	// Generation removes the catalog: an empty snapshot that goes through
	// the pipeline like any upload (its status, with the admin token, shows
	// the progress; applied when the catalog is gone).
	Generation int64  `json:"generation"`
	State      string `json:"state"`
}

// offboard revokes the retailer's token at once, refuses anything new of
// it, and removes its catalog from the storefront and the product
// directory through the pipeline: an empty snapshot, confirmed in advance,
// whose generation the shard records as final (Store.Offboard: every older
// generation stops at once, nothing later is reserved, confirmed or
// applied) and which deletes every product as tombstones, with their
// events. Nothing of any other retailer is touched. Asking again answers
// the same generation and finishes what a failed attempt left.
func (h *Handler) offboard(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("retailer_id")
	if _, err := h.authAdminFor(r, id); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	gen, err := h.store.Offboard(r.Context(), id, HashToken(newToken()), time.Now().Add(h.cfg.UploadTTL))
	if err == nil {
		err = h.blobs.PutNew(r.Context(), keys.Upload(id, gen), nil)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	st, err := h.store.Generation(r.Context(), id, gen)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "retailer offboarded; its catalog is being removed", "retailer_id", id, "generation", gen)
	httpapi.WriteJSON(w, http.StatusAccepted, OffboardResponse{RetailerID: id, Generation: gen, State: string(st.State)})
}
