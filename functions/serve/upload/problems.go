package upload

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// ProblemsContentType is the media type of a problems file (JSON Lines).
const ProblemsContentType = "application/x-ndjson"

// Limits of the problems route: behind API Gateway a Lambda answers at
// most 6 MB, and 100,000 problems make 10-30 MB.
const (
	// MaxInlineProblemsBytes is the largest problems file answered in the
	// body (200); a larger one is answered 303 with a link to it.
	// A file under it is linked too when, escaped into the Lambda
	// response, it would pass httpapi.MaxLambdaBodyBytes (each quote and
	// backslash takes two bytes there: 5 MB of short problems can take
	// over 6 MB).
	MaxInlineProblemsBytes = 5 << 20
	// ProblemsLinkTTL is how long the link of a 303 answer is valid.
	ProblemsLinkTTL = 15 * time.Minute
)

// ProblemsLink is the body of a 303 answer of the problems route: the
// presigned GET of the problems file (also in Location) and when it stops
// working.
type ProblemsLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// problems serves every problem of a generation (DESIGN 13): the problems
// file the diff wrote when it read the upload, as it is stored (one
// {"code","line","message"} a line in line order, up to 100,000, then
// {"truncated":true} when there were more; empty when there were none).
// Up to MaxInlineProblemsBytes it is the body of a 200; larger (or over
// 6 MB once JSON-escaped into the Lambda response) the answer is 303 to a
// presigned GET of the file valid ProblemsLinkTTL, which HTTP clients
// follow (without the retailer's token: S3 refuses a presigned URL sent
// with an Authorization header). 404 for a generation never reserved; 409
// problems_unavailable before the upload was read and once the file is
// past its retention (upload_retention_days).
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
	key := keys.Problems(retailer.ID, gen)
	var obj blob.Object
	if err == nil {
		obj, err = h.blobs.Open(r.Context(), key, "")
		if errors.Is(err, blob.ErrNotFound) {
			err = catalog.Errorf(catalog.ErrConflict, "problems_unavailable",
				"generation %d (%s) has no problems file: its upload was not read yet, or the file is past its retention", gen, st.State)
		}
	}
	var body []byte
	if err == nil {
		defer obj.Body.Close()
		if obj.Size <= MaxInlineProblemsBytes {
			body, err = io.ReadAll(io.LimitReader(obj.Body, MaxInlineProblemsBytes+1))
			if err != nil {
				err = fmt.Errorf("read problems of generation %d: %w", gen, err)
			}
		}
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if obj.Size > MaxInlineProblemsBytes || len(body) > MaxInlineProblemsBytes || !httpapi.FitsLambdaResponse(body) {
		h.linkToProblems(w, r, key, obj.Size, retailer.ID, gen)
		return
	}
	w.Header().Set("Content-Type", ProblemsContentType)
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// linkToProblems answers 303 with a presigned GET of the problems file.
func (h *Handler) linkToProblems(w http.ResponseWriter, r *http.Request, key string, size int64, retailerID string, gen int64) {
	expires := time.Now().Add(ProblemsLinkTTL).UTC().Truncate(time.Second)
	link, err := h.blobs.PresignGet(r.Context(), key, ProblemsLinkTTL)
	if err != nil {
		httpapi.WriteError(w, r, h.log, fmt.Errorf("link to problems of generation %d: %w", gen, err))
		return
	}
	h.log.InfoContext(r.Context(), "problems file linked", "retailer_id", retailerID, "generation", gen, "bytes", size)
	w.Header().Set("Location", link)
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusSeeOther, ProblemsLink{URL: link, ExpiresAt: expires})
}
