// Package upload serves the retailers' upload routes of the HTTP API:
// reserving generations with a presigned PUT, upload statuses and their
// list, and confirming held snapshots. The control plane's routes
// (onboarding, tokens, settings, webhooks, offboarding, costs) are package
// control's; the upload function serves both.
package upload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// Presigner presigns uploads and reads what the diff wrote for them. s3blob.Store and inmem.Blobs implement it.
type Presigner interface {
	// PresignPut returns a request that PUTs key without credentials until
	// ttl passes, once: its Headers (sent with the PUT) make S3 refuse a
	// second PUT to a key that exists (If-None-Match: *).
	PresignPut(ctx context.Context, key string, ttl time.Duration) (blob.PresignedRequest, error)
	// Bucket names the bucket the uploads go to (in the S3 events of a confirmation).
	Bucket() string
	// Size returns an object's size; blob.ErrNotFound when there is none
	// (a rollback's source upload that is no longer retained).
	Size(ctx context.Context, key string) (int64, error)
	// Open streams an object (a generation's problems file) with its size;
	// blob.ErrNotFound when there is none.
	Open(ctx context.Context, key, ifMatch string) (blob.Object, error)
	// PresignGet returns a URL that GETs key without credentials until ttl
	// passes (a problems file too large for an answer).
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// Store is what the upload routes need of the databases: the retailer
// registry and, keyed by retailer, its generations. pgstore.Stores
// implements it.
type Store interface {
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
	// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
	RetailerByTokenHash(ctx context.Context, hash []byte) (string, error)
	// ReserveGeneration reserves the retailer's next generation, awaiting
	// its upload until expires, and supersedes the retailer's older slots
	// still awaiting theirs. With perHour > 0, a reservation over perHour in
	// the rolling hour is catalog.ErrRateLimited with its RetryAfter; one
	// of an offboarded retailer is catalog.ErrConflict
	// (retailer_offboarded). Both are decided in the reservation's own
	// transaction, whatever runs at the same time.
	ReserveGeneration(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error)
	// ReserveDelta is ReserveGeneration for a delta upload (DESIGN 13).
	ReserveDelta(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error)
	// Rollback reserves the retailer's next generation as a rollback to
	// applied generation source, received at once (its diff job is the
	// caller's to send); catalog.ErrNotFound generation_not_applied when
	// source was never applied, catalog.ErrConflict retailer_offboarded.
	// It counts against perHour as ReserveGeneration does.
	Rollback(ctx context.Context, retailerID string, source int64, perHour int) (int64, error)
	// Generation returns one generation's status; catalog.ErrNotFound when never reserved.
	Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error)
	// GenerationsBefore lists at most limit of a retailer's generations
	// older than before (0: from the newest), newest first.
	GenerationsBefore(ctx context.Context, retailerID string, before int64, limit int) ([]catalog.GenerationStatus, error)
	// Confirm marks a held generation confirmed; catalog.ErrConflict when it
	// is not held or no longer the latest, or the retailer is offboarded
	// (decided in the confirmation's transaction: a hold confirmed before
	// an offboarding is superseded by it, never applied).
	Confirm(ctx context.Context, retailerID string, gen int64) error
	// ReserveDryRun reserves the retailer's next generation as a dry run
	// (DESIGN 13), as ReserveGeneration does, but superseding no slot.
	ReserveDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error)
	// ReserveDeltaDryRun is ReserveDryRun for the dry run of a delta.
	ReserveDeltaDryRun(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error)
	// AwaitingUploads lists at most limit of the retailer's slots still
	// awaiting their upload within their expiry (not dry runs), oldest first.
	AwaitingUploads(ctx context.Context, retailerID string, limit int) ([]int64, error)
	// MarkArrived records that gen's upload arrived at at (the arrival
	// function's), and returns the generation's state.
	MarkArrived(ctx context.Context, retailerID string, gen int64, at time.Time, grace time.Duration) (catalog.State, error)
}

// Config is what the upload function is told at start.
type Config struct {
	AdminToken   string        // bearer token of the admin routes
	UploadTTL    time.Duration // how long a presigned PUT stays valid
	DiffQueueURL string        // diff-jobs.fifo, where a confirmation re-sends the diff job
	Region       string
	// ReservationsPerHour is how many generations a retailer may reserve
	// per rolling hour [DefaultReservationsPerHour].
	ReservationsPerHour int
}

// DefaultReservationsPerHour is the contract's per-retailer reservation limit.
const DefaultReservationsPerHour = 30

// Handler serves the upload routes.
type Handler struct {
	cfg    Config
	store  Store
	blobs  Presigner
	queue  queue.Sender
	log    *slog.Logger
	routes httpapi.Routes
	// Metrics records the generations reserved (nil: none).
	Metrics *metrics.Recorder
	// Plans reads the plans the diff wrote (nil: every plan is
	// unavailable).
	Plans PlanReader
}

// New builds the handler.
func New(cfg Config, store Store, blobs Presigner, queue queue.Sender, log *slog.Logger) *Handler {
	if cfg.UploadTTL <= 0 {
		cfg.UploadTTL = DefaultUploadTTL
	}
	if cfg.ReservationsPerHour <= 0 {
		cfg.ReservationsPerHour = DefaultReservationsPerHour
	}
	h := &Handler{cfg: cfg, store: store, blobs: blobs, queue: queue, log: log}
	for _, r := range []struct {
		pattern string
		handle  http.HandlerFunc
	}{
		{"POST /v1/retailers/{retailer_id}/snapshots", h.reserve},
		{"GET /v1/retailers/{retailer_id}/snapshots", h.list},
		{"GET /v1/retailers/{retailer_id}/snapshots/{generation}", h.status},
		{"POST /v1/retailers/{retailer_id}/snapshots/{generation}/confirm", h.confirm},
		{"GET /v1/retailers/{retailer_id}/snapshots/{generation}/problems", h.problems},
		{"POST /v1/retailers/{retailer_id}/rollback", h.rollback},
		{"GET /v1/retailers/{retailer_id}/snapshots/{generation}/plan", h.plan},
	} {
		h.routes.Handle(r.pattern, r.handle)
	}
	return h
}

// DefaultUploadTTL is how long a presigned PUT stays valid unless configured.
const DefaultUploadTTL = 15 * time.Minute

// Routes lists the method and pattern of every route served.
func (h *Handler) Routes() []string { return h.routes.Patterns() }

// ServeHTTP routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.routes.ServeHTTP(w, r) }

// authRetailer checks the path's retailer_id and that the token is that
// retailer's (or the admin's), and returns the retailer (httpapi.Retailer).
func (h *Handler) authRetailer(r *http.Request) (catalog.Retailer, error) {
	return httpapi.Retailer(r, h.cfg.AdminToken, h.store)
}

type reserveRequest struct {
	Format string `json:"format"`
	Mode   string `json:"mode"` // "full" (default) or "delta" (DESIGN 13)
	// DryRun reserves a preview (DESIGN 13; plan.go).
	DryRun bool `json:"dry_run"`
}

// UploadSlot is the presigned request a retailer makes to upload.
type UploadSlot struct {
	Method    string            `json:"method"`
	URL       string            `json:"url"`
	Headers   map[string]string `json:"headers"`
	ExpiresAt time.Time         `json:"expires_at"`
}

type reserveResponse struct {
	RetailerID string     `json:"retailer_id"`
	Generation int64      `json:"generation"`
	Upload     UploadSlot `json:"upload"`
}

func (h *Handler) reserve(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err == nil && retailer.OffboardedAt != nil {
		err = catalog.Offboarded(retailer.ID)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req reserveRequest
	if err := httpapi.DecodeJSON(r, 1<<16, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	format, err := snapshot.ParseFormat(req.Format)
	if err != nil {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_format", `format must be "csv" or "jsonl", got %q`, req.Format))
		return
	}
	reserve, err := h.reserver(req.Mode, req.DryRun)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if !req.DryRun { // a dry run supersedes no slot
		if err := h.takeArrivedUploads(r.Context(), retailer.ID); err != nil {
			httpapi.WriteError(w, r, h.log, err)
			return
		}
	}
	expires := time.Now().Add(h.cfg.UploadTTL)
	gen, err := reserve(r.Context(), retailer.ID, string(format), expires, h.cfg.ReservationsPerHour)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	signed, err := h.blobs.PresignPut(r.Context(), keys.Upload(retailer.ID, gen), h.cfg.UploadTTL)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "generation reserved", "retailer_id", retailer.ID, "generation", gen, "format", format, "mode", req.Mode,
		"dry_run", req.DryRun)
	h.Metrics.Emit(r.Context(), metrics.Fields{RetailerID: retailer.ID, Generation: gen}, metrics.Count(metrics.UploadsReserved, 1))
	httpapi.WriteJSON(w, http.StatusCreated, reserveResponse{
		RetailerID: retailer.ID, Generation: gen,
		Upload: UploadSlot{Method: signed.Method, URL: signed.URL, Headers: signed.Headers, ExpiresAt: signed.Expires},
	})
}

// parseLimit reads a page's limit parameter: 1 to 1000, def when v is "".
func parseLimit(v string, def int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1000 {
		return 0, catalog.Errorf(catalog.ErrInvalid, "invalid_limit", "limit %q must be an integer from 1 to 1000", httpapi.Shortened(v))
	}
	return n, nil
}

func parseGeneration(r *http.Request) (int64, error) {
	v := r.PathValue("generation")
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g <= 0 || strconv.FormatInt(g, 10) != v { // one spelling per generation: no "+1", no "01"
		return 0, catalog.Errorf(catalog.ErrInvalid, "invalid_generation", "generation %q must be a positive integer", r.PathValue("generation"))
	}
	return g, nil
}

func (h *Handler) status(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err == nil {
		var gen int64
		if gen, err = parseGeneration(r); err == nil {
			var st catalog.GenerationStatus
			if st, err = h.store.Generation(r.Context(), retailer.ID, gen); err == nil {
				httpapi.WriteJSON(w, http.StatusOK, StatusJSON(st))
				return
			}
		}
	}
	httpapi.WriteError(w, r, h.log, err)
}

type listResponse struct {
	// Items are the uploads' statuses (Status), each marshaled once, when
	// the page's bytes are counted.
	Items []json.RawMessage `json:"items"`
	// NextBefore is the before of the next page: the oldest generation of
	// this one, or null on the last page.
	NextBefore *int64 `json:"next_before"`
}

// DefaultListLimit is how many uploads a page of the list holds unless asked.
const DefaultListLimit = 20

// MaxListBytes bounds a page of the list (I12): a page ends before the
// upload that would take it past this, and next_before goes on from there,
// so that 1,000 rejected uploads with 100 long problems each (up to 64 KiB
// a status) never make an answer of tens of megabytes (Lambda's limit is
// 6 MB). A page holds at least one upload.
const MaxListBytes = 1 << 20

// list answers GET .../snapshots?limit=N&before=G: at most N uploads older
// than generation G (all when absent), newest first, and the before of the
// next page.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	query := r.URL.Query()
	limit, err := parseLimit(query.Get("limit"), DefaultListLimit)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var before int64
	if v := query.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_before",
				"before %q must be a generation, a positive integer (the next_before of the previous page)", v))
			return
		}
		before = n
	}
	// One more than the page: whether a next page exists, exactly.
	gens, err := h.store.GenerationsBefore(r.Context(), retailer.ID, before, limit+1)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	out := listResponse{Items: make([]json.RawMessage, 0, min(len(gens), limit))}
	size := 0
	for _, g := range gens[:min(len(gens), limit)] {
		b, err := json.Marshal(StatusJSON(g))
		if err != nil {
			httpapi.WriteError(w, r, h.log, fmt.Errorf("list uploads of %s: %w", retailer.ID, err))
			return
		}
		if len(out.Items) > 0 && size+len(b)+1 > MaxListBytes {
			break
		}
		size += len(b) + 1
		out.Items = append(out.Items, b)
	}
	if n := len(out.Items); n < len(gens) {
		next := gens[n-1].Generation
		out.NextBefore = &next
	}
	httpapi.WriteJSON(w, http.StatusOK, out)
}

// rollback answers POST .../rollback {"to_generation": G}: a new
// generation whose content is generation G's catalog (mode rollback,
// source_generation G), through the normal diff, holds, chunks and events
// (DESIGN 13). G must have been applied (404 generation_not_applied) and
// its snapshot still be retained (409 snapshot_expired).
func (h *Handler) rollback(w http.ResponseWriter, r *http.Request) {
	retailer, err := h.authRetailer(r)
	if err == nil && retailer.OffboardedAt != nil {
		err = catalog.Offboarded(retailer.ID)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req struct {
		ToGeneration json.RawMessage `json:"to_generation"`
	}
	if err := httpapi.DecodeJSON(r, 1<<10, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	to, err := strconv.ParseInt(string(req.ToGeneration), 10, 64)
	if err != nil || to < 1 {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_generation",
			`"to_generation" must be a positive integer, the generation to roll back to`))
		return
	}
	src, err := h.store.Generation(r.Context(), retailer.ID, to)
	if errors.Is(err, catalog.ErrNotFound) || (err == nil && src.State != catalog.StateApplied) {
		err = catalog.NotApplied(retailer.ID, to)
	}
	if err == nil && src.ObjectKey != "" { // none: the empty catalog, always there
		if _, serr := h.blobs.Size(r.Context(), src.ObjectKey); errors.Is(serr, blob.ErrNotFound) {
			err = catalog.Errorf(catalog.ErrConflict, "snapshot_expired",
				"generation %d's snapshot is no longer retained: roll back to a newer generation, or upload the catalog again", to)
		} else if serr != nil {
			err = fmt.Errorf("rollback of %s to %d: %w", retailer.ID, to, serr)
		}
	}
	var gen int64
	if err == nil {
		gen, err = h.store.Rollback(r.Context(), retailer.ID, to, h.cfg.ReservationsPerHour)
	}
	if err == nil {
		err = h.sendDiffJob(r.Context(), retailer.ID, gen)
	}
	var st catalog.GenerationStatus
	if err == nil {
		st, err = h.store.Generation(r.Context(), retailer.ID, gen)
	}
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "rollback reserved", "retailer_id", retailer.ID, "generation", gen, "source_generation", to)
	httpapi.WriteJSON(w, http.StatusCreated, StatusJSON(st))
}

// sendDiffJob puts gen's diff job on diff-jobs.fifo, in its retailer's
// group, as the S3 event of its upload key would: a confirmation's, a
// rollback's.
func (h *Handler) sendDiffJob(ctx context.Context, retailerID string, gen int64) error {
	body := message.ObjectCreatedMessage(h.cfg.Region, h.blobs.Bucket(), keys.Upload(retailerID, gen), time.Now())
	return h.queue.Send(ctx, h.cfg.DiffQueueURL, body, message.DiffJobGroupID(retailerID), message.DiffJobDedupID(body))
}

func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
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
	if err := h.store.Confirm(r.Context(), retailer.ID, gen); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	// Ask the diff to look at the upload again; it now proceeds past the hold.
	if err := h.sendDiffJob(r.Context(), retailer.ID, gen); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "held generation confirmed", "retailer_id", retailer.ID, "generation", gen)
	st, err := h.store.Generation(r.Context(), retailer.ID, gen)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, StatusJSON(st))
}
