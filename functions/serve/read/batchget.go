package read

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// Limits of the batch-get route (DESIGN 5, I12).
const (
	// MaxBatchIDs is the most product ids one batch-get asks for, counted
	// as given (duplicates included).
	MaxBatchIDs = 100
	// MaxBatchBodyBytes bounds a batch-get's request body: 100 ids of 256
	// bytes, each byte written as a JSON escape at worst, fit.
	MaxBatchBodyBytes = 128 << 10
	// MaxBatchAnswerBytes bounds a batch-get's answer, as a page's (a
	// Lambda response is capped at 6 MB): a batch of products too large
	// for it is refused whole, never cut short.
	MaxBatchAnswerBytes = MaxPageBytes
)

// batchCacheControl: a batch-get is a POST, which no shared cache keeps;
// said explicitly so that no intermediary does.
const batchCacheControl = "no-store"

// BatchGet is the contract's body of a batch-get request.
type BatchGet struct {
	ProductIDs []string `json:"product_ids"`
}

// BatchAnswer is the contract's answer of a batch-get (written by
// appendBatch): the live products in the order asked, and the ids absent
// or deleted, in the order asked; each id once.
type BatchAnswer struct {
	Items   []Product `json:"items"`
	Missing []string  `json:"missing"`
}

// batchGet answers POST /v1/retailers/{retailer_id}/products/batch-get:
// up to MaxBatchIDs products of one retailer in one query on its shard's
// readers, metered as one storefront read per distinct id. An unknown
// retailer has every id missing. The answer carries no ETag: If-None-Match
// on a POST is a precondition (RFC 9110), not a revalidation.
func (h *Handler) batchGet(w http.ResponseWriter, r *http.Request) {
	retailerID := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(retailerID); err != nil {
		h.fail(w, r, "", err)
		return
	}
	var req BatchGet
	if err := httpapi.DecodeJSON(r, MaxBatchBodyBytes, &req); err != nil {
		h.fail(w, r, retailerID, err)
		return
	}
	ids, err := distinctProductIDs(req.ProductIDs)
	if err != nil {
		h.fail(w, r, retailerID, err)
		return
	}
	products, err := h.store.ProductsByID(r.Context(), retailerID, ids, false)
	known := !errors.Is(err, catalog.ErrNotFound)
	if err != nil && known {
		h.fail(w, r, retailerID, err)
		return
	}
	if known {
		metering.For(r.Context(), retailerID) // one storefront read per id answered (DESIGN 10)
		metering.Reads(r.Context(), len(ids))
	}
	buf := bodies.Get().(*[]byte)
	defer bodies.Put(buf)
	*buf = append(appendBatch((*buf)[:0], ids, products), '\n')
	if batchTooLarge(*buf) {
		h.fail(w, r, retailerID, catalog.Errorf(catalog.ErrTooLarge, "batch_too_large",
			"the %d products asked make an answer of %d bytes, over %d (or over %d as the JSON string of the Lambda response): ask for fewer ids at once",
			len(ids), len(*buf), MaxBatchAnswerBytes, httpapi.MaxLambdaBodyBytes))
		return
	}
	hd := w.Header()
	hd["Content-Type"] = jsonContentType
	hd["Cache-Control"] = []string{batchCacheControl}
	hd["Content-Length"] = []string{strconv.Itoa(len(*buf))} // one piece, never chunked
	w.WriteHeader(http.StatusOK)
	w.Write(*buf)
}

var jsonContentType = []string{"application/json"}

// batchTooLarge reports whether a batch-get's answer passes
// MaxBatchAnswerBytes, or httpapi.MaxLambdaBodyBytes once escaped into the
// Lambda response (httpapi.FitsLambdaResponse).
func batchTooLarge(body []byte) bool {
	return len(body) > MaxBatchAnswerBytes || !httpapi.FitsLambdaResponse(body)
}

// distinctProductIDs checks a batch-get's ids (1 to MaxBatchIDs as given,
// each a valid product_id) and returns them without repeats, each at its
// first place.
func distinctProductIDs(asked []string) ([]string, error) {
	if len(asked) == 0 || len(asked) > MaxBatchIDs {
		return nil, catalog.Errorf(catalog.ErrInvalid, "invalid_product_ids", "product_ids must hold 1 to %d ids, got %d", MaxBatchIDs, len(asked))
	}
	seen := make(map[string]struct{}, len(asked))
	ids := make([]string, 0, len(asked))
	for i, id := range asked {
		if !snapshot.ValidProductID(id) {
			return nil, catalog.Errorf(catalog.ErrInvalid, "invalid_product_id", "product_ids[%d] must be 1-%d bytes of UTF-8 without control characters", i, snapshot.MaxProductIDBytes)
		}
		if _, dup := seen[id]; !dup {
			seen[id] = struct{}{}
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// appendBatch appends the contract's JSON of a batch-get answer: products
// (the live ones among ids, in the order of ids) as items, the other ids
// as missing.
func appendBatch(b []byte, ids []string, products []catalog.Product) []byte {
	b = append(b, `{"items":[`...)
	for i, p := range products {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendProduct(b, p)
	}
	b = append(b, `],"missing":[`...)
	next, first := 0, true
	for _, id := range ids {
		if next < len(products) && products[next].ProductID == id {
			next++
			continue
		}
		if !first {
			b = append(b, ',')
		}
		b = snapshot.AppendJSONString(b, id)
		first = false
	}
	return append(b, "]}"...)
}
