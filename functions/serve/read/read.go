// Package read serves the storefront routes: one product, a retailer's
// products page by page, up to 100 products by id in one request, a product by its bare id through the product
// directory, and the health check. Reads go to the shards' read replicas,
// falling back to the writers (pgstore.Stores implements Store so).
package read

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
)

// Cache-Control of the storefront's answers, for a CDN in front. Snapshots
// land daily, so a minute of staleness is invisible, and versioned ETags make
// revalidation cheap (a 304 without a body). A miss is kept briefly, so that
// a burst of requests for an absent product does not reach the database.
const (
	cacheControl     = "public, max-age=60, stale-while-revalidate=30, stale-if-error=300"
	missCacheControl = "public, max-age=10"
)

// Limits of the list route (DESIGN 5).
const (
	defaultLimit = 100
	maxLimit     = 1000
	// MaxPageBytes is the most JSON a page holds (DESIGN 5): a page of
	// large products ends early, with next_after set, rather than pass
	// Lambda's 6 MB response limit.
	MaxPageBytes = 5_000_000
)

// Store is what the storefront reads, keyed by retailer. pgstore.Stores
// (through the read replicas) implements it.
type Store interface {
	// Product returns a live product; catalog.ErrNotFound when absent or
	// deleted (or the retailer is unknown). With fresh it reads the
	// writer: for a client that has seen newer data than a replica had.
	Product(ctx context.Context, retailerID, productID string, fresh bool) (catalog.Product, error)
	// Products returns up to limit live products with product_id > after,
	// in byte order, stopping after the product that brings the total size
	// of their attributes to maxBytes (<= 0: no bound); fresh as for Product.
	Products(ctx context.Context, retailerID, after string, limit, maxBytes int, fresh bool) ([]catalog.Product, error)
	// ProductsByID returns the retailer's live products among productIDs
	// (distinct ids), in their order, absent and deleted ones left out, in
	// one query on the retailer's shard; catalog.ErrNotFound when the
	// retailer is unknown; fresh as for Product.
	ProductsByID(ctx context.Context, retailerID string, productIDs []string, fresh bool) ([]catalog.Product, error)
	// Replicated reports whether the retailer's reads may come from a
	// replica, that is whether a fresh read may see more.
	Replicated(ctx context.Context, retailerID string) (bool, error)
	// KnownGenerations returns the retailer's newest generation that took
	// over and its newest applied one, as the readers know them.
	KnownGenerations(ctx context.Context, retailerID string) (latest, applied int64, err error)
	// DirectoryRetailers returns, in order, at most limit retailers whose
	// catalog holds a live product with this id.
	DirectoryRetailers(ctx context.Context, productID string, limit int) ([]string, error)
}

// MaxCandidates is the most retailers a bare product lookup lists.
const MaxCandidates = 100

// FallbackCounter is what a Store may also do (pgstore.Stores does): count
// the reads its replicas could not answer, for the ReplicaFallbacks metric.
type FallbackCounter interface {
	ReplicaFallbacks() int64
}

// Handler serves the storefront routes.
type Handler struct {
	store Store
	log   *slog.Logger
	ready func(context.Context) error
	mux   *http.ServeMux

	// Metrics records the replica fallbacks (nil: none), every
	// MetricsEvery [1 minute] at most: FlushMetrics, called after each
	// invocation, emits what was counted since its last line. Counting is
	// the store's (atomic counters); no request waits for a metric.
	Metrics      *metrics.Recorder
	MetricsEvery time.Duration
	flushMu      sync.Mutex
	lastFlush    time.Time
	flushed      int64 // fallbacks already emitted

	// AccessLog, when set, logs errors, slow requests and a sample of the
	// rest (access.go); nil logs nothing per request.
	AccessLog *AccessLog

	// HealthTTL is how long GET /healthz reuses its last readiness check
	// [DefaultHealthTTL].
	HealthTTL time.Duration
	healthMu  sync.Mutex
	healthAt  time.Time // when the last check ran (zero: never)
	healthErr error
}

// routes are the handler's routes: method and pattern.
var routes = []string{
	"GET /v1/retailers/{retailer_id}/products/{product_id}",
	"GET /v1/retailers/{retailer_id}/products",
	"GET /v1/products/{product_id}",
	"GET /healthz",
	"POST /v1/retailers/{retailer_id}/products/batch-get",
}

// New builds the handler; ready reports whether the storefront can read its
// databases (nil: always ready). GET /healthz asks it at most once per
// HealthTTL.
func New(store Store, log *slog.Logger, ready func(context.Context) error) *Handler {
	h := &Handler{store: store, log: log, ready: ready, mux: http.NewServeMux()}
	h.Register(h.mux)
	h.mux.HandleFunc("/", httpapi.NotFound) // the contract's error shape (behind Lambda)
	return h
}

// FlushMetrics emits the fallbacks counted since the last line, when
// MetricsEvery has passed since it (call it after each invocation: a
// Lambda environment runs nothing between invocations).
func (h *Handler) FlushMetrics(ctx context.Context) {
	counter, ok := h.store.(FallbackCounter)
	if h.Metrics == nil || !ok {
		return
	}
	every := h.MetricsEvery
	if every <= 0 {
		every = time.Minute
	}
	h.flushMu.Lock()
	defer h.flushMu.Unlock()
	now := time.Now()
	if h.lastFlush.IsZero() {
		h.lastFlush = now // the first minute starts with the first request
	}
	if now.Sub(h.lastFlush) < every {
		return
	}
	total := counter.ReplicaFallbacks()
	h.Metrics.Emit(ctx, metrics.Fields{}, metrics.Count(metrics.ReplicaFallbacks, total-h.flushed))
	h.flushed, h.lastFlush = total, now
}

// Routes lists the method and pattern of every route served.
func (h *Handler) Routes() []string { return append([]string(nil), routes...) }

// Register adds every route of Routes to mux, served directly (without
// going through the handler's own mux again).
func (h *Handler) Register(mux *http.ServeMux) {
	handlers := []http.HandlerFunc{h.product, h.products, h.productByID, h.healthz, h.batchGet}
	for i, route := range routes {
		mux.HandleFunc(route, h.logged(handlers[i]))
	}
}

// ServeHTTP routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Product is the contract's JSON of one product (written by appendProduct).
type Product struct {
	RetailerID string          `json:"retailer_id"`
	ProductID  string          `json:"product_id"`
	Attributes json.RawMessage `json:"attributes"`
	Generation int64           `json:"generation"`
	UpdatedAt  time.Time       `json:"updated_at"`
}

// Page is one page of a retailer's products (written by appendPage).
type Page struct {
	Items     []Product `json:"items"`
	NextAfter *string   `json:"next_after"`
}

// Candidate is one retailer using a product id, in a 300 answer.
type Candidate struct {
	RetailerID string `json:"retailer_id"`
	ProductID  string `json:"product_id"`
}

// Candidates is the 300 answer of a bare product id several retailers use.
type Candidates struct {
	Candidates []Candidate `json:"candidates"`
}

func validateProductID(id string) error {
	if !snapshot.ValidProductID(id) {
		return catalog.Errorf(catalog.ErrInvalid, "invalid_product_id", "product_id must be 1-%d bytes of UTF-8 without control characters", snapshot.MaxProductIDBytes)
	}
	return nil
}

// fail writes err; a 404 is kept briefly by caches.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, retailerID string, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		return // the client went away: nobody to answer, nothing went wrong here
	}
	if errors.Is(err, catalog.ErrNotFound) {
		w.Header().Set("Cache-Control", missCacheControl)
	}
	log := h.log
	if retailerID != "" {
		log = log.With("retailer_id", retailerID)
	}
	httpapi.WriteError(w, r, log, err)
}

func (h *Handler) product(w http.ResponseWriter, r *http.Request) {
	retailerID, productID := r.PathValue("retailer_id"), r.PathValue("product_id")
	if err := catalog.ValidateRetailerID(retailerID); err != nil {
		h.fail(w, r, "", err)
		return
	}
	if err := validateProductID(productID); err != nil {
		h.fail(w, r, retailerID, err)
		return
	}
	h.serveProduct(w, r, retailerID, productID)
}

// serveProduct answers one product from the retailer's shard readers. When
// the client revalidates a version newer than the replica holds (it was
// served by a fresher replica before), the writer may answer instead (see
// needsWriter), so a client does not see a product go back in time.
func (h *Handler) serveProduct(w http.ResponseWriter, r *http.Request, retailerID, productID string) {
	p, err := h.store.Product(r.Context(), retailerID, productID, false)
	if seen := httpapi.NewestETagVersion(r); seen > 0 &&
		(errors.Is(err, catalog.ErrNotFound) || (err == nil && p.Generation < seen)) &&
		h.needsWriter(r.Context(), retailerID, seen) {
		p, err = h.store.Product(r.Context(), retailerID, productID, true)
	}
	if err != nil {
		h.fail(w, r, retailerID, err)
		return
	}
	metering.For(r.Context(), retailerID) // a storefront read of the retailer (DESIGN 10)
	buf := bodies.Get().(*[]byte)
	*buf = append(appendProduct((*buf)[:0], p), '\n')
	httpapi.WriteVersionedBody(w, r, cacheControl, p.Generation, *buf)
	bodies.Put(buf)
}

func (h *Handler) products(w http.ResponseWriter, r *http.Request) {
	retailerID := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(retailerID); err != nil {
		h.fail(w, r, "", err)
		return
	}
	q := r.URL.Query()
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			h.fail(w, r, retailerID, catalog.Errorf(catalog.ErrInvalid, "invalid_limit", "limit %q must be an integer from 1 to %d", httpapi.Shortened(v), maxLimit))
			return
		}
		limit = n
	}
	after := q.Get("after")
	if after != "" {
		if err := validateProductID(after); err != nil {
			h.fail(w, r, retailerID, err)
			return
		}
	}
	// One more than asked tells whether this is the last page. Keyset
	// pagination (product_id > after) is stable under ingestion: a product
	// that exists throughout is on exactly one page, whatever changes around it.
	rows, err := h.store.Products(r.Context(), retailerID, after, limit+1, MaxPageBytes, false)
	if seen := httpapi.NewestETagVersion(r); err == nil && seen > pageVersion(rows, limit) &&
		h.needsWriter(r.Context(), retailerID, seen) {
		rows, err = h.store.Products(r.Context(), retailerID, after, limit+1, MaxPageBytes, true)
	}
	if err != nil {
		h.fail(w, r, retailerID, err)
		return
	}
	metering.For(r.Context(), retailerID)
	buf := bodies.Get().(*[]byte)
	var n int
	*buf, n = appendPage((*buf)[:0], rows, limit, MaxPageBytes)
	*buf = append(*buf, '\n')
	httpapi.WriteVersionedBody(w, r, cacheControl, pageVersion(rows, n), *buf)
	bodies.Put(buf)
}

// needsWriter reports whether a client that revalidates version seen,
// newer than the replica's answer, is answered by the writer: only when a
// replica knows that generation took over and has not applied it yet (the
// replica lags, or the generation is applying). A generation newer than
// any a replica knows is treated as stale, never as a reason to read the
// writer: an anonymous client cannot send reads to the writers by naming a
// made-up generation, and while a retailer has nothing in flight no
// revalidation reads the writer. (A replica lagging behind the take-over
// itself answers with what it has: a client may then see a version a few
// seconds older, within the replicas' staleness bound.) An error reads as
// no: the first read's answer stands.
func (h *Handler) needsWriter(ctx context.Context, retailerID string, seen int64) bool {
	if ok, err := h.store.Replicated(ctx, retailerID); err != nil || !ok {
		return false
	}
	latest, applied, err := h.store.KnownGenerations(ctx, retailerID)
	return err == nil && applied < seen && seen <= latest
}

// pageVersion is the newest generation among the first n of a page's products.
func pageVersion(rows []catalog.Product, n int) int64 {
	var v int64
	for i, p := range rows {
		if i == n {
			break
		}
		v = max(v, p.Generation)
	}
	return v
}

// productByID answers GET /v1/products/{product_id} through the product
// directory: the product when one retailer uses the id, 300 with the
// candidates (at most MaxCandidates) when several do, 404 when none.
func (h *Handler) productByID(w http.ResponseWriter, r *http.Request) {
	productID := r.PathValue("product_id")
	if err := validateProductID(productID); err != nil {
		h.fail(w, r, "", err)
		return
	}
	retailers, err := h.store.DirectoryRetailers(r.Context(), productID, MaxCandidates)
	if err != nil {
		h.fail(w, r, "", err)
		return
	}
	switch len(retailers) {
	case 0:
		h.fail(w, r, "", catalog.Errorf(catalog.ErrNotFound, "product_not_found", "no retailer has product %q", productID))
	case 1:
		h.serveProduct(w, r, retailers[0], productID)
	default:
		out := Candidates{Candidates: make([]Candidate, len(retailers))}
		for i, id := range retailers {
			out.Candidates[i] = Candidate{RetailerID: id, ProductID: productID}
		}
		w.Header().Set("Cache-Control", cacheControl)
		httpapi.WriteJSON(w, http.StatusMultipleChoices, out)
	}
}

// DefaultHealthTTL is how long a readiness answer is reused.
const DefaultHealthTTL = 5 * time.Second

func (h *Handler) healthz(w http.ResponseWriter, r *http.Request) {
	if err := h.readiness(r.Context()); err != nil {
		// The details (addresses, users) stay in the log: the route is public.
		httpapi.WriteJSON(w, http.StatusServiceUnavailable, httpapi.ErrorBody{Error: httpapi.ErrorDetail{Code: "not_ready",
			Message: "the catalog's databases do not all answer; the details are in the log under this request's id"}})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readiness is ready's answer, asked at most once per HealthTTL: a public
// route must not let a flood of health checks reach every database.
// Requests that arrive while a check runs wait for it.
func (h *Handler) readiness(ctx context.Context) error {
	if h.ready == nil {
		return nil
	}
	ttl := h.HealthTTL
	if ttl <= 0 {
		ttl = DefaultHealthTTL
	}
	h.healthMu.Lock()
	defer h.healthMu.Unlock()
	if !h.healthAt.IsZero() && time.Since(h.healthAt) < ttl {
		return h.healthErr
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), healthTimeout)
	defer cancel()
	err := h.ready(cctx)
	h.healthAt, h.healthErr = time.Now(), err
	if err != nil {
		h.log.WarnContext(ctx, "not ready", "err", err)
	}
	return err
}

// healthTimeout bounds one readiness check.
const healthTimeout = 3 * time.Second
