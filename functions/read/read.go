// Package read serves the storefront routes: one product, a retailer's
// products page by page, and the health check.
package read

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/httpapi"
	"github.com/retailcatalog/catalog/functions/pgstore"
)

// cacheControl lets a CDN keep a product or page briefly: snapshots land
// daily, so a minute of staleness is invisible, and ETags make revalidation cheap.
const cacheControl = "public, max-age=60, stale-while-revalidate=30"

// Handler serves the storefront routes.
type Handler struct {
	stores *pgstore.Stores
	log    *slog.Logger
	ready  func(context.Context) error
	mux    *http.ServeMux
}

// New builds the handler; ready reports whether the stack can serve (nil: always).
func New(stores *pgstore.Stores, log *slog.Logger, ready func(context.Context) error) *Handler {
	h := &Handler{stores: stores, log: log, ready: ready, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET /v1/retailers/{retailer_id}/products/{product_id}", h.product)
	h.mux.HandleFunc("GET /v1/retailers/{retailer_id}/products", h.products)
	h.mux.HandleFunc("GET /healthz", h.healthz)
	return h
}

// Routes lists the method and pattern of every route served.
func (h *Handler) Routes() []string {
	return []string{
		"GET /v1/retailers/{retailer_id}/products/{product_id}",
		"GET /v1/retailers/{retailer_id}/products",
		"GET /healthz",
	}
}

// ServeHTTP routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Product is the contract's JSON of one product.
type Product struct {
	RetailerID string          `json:"retailer_id"`
	ProductID  string          `json:"product_id"`
	Attributes json.RawMessage `json:"attributes"`
	Generation int64           `json:"generation"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// Page is one page of a retailer's products.
type Page struct {
	Items     []Product `json:"items"`
	NextAfter *string   `json:"next_after"`
}

func productJSON(p catalog.Product) Product {
	return Product{RetailerID: p.RetailerID, ProductID: p.ProductID, Attributes: p.Attributes,
		Generation: p.Generation, UpdatedAt: p.UpdatedAt.UTC()}
}

func validateProductID(id string) error {
	if len(id) == 0 || len(id) > 256 || !utf8.ValidString(id) {
		return catalog.Errorf(catalog.ErrInvalid, "invalid_product_id", "product_id must be 1-256 bytes of UTF-8")
	}
	for _, r := range id {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) {
			return catalog.Errorf(catalog.ErrInvalid, "invalid_product_id", "product_id must not contain control characters")
		}
	}
	return nil
}

func (h *Handler) shard(r *http.Request) (*pgstore.Shard, string, error) {
	id := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(id); err != nil {
		return nil, "", err
	}
	_, shard, err := h.stores.ForRetailer(r.Context(), id)
	return shard, id, err
}

func (h *Handler) product(w http.ResponseWriter, r *http.Request) {
	shard, retailerID, err := h.shard(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	productID := r.PathValue("product_id")
	if err := validateProductID(productID); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	p, err := shard.Product(r.Context(), retailerID, productID)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteCacheableJSON(w, r, cacheControl, productJSON(p))
}

func (h *Handler) products(w http.ResponseWriter, r *http.Request) {
	shard, retailerID, err := h.shard(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_limit", "limit %q must be an integer from 1 to 1000", v))
			return
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" {
		if err := validateProductID(after); err != nil {
			httpapi.WriteError(w, r, h.log, err)
			return
		}
	}
	// One more than asked tells whether this is the last page.
	rows, err := shard.Products(r.Context(), retailerID, after, limit+1)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	page := Page{Items: make([]Product, 0, min(len(rows), limit))}
	for i, p := range rows {
		if i == limit {
			next := rows[limit-1].ProductID
			page.NextAfter = &next
			break
		}
		page.Items = append(page.Items, productJSON(p))
	}
	httpapi.WriteCacheableJSON(w, r, cacheControl, page)
}

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	if h.ready != nil {
		if err := h.ready(r.Context()); err != nil {
			httpapi.WriteJSON(w, http.StatusServiceUnavailable, httpapi.ErrorBody{Error: httpapi.ErrorDetail{Code: "not_ready", Message: err.Error()}})
			return
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}
