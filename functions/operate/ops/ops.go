// Package ops is the operations function (DESIGN 9): the admin routes an
// on-call engineer uses to answer "I uploaded six hours ago and my products
// still show the old price" (why), to look at and re-drive the dead-letter
// queues and replay a retailer's change events (DESIGN 8; events.go), and
// the scheduled work that keeps the pipeline honest: the stuck-generation
// sweeper and reconciliation of every catalog against its newest applied
// snapshot.
//
// On AWS it is one Lambda: API Gateway sends it the admin routes, EventBridge
// Scheduler its scheduled tasks, and the reconcile-jobs queue one message
// per retailer to reconcile or to collect (lambda/main.go tells them apart). The local
// stack serves the routes on its HTTP API and runs the tasks on tickers and
// a poller, with the same handler.
package ops

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path"
	"runtime"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// Store is what the ops function reads of the databases. pgstore.Stores
// implements it.
type Store interface {
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
	// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
	RetailerByTokenHash(ctx context.Context, hash []byte) (string, error)
	// Replay writes again, into the retailer's outbox, the change events
	// of the chunks applied since a time and the lifecycle event of every
	// generation whose state changed since then, under their original ids
	// and times (the relay publishes them); it returns how many of each.
	Replay(ctx context.Context, retailerID string, since time.Time) (changes, lifecycle int, err error)
	// ParkedOutbox lists the change events parked in the outboxes (of one
	// retailer; "" every), first parked first, at most limit, and how many
	// are parked in all.
	ParkedOutbox(ctx context.Context, retailerID string, limit int) ([]catalog.ParkedEvent, int64, error)
	// UnparkOutbox puts up to limit parked events (of one retailer; ""
	// every) back in their outboxes with no attempt counted, for the
	// relay's sweeper; it returns how many, and how many are still parked.
	UnparkOutbox(ctx context.Context, retailerID string, limit int) (unparked, left int64, err error)
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
	// Generation returns one generation's status; catalog.ErrNotFound when never reserved.
	Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error)

	// The stuck-generation sweeper.

	// Stalled lists the generations with work left (received, diffing,
	// applying, a confirmed hold) whose last progress is older than
	// before, oldest first, at most limit (of each shard).
	Stalled(ctx context.Context, before time.Time, limit int) ([]catalog.StalledGeneration, error)
	// RecordRedrive records that the sweeper re-drove a generation and
	// returns how many times it has now.
	RecordRedrive(ctx context.Context, retailerID string, gen int64, action string) (int, error)
	// Reject ends a generation that cannot be finished (its re-drives are
	// spent) and, when the catalog would keep a mix, reserves the undo
	// (I10), whose diff job the sweeper sends; an offboarding is never
	// given up (Undo.Rejected false).
	Reject(ctx context.Context, retailerID string, gen int64, rej catalog.Rejection) (catalog.Undo, error)

	// Reconciliation: runs and results (control database).

	// RetailerIDs returns up to limit registered retailer ids after after, in order.
	RetailerIDs(ctx context.Context, after string, limit int) ([]string, error)
	// CreateReconcileRun records a new run.
	CreateReconcileRun(ctx context.Context, run catalog.ReconcileRun) error
	// SetReconcileTotal records how many retailers a run checks (and
	// finishes it when their results are in).
	SetReconcileTotal(ctx context.Context, runID string, total int) error
	// RecordReconcileResult records or overwrites a retailer's result (and
	// finishes the run when it was the last).
	RecordReconcileResult(ctx context.Context, r catalog.ReconcileResult) error
	// ReconcileReport returns a run so far, with at most limit notable
	// results; catalog.ErrNotFound for an unknown run.
	ReconcileReport(ctx context.Context, runID string, limit int) (catalog.ReconcileReport, error)
	// PruneReconcileRuns deletes the runs requested before a time.
	PruneReconcileRuns(ctx context.Context, before time.Time) (int64, error)

	// Reconciliation: the walk and the repair (the retailer's shard).

	// ScanCatalog calls fn with each live row of the retailer with
	// product_id in [from, to) (to "": no end; id and attributes valid
	// during the call) in product_id byte order, from one consistent
	// snapshot in which the retailer's fence is expect
	// (catalog.ErrSuperseded otherwise). Memory does not grow with the catalog.
	ScanCatalog(ctx context.Context, retailerID string, expect catalog.Fence, from, to string, fn func(id, attributes []byte) error) error
	// NormalizeAttributes returns each JSON object as the database stores it.
	NormalizeAttributes(ctx context.Context, retailerID string, attributes []string) ([]string, error)
	// RepairRows rewrites rows of the applied generation gen to the
	// snapshot's values (upserts) or tombstones (deletes), fenced like an
	// apply, with a change event that is a claim check on objectKey.
	RepairRows(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp, objectKey, sha256 string) (catalog.RepairResult, error)
	// RepairDirectory brings the product directory in line with a repair's ops.
	RepairDirectory(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp) error

	// Collection (DESIGN 14; gc.go).

	// Collect removes, in short transactions of a bounded batch each, what
	// of one retailer no write or reader needs again under p, raising its
	// write floor first, and calls progress (if not nil) with the running
	// total after each batch; catalog.ErrNotFound for an unknown retailer.
	Collect(ctx context.Context, retailerID string, p catalog.CollectPolicy, progress func(catalog.Collected)) (catalog.Collected, error)
	// CollectMoveRecords deletes, on every shard, the forwarding records
	// of retailers that moved out before before; it returns how many.
	CollectMoveRecords(ctx context.Context, before time.Time) (int64, error)
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
	// Put writes an object (a repair's change object).
	Put(ctx context.Context, key string, body []byte) error
	// Get reads a whole object (a chunk to send again); blob.ErrNotFound when it does not exist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Bucket names the bucket (in the S3 events of a re-sent diff job).
	Bucket() string
}

// Queue sends to the pipeline's queues (re-drives, reconcile jobs) and
// reads the dead-letter queues without consuming them.
type Queue interface {
	queue.Sender
	queue.Inspector
}

// Queues are the pipeline's queues (URLs) as the ops function sees them:
// the work queues it re-drives into and the dead-letter queues it reads.
type Queues struct {
	// The change-event consumers' queues (dlq list and redrive).
	Analytics, AnalyticsDLQ string
	Webhooks, WebhooksDLQ   string

	Arrivals, ArrivalsDLQ     string
	DiffJobs, DiffJobsDLQ     string
	ApplySmall, ApplySmallDLQ string
	ApplyLarge, ApplyLargeDLQ string
	// Reconcile is reconcile-jobs, the queue of reconciliation's and the
	// scheduled collection's work, and ReconcileDLQ its dead-letter queue (jobs that crashed or timed
	// out on every receive).
	Reconcile, ReconcileDLQ string
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
	chunkMessages                // message.ChunkMessage
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
	// ReconcileWorkers is how many parts one retailer's walk streams at
	// once, each on a database connection [GOMAXPROCS, at most 4].
	ReconcileWorkers int
	// ReconcileBatch is how many index entries one transaction of a walk
	// compares with the catalog's rows [50,000]: the index is read from S3
	// between transactions, never inside one (I12).
	ReconcileBatch int
	// ListPage is how many retailers one listing message of a run of every
	// retailer (reconciliation's, the scheduled collection's) lists and
	// queues, and a collection of every retailer on request reads at a
	// time [500].
	ListPage int
	// As the diff: the changed rows from which a generation's chunks take
	// the large apply queue, and the chunks of a retailer in flight (its
	// FIFO groups) [catalog's defaults]. Region names the region in the
	// S3 events of re-sent diff jobs.
	LargeThreshold int
	InflightCap    int
	Region         string
	// TombstoneAfter is how long after the deleting generation was applied
	// collection may remove its tombstones, and after a generation finished
	// its chunk progress [catalog.DefaultTombstoneAfter: the chunk objects'
	// retention]. ParkedAfter is how long a parked outbox row is kept for a
	// redrive [catalog.DefaultParkedAfter].
	TombstoneAfter time.Duration
	ParkedAfter    time.Duration
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
	if c.ReconcileWorkers <= 0 {
		c.ReconcileWorkers = min(runtime.GOMAXPROCS(0), 4)
	}
	if c.ReconcileBatch <= 0 {
		c.ReconcileBatch = 50_000
	}
	if c.ListPage <= 0 {
		c.ListPage = defaultListPage
	}
	if c.LargeThreshold <= 0 {
		c.LargeThreshold = catalog.DefaultLargeThresholdRows
	}
	if c.InflightCap <= 0 {
		c.InflightCap = catalog.DefaultInflightCap
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.TombstoneAfter <= 0 {
		c.TombstoneAfter = catalog.DefaultTombstoneAfter
	}
	if c.ParkedAfter <= 0 {
		c.ParkedAfter = catalog.DefaultParkedAfter
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
	queue     Queue
	inspector queue.Inspector // the queue, or nil: no dead-letter queue is read
	log       *slog.Logger
	mux       *http.ServeMux
	routes    []string
	// Metrics records the sweeper's and reconciliation's findings (nil: none).
	Metrics *metrics.Recorder
	// Redriver moves dead letters back to their queues (dlq redrive; nil:
	// that route answers 503).
	Redriver queue.Redriver
	// Mover moves retailers between shards (move.go; the routes need it,
	// the schedule's task does nothing without).
	Mover Mover
	// MoveStarted, when set, is called after a move is recorded (the local
	// stack wakes its move poller; on AWS the schedule runs it).
	MoveStarted func()
}

// New builds the handler.
func New(cfg Config, store Store, blobs Blobs, q Queue, log *slog.Logger) *Handler {
	cfg.defaults()
	h := &Handler{cfg: cfg, store: store, blobs: blobs, queue: q, log: log, mux: http.NewServeMux()}
	if q != nil {
		h.inspector = q
	}
	for _, r := range []struct {
		pattern string
		handle  http.HandlerFunc
	}{
		{"GET /v1/admin/dlq", h.dlqQueues},
		{"GET /v1/admin/dlq/{queue}", h.dlqList},
		{"POST /v1/admin/dlq/{queue}/redrive", h.dlqRedrive},
		{"GET /v1/admin/outbox/parked", h.outboxParked},
		{"POST /v1/admin/outbox/redrive", h.outboxRedrive},
		{"POST /v1/admin/retailers/{retailer_id}/replay", h.replay},
		{"GET /v1/admin/retailers/{retailer_id}/why", h.why},
		{"POST /v1/admin/reconcile", h.startReconcile},
		{"GET /v1/admin/reconcile/{run_id}", h.reconcileReport},
		{"POST /v1/admin/gc", h.gc},
		{"POST /v1/admin/retailers/{retailer_id}/move", h.startMove},
		{"GET /v1/admin/moves/{move_id}", h.getMove},
	} {
		h.mux.HandleFunc(r.pattern, r.handle)
		h.routes = append(h.routes, r.pattern)
	}
	h.mux.HandleFunc("/", httpapi.NotFound) // the contract's error shape (behind Lambda)
	return h
}

// Workers is how many parts a reconciliation walk streams at once.
func (h *Handler) Workers() int { return h.cfg.ReconcileWorkers }

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
