package upload

import (
	"errors"
	"io"
	"net/http"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// ProblemsContentType is the media type of a problems file (JSON Lines).
const ProblemsContentType = "application/x-ndjson"

// problems serves every problem of a generation (DESIGN 13): the problems
// file the diff wrote when it read the upload, streamed as it is stored
// (one {"code","line","message"} a line in line order, up to 100,000, then
// {"truncated":true} when there were more; empty when there were none).
// 404 for a generation never reserved; 409 problems_unavailable before the
// upload was read and once the file is past its retention
// (upload_retention_days).
func (h *Handler) problems(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	var gen int64
	if err == nil {
		gen, err = parseGeneration(r)
	}
	var st catalog.GenerationStatus
	if err == nil {
		st, err = h.store.Generation(r.Context(), retailer.ID, gen)
	}
	var obj blob.Object
	if err == nil {
		obj, err = h.blobs.Open(r.Context(), keys.Problems(retailer.ID, gen), "")
		if errors.Is(err, blob.ErrNotFound) {
			err = catalog.Errorf(catalog.ErrConflict, "problems_unavailable",
				"generation %d (%s) has no problems file: its upload was not read yet, or the file is past its retention", gen, st.State)
		}
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	defer obj.Body.Close()
	w.Header().Set("Content-Type", ProblemsContentType)
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, obj.Body); err != nil {
		h.log.WarnContext(r.Context(), "problems file cut short", "retailer_id", retailer.ID, "generation", gen, "err", err)
	}
}
