// Package ops is the operations function (DESIGN 9): the admin routes an
// on-call engineer uses to answer "I uploaded six hours ago and my products
// still show the old price" (why), and the scheduled work that keeps the
// pipeline honest: the stuck-generation sweeper and reconciliation of every
// catalog against its newest applied snapshot.
//
// On AWS it is one Lambda: API Gateway sends it the admin routes, EventBridge
// Scheduler its scheduled tasks, and the reconcile-jobs queue one message
// per retailer to reconcile (lambda/main.go tells them apart). The local
// stack serves the routes on its HTTP API and runs the tasks on tickers and
// a poller, with the same handler.
package ops

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path"
	"time"

	"github.com/retailcatalog/catalog/functions/blob"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/httpapi"
	"github.com/retailcatalog/catalog/functions/metrics"
	"github.com/retailcatalog/catalog/functions/queue"
)

// Store is what the ops function reads of the databases. pgstore.Stores and
// inmem.Store implement it.
type Store interface {
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
	// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
	RetailerByTokenHash(ctx context.Context, hash []byte) (string, error)
	// Generations lists a retailer's generations, newest first.
	Generations(ctx context.Context, retailerID string, limit int) ([]catalog.GenerationStatus, error)
	// Fence returns the retailer's generation counters (zero before its first reservation).
	Fence(ctx context.Context, retailerID string) (catalog.Fence, error)
	// Progress returns what a generation has done beyond its status.
	Progress(ctx context.Context, retailerID string, gen int64) (catalog.Progress, error)
	// CatalogRow returns a product's row on the writer, a tombstone
	// included; catalog.ErrNotFound when the retailer never had it.
	CatalogRow(ctx context.Context, retailerID, productID string) (catalog.CatalogRow, error)
	// Product returns a live product as the storefront reads it (fresh:
	// from the writer); catalog.ErrNotFound when absent or deleted.
	Product(ctx context.Context, retailerID, productID string, fresh bool) (catalog.Product, error)
}

// ReplicaReporter is what a Store may also do (pgstore.Stores does): say
// how the storefront's read replicas of a retailer's shard are doing.
type ReplicaReporter interface {
	ReplicaHealth(ctx context.Context, retailerID string) (catalog.ReplicaHealth, error)
}

// Blobs reads what the pipeline wrote. s3blob.Store and inmem.Blobs implement it.
type Blobs interface {
	// Open streams an object; blob.ErrNotFound when it does not exist.
	Open(ctx context.Context, key, ifMatch string) (blob.Object, error)
	// Size is an object's size; blob.ErrNotFound when it does not exist.
	Size(ctx context.Context, key string) (int64, error)
}

// Queues are the pipeline's queues (URLs) as the ops function sees them:
// the work queues it re-drives into and the dead-letter queues it reads.
type Queues struct {
	Arrivals, ArrivalsDLQ     string
	DiffJobs, DiffJobsDLQ     string
	ApplySmall, ApplySmallDLQ string
	ApplyLarge, ApplyLargeDLQ string
}

// deadLetters lists the dead-letter queues and what their messages hold.
func (q Queues) deadLetters() []deadLetterQueue {
	var out []deadLetterQueue
	for _, d := range []deadLetterQueue{
		{q.ArrivalsDLQ, s3Events}, {q.DiffJobsDLQ, s3Events},
		{q.ApplySmallDLQ, chunkMessages}, {q.ApplyLargeDLQ, chunkMessages},
	} {
		if d.url != "" {
			out = append(out, d)
		}
	}
	return out
}

type dlqKind int

const (
	s3Events      dlqKind = iota // S3 event notifications (arrivals, diff jobs)
	chunkMessages                // events.ChunkMessage
)

type deadLetterQueue struct {
	url  string
	kind dlqKind
}

// name is the queue's name (the last segment of its URL).
func (d deadLetterQueue) name() string { return path.Base(d.url) }

// Config is what the ops function is told at start.
type Config struct {
	AdminToken string // bearer token of the admin routes
	// StallAfter is how long a generation may go without progress (a
	// state change, a chunk applied) before it counts as stuck [10m].
	StallAfter time.Duration
	// MaxRedrives is how many times the sweeper re-drives a stuck
	// generation before leaving it to an operator [3].
	MaxRedrives int
	Queues      Queues
	// DLQPeek is the most messages read from each dead-letter queue per look [100].
	DLQPeek int
	// Now is the clock [time.Now].
	Now func() time.Time
}

func (c *Config) defaults() {
	if c.StallAfter <= 0 {
		c.StallAfter = 10 * time.Minute
	}
	if c.MaxRedrives <= 0 {
		c.MaxRedrives = 3
	}
	if c.DLQPeek <= 0 {
		c.DLQPeek = 100
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Handler serves the ops routes and runs the scheduled tasks.
type Handler struct {
	cfg       Config
	store     Store
	blobs     Blobs
	inspector queue.Inspector
	log       *slog.Logger
	mux       *http.ServeMux
	routes    []string
	// Metrics records the sweeper's and reconciliation's findings (nil: none).
	Metrics *metrics.Recorder
}

// New builds the handler. inspector reads the dead-letter queues (nil: none
// is read).
func New(cfg Config, store Store, blobs Blobs, inspector queue.Inspector, log *slog.Logger) *Handler {
	cfg.defaults()
	h := &Handler{cfg: cfg, store: store, blobs: blobs, inspector: inspector, log: log, mux: http.NewServeMux()}
	for _, r := range []struct {
		pattern string
		handle  http.HandlerFunc
	}{
		{"GET /v1/admin/retailers/{retailer_id}/why", h.why},
	} {
		h.mux.HandleFunc(r.pattern, r.handle)
		h.routes = append(h.routes, r.pattern)
	}
	h.mux.HandleFunc("/", httpapi.NotFound) // the contract's error shape (behind Lambda)
	return h
}

// Routes lists the method and pattern of every route served.
func (h *Handler) Routes() []string { return append([]string(nil), h.routes...) }

// ServeHTTP routes a request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// authAdmin: none or a wrong token 401, a retailer's token 403.
func (h *Handler) authAdmin(r *http.Request) error {
	return httpapi.AuthAdmin(r, h.cfg.AdminToken, h.store.RetailerByTokenHash)
}

// closeQuietly closes what was only read.
func closeQuietly(c io.Closer) { _ = c.Close() }
