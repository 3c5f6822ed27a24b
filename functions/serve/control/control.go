// Package control serves the control plane's routes of the HTTP API:
// onboarding retailers, their tokens (rotation and the admin's recovery),
// their hold settings and webhooks, offboarding, and finance's cost
// reports. The upload function serves them beside package upload's routes.
package control

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// Store is what the control routes need of the databases: the retailer
// registry and, keyed by retailer, its settings, token and offboarding.
// pgstore.Stores implements it.
type Store interface {
	// ShardCount is the number of shards retailers are placed on.
	ShardCount() int
	// CreateRetailer registers a retailer; catalog.ErrConflict when it exists.
	CreateRetailer(ctx context.Context, r catalog.Retailer) error
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
	// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
	RetailerByTokenHash(ctx context.Context, hash []byte) (string, error)
	// Generation returns one generation's status; catalog.ErrNotFound when never reserved.
	Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error)
	// SetHoldPolicy sets a retailer's hold thresholds; catalog.ErrConflict
	// when offboarded.
	SetHoldPolicy(ctx context.Context, retailerID string, p catalog.HoldPolicy) error
	// SetToken replaces a retailer's token hash old by hash if old is still
	// the stored one (compare and swap): the old token stops working at
	// once. catalog.ErrConflict token_rotated when another rotation replaced
	// old first (nothing changes), retailer_offboarded when offboarded.
	SetToken(ctx context.Context, retailerID string, old, hash []byte) error
	// Offboard revokes the retailer's token (revokedHash: a hash nobody's
	// token has), marks it offboarded and reserves, once, the generation
	// whose empty snapshot removes its catalog, superseding the rest; it
	// returns that generation. From its return no reservation,
	// confirmation, upload or apply of the retailer succeeds. Idempotent.
	Offboard(ctx context.Context, retailerID string, revokedHash []byte, expires time.Time) (int64, error)
}

// Blobs writes the offboarding's empty snapshot. s3blob.Store implements it.
type Blobs interface {
	// PutNew writes key unless an object is there already (then nothing
	// changes and it is no error).
	PutNew(ctx context.Context, key string, body []byte) error
}

// Config is what the control routes are told at start.
type Config struct {
	AdminToken string        // bearer token of the admin routes
	UploadTTL  time.Duration // how long the offboarding's slot waits for its empty snapshot
	// Costs serves GET /v1/admin/costs; nil answers 503.
	Costs *CostsConfig
}

// DefaultUploadTTL is the offboarding slot's wait unless configured.
const DefaultUploadTTL = 15 * time.Minute

// Handler serves the control plane's routes.
type Handler struct {
	cfg    Config
	store  Store
	blobs  Blobs
	log    *slog.Logger
	routes httpapi.Routes
	// webhooks serves the webhook routes (EnableWebhooks).
	webhooks Webhooks
}

// New builds the handler.
func New(cfg Config, store Store, blobs Blobs, log *slog.Logger) *Handler {
	if cfg.UploadTTL <= 0 {
		cfg.UploadTTL = DefaultUploadTTL
	}
	h := &Handler{cfg: cfg, store: store, blobs: blobs, log: log}
	for _, r := range []struct {
		pattern string
		handle  http.HandlerFunc
	}{
		{"POST /v1/admin/retailers", h.createRetailer},
		{"GET /v1/retailers/{retailer_id}/settings", h.getSettings},
		{"PUT /v1/retailers/{retailer_id}/settings", h.putSettings},
		{"POST /v1/retailers/{retailer_id}/token", h.rotateToken},
		{"POST /v1/admin/retailers/{retailer_id}/token", h.recoverToken},
		{"DELETE /v1/admin/retailers/{retailer_id}", h.offboard},
		{"GET /v1/admin/costs", h.costsReport},
	} {
		h.routes.Handle(r.pattern, r.handle)
	}
	return h
}

// Routes lists the method and pattern of every route served.
func (h *Handler) Routes() []string { return h.routes.Patterns() }

// ServeHTTP routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.routes.ServeHTTP(w, r) }

// newToken makes a retailer token: 32 random bytes.
func newToken() string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return "rt_" + base64.RawURLEncoding.EncodeToString(raw)
}

// HashToken is how a retailer token is stored.
func HashToken(token string) []byte { return httpapi.HashToken(token) }

func (h *Handler) isAdmin(token string) bool { return httpapi.IsAdmin(token, h.cfg.AdminToken) }

// authAdmin: none or a wrong token 401, a retailer's token 403.
func (h *Handler) authAdmin(r *http.Request) error {
	return httpapi.AuthAdmin(r, h.cfg.AdminToken, h.store.RetailerByTokenHash)
}

// authRetailer checks the path's retailer_id and that the token is that
// retailer's (or the admin's), and returns the retailer (httpapi.Retailer).
func (h *Handler) authRetailer(r *http.Request) (catalog.Retailer, error) {
	return httpapi.Retailer(r, h.cfg.AdminToken, h.store)
}

type createRetailerRequest struct {
	RetailerID string `json:"retailer_id"`
}

type createRetailerResponse struct {
	RetailerID string `json:"retailer_id"`
	Token      string `json:"token"`
	Shard      int    `json:"shard"`
}

func (h *Handler) createRetailer(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req createRetailerRequest
	if err := httpapi.DecodeJSON(r, 1<<16, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if err := catalog.ValidateRetailerID(req.RetailerID); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	token := newToken()
	shard := catalog.ShardFor(req.RetailerID, h.store.ShardCount())
	err := h.store.CreateRetailer(r.Context(), catalog.Retailer{ID: req.RetailerID, Shard: shard, TokenHash: HashToken(token)})
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "retailer onboarded", "retailer_id", req.RetailerID, "shard", shard)
	httpapi.WriteJSON(w, http.StatusCreated, createRetailerResponse{RetailerID: req.RetailerID, Token: token, Shard: shard})
}
