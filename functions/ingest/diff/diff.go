// Package diff is the diff function: started by S3 object-created events
// (through the diff-jobs queue), it reads a retailer's new snapshot, compares
// it with the applied baseline's index (and the indexes of stopped
// generations, I5), and fans out only the changed rows, as chunk objects and
// one FIFO message per chunk, to the apply queues.
package diff

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/retailcatalog/catalog/functions/ingest/diff/extsort"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// Blobs reads uploads and indexes and writes indexes and chunks.
// s3blob.Store and inmem.Blobs implement it.
type Blobs interface {
	// Open streams an object; blob.ErrNotFound when it does not exist; with
	// ifMatch, blob.ErrChanged when its ETag differs.
	Open(ctx context.Context, key, ifMatch string) (blob.Object, error)
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
	// Create starts an object written as a stream (the new generation's
	// index, which may be larger than memory); it appears at Close.
	Create(ctx context.Context, key string) (blob.Writer, error)
}

// IndexRetirer is what a Blobs may also do (s3blob.Store and inmem.Blobs do) so that the
// diff marks the indexes no diff will read again with
// keys.SupersededTagKey, for the bucket's lifecycle rule to expire them.
// A Blobs without it keeps every index.
type IndexRetirer interface {
	// List returns the keys under prefix.
	List(ctx context.Context, prefix string) ([]string, error)
	// Tag sets an object's tags to the one tag key=value.
	Tag(ctx context.Context, key, tagKey, tagValue string) error
}

// Backoff is what the diff's queue may also do (sqsqueue.Sender does) so
// that a failed diff job comes back after a short backoff rather than after
// diff-jobs.fifo's visibility timeout (six times the function's timeout):
// a failed job holds its retailer's message group, and with it the
// retailer's later uploads, until it comes back.
type Backoff interface {
	// ChangeVisibility makes a received message visible again after timeout.
	ChangeVisibility(ctx context.Context, queueURL, receiptHandle string, timeout time.Duration) error
}

// Store is what the diff needs of the databases, keyed by retailer: the
// registry, the fence and the generation's state. pgstore.Stores
// implements it.
type Store interface {
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
	// BeginDiff records that gen's upload arrived and decides whether to
	// read it. etag is the version the event announces ("" when unknown):
	// the first version is pinned (DiffDecision.ETag) and another refused.
	BeginDiff(ctx context.Context, retailerID string, gen int64, etag string) (catalog.DiffDecision, error)
	// PinUpload pins etag as gen's upload version unless one is pinned, and
	// returns the pinned version.
	PinUpload(ctx context.Context, retailerID string, gen int64, etag string) (string, error)
	// TakeOver makes gen, read whole and not held, the retailer's latest and
	// returns the baseline and the stopped generations (I5);
	// catalog.ErrSuperseded when a newer generation took over first.
	TakeOver(ctx context.Context, retailerID string, gen int64) (catalog.DiffDecision, error)
	// NewerArrival returns the newest generation after gen whose upload has
	// arrived (0: none); gen, not applying yet, then ends superseded by it.
	NewerArrival(ctx context.Context, retailerID string, gen int64) (int64, error)
	// IsLatest reports whether gen is still the retailer's newest arrived generation (I4).
	IsLatest(ctx context.Context, retailerID string, gen int64) (bool, error)
	// StartApplying records gen's counts and chunk total (zero chunks: applied
	// at once); catalog.ErrSuperseded when a newer generation arrived.
	StartApplying(ctx context.Context, retailerID string, gen int64, c catalog.Counts, chunks int) error
	// Reject ends gen with its problems (I7), or as failed
	// (catalog.FailureCodes), from any unfinished state (a pinned upload
	// that is gone or replaced ends applying work too). When the catalog
	// would keep a mix, it reserves the undo (I10), whose diff job the
	// caller sends.
	Reject(ctx context.Context, retailerID string, gen int64, rej catalog.Rejection) (catalog.Undo, error)
	// Hold parks gen until the retailer confirms it (I8); it may reserve an
	// undo as Reject does (a held upload repairs nothing while it waits).
	Hold(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts) (catalog.Undo, error)
	// RecordDiffFailure records why a run of gen failed (its diff_failed
	// message, should every attempt fail).
	RecordDiffFailure(ctx context.Context, retailerID string, gen int64, reason string) error
	// DeltaStore: what deltas and rollbacks to them need (delta.go).
	DeltaStore
	DriftStore
	PlanStore
	AppliedPlanStore
}

// DiffJobSender sends a generation's diff job (message.DiffJobs implements
// it): the diff sends the undo's, when a rejection reserved one (I10).
type DiffJobSender interface {
	SendDiffJob(ctx context.Context, retailerID string, gen int64) error
}

// Config is what the diff function is told at start.
type Config struct {
	ChunkRows int // rows per chunk, at most (and by default) catalog.MaxChunkRows
	// ChunkBytes is the byte budget of a chunk object
	// [catalog.DefaultChunkBytes]: a chunk closes at ChunkRows ops or before
	// the op that would take it over ChunkBytes.
	ChunkBytes     int
	InflightCap    int // chunks of one retailer in flight at once (I9): FIFO groups per retailer [catalog.DefaultInflightCap]
	LargeThreshold int // changed rows from which a snapshot goes to the large queue [catalog.DefaultLargeThresholdRows]
	SmallQueueURL  string
	LargeQueueURL  string
	MaxUploadBytes int64 // an upload over this is rejected (file_too_large)
	MaxRowBytes    int   // a row over this is rejected (row_too_large)
	// MaxInflatedBytes bounds the decompressed bytes of a snapshot: a gzip
	// file that inflates past it is rejected (file_too_large) as soon as it
	// does [snapshot.DefaultMaxFileBytes, 50 GiB].
	MaxInflatedBytes int64
	// MaxProducts bounds the products of a snapshot: the first one past it
	// rejects the snapshot (too_many_products) and the file is read no
	// further [snapshot.DefaultMaxProducts, 50 million].
	MaxProducts int64
	// SupersedeCheckRows: while reading, check every this many rows that the
	// generation is still the latest.
	SupersedeCheckRows int
	// Workers parse the snapshot in parallel (snapshot.Reader.Workers);
	// default GOMAXPROCS, 1 reads serially.
	Workers int
	// SortMemoryBytes bounds the memory of the snapshot's sorted entries
	// (default DefaultSortMemoryBytes): over it, sorted runs spill to
	// SpillDir ("" is the system's temporary directory; on Lambda, /tmp is
	// the function's ephemeral storage).
	SortMemoryBytes int64
	SpillDir        string
	// JobQueueURL is diff-jobs.fifo, where a failed job is given its
	// RetryBackoff [30s], doubled at each receive, capped at 15 minutes.
	JobQueueURL  string
	RetryBackoff time.Duration
	// MaxAttempts is how many runs a generation's diff gets [3]
	// (CATALOG_DIFF_ATTEMPTS): one that fails, or runs past its budget, on
	// its last attempt ends the generation rejected (diff_failed, I10),
	// and a job of a generation past its attempts (a run killed at the
	// function's timeout records nothing) ends it at once. An offboarding
	// is never given up.
	MaxAttempts int
	// BudgetMargin is how long before its context's deadline (the
	// function's timeout) a run stops, to record what happened [a tenth of
	// the time it has, at least 100 ms and at most 30 s].
	BudgetMargin time.Duration
	// PlanMemoryBytes bounds the plan lines a generation's plan holds in
	// memory [DefaultPlanMemoryBytes]: past it, they are sorted and spill
	// to SpillDir as sorted runs, merged as the pages are written
	// (planSpill). MaxPlanBytes bounds the plan's ids and lines, its share
	// of the temporary storage [catalog.MaxKeptPlanBytes]: a preview, a
	// held upload or an applied generation whose plan passes it, or finds
	// no space left, keeps none (the plan route answers 409
	// plan_unavailable). MaxPlanOps, a test knob, bounds its operations
	// as well [0: no bound].
	PlanMemoryBytes int
	MaxPlanBytes    int64
	MaxPlanOps      int
	// MaxDeltaRows and MaxDeltaBytes bound a delta, which is held in memory
	// whole while it is diffed [DefaultMaxDeltaRows, DefaultMaxDeltaBytes
	// decompressed; never above MaxProducts and MaxInflatedBytes]: past
	// them it is rejected (too_many_products, file_too_large), saying to
	// send a full snapshot, which is streamed.
	MaxDeltaRows  int64
	MaxDeltaBytes int64
}

// DefaultMaxDeltaRows and DefaultMaxDeltaBytes are the default bounds of a
// delta: with the merge's copies, a delta at both takes about 1 GiB of the
// diff function's 3 GB.
const (
	DefaultMaxDeltaRows  = 1_000_000
	DefaultMaxDeltaBytes = 256 << 20
)

// DefaultMaxAttempts is the default Config.MaxAttempts.
const DefaultMaxAttempts = 3

// DefaultSortMemoryBytes is the default Config.SortMemoryBytes: a snapshot
// of 1M products with ids like SKU-0123456789 takes ~25 MiB and never
// spills; 10M products with 128-byte ids (~1.5 GiB of runs) spill six times.
const DefaultSortMemoryBytes = 256 << 20

func (c *Config) defaults() {
	if c.ChunkRows <= 0 || c.ChunkRows > catalog.MaxChunkRows {
		c.ChunkRows = catalog.MaxChunkRows
	}
	if c.ChunkBytes <= 0 {
		c.ChunkBytes = catalog.DefaultChunkBytes
	}
	if c.InflightCap <= 0 {
		c.InflightCap = catalog.DefaultInflightCap
	}
	if c.LargeThreshold <= 0 {
		c.LargeThreshold = catalog.DefaultLargeThresholdRows
	}
	if c.SupersedeCheckRows <= 0 {
		c.SupersedeCheckRows = 250000
	}
	if c.Workers <= 0 {
		c.Workers = runtime.GOMAXPROCS(0)
	}
	if c.SortMemoryBytes <= 0 {
		c.SortMemoryBytes = DefaultSortMemoryBytes
	}
	if c.PlanMemoryBytes <= 0 {
		c.PlanMemoryBytes = DefaultPlanMemoryBytes
	}
	if c.MaxPlanBytes <= 0 {
		c.MaxPlanBytes = catalog.MaxKeptPlanBytes
	}
	if c.MaxDeltaRows <= 0 {
		c.MaxDeltaRows = DefaultMaxDeltaRows
	}
	if c.MaxDeltaBytes <= 0 {
		c.MaxDeltaBytes = DefaultMaxDeltaBytes
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = 30 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
}

// budget is the context of one run: its parent's deadline less the
// margin, so that a run over its budget stops while there is time to
// record it (no deadline: no budget).
func (c *Config) budget(ctx context.Context) (context.Context, time.Duration, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, 0, func() {}
	}
	left := time.Until(deadline)
	margin := c.BudgetMargin
	if margin <= 0 {
		margin = min(max(left/10, 100*time.Millisecond), 30*time.Second)
	}
	run, cancel := context.WithTimeout(ctx, left-margin)
	return run, left - margin, cancel
}

// Flusher publishes a retailer's pending change events at once: the
// relay's fast path (relay.Relay implements it). Best effort: what it
// misses, the relay's sweeper publishes.
type Flusher interface {
	Flush(ctx context.Context, retailerID string)
}

// Handler runs diffs.
type Handler struct {
	cfg   Config
	store Store
	blobs Blobs
	queue queue.Sender
	log   *slog.Logger
	// Events, when set, publishes the lifecycle events a diff wrote
	// (rejected, held, superseded, applied) right after it; nil leaves
	// them to the sweeper.
	Events Flusher
	// Metrics records each run's time, the rows it plans and the uploads
	// it ends (rejected by code, held, superseded, applied) (nil: none).
	Metrics *metrics.Recorder
	// Jobs sends the diff job of an undo a rejection reserved (I10); nil
	// leaves it to the stuck sweeper, which re-drives an undo not started
	// within a minute.
	Jobs DiffJobSender
}

// New builds the handler.
func New(cfg Config, store Store, blobs Blobs, queue queue.Sender, log *slog.Logger) *Handler {
	cfg.defaults()
	return &Handler{cfg: cfg, store: store, blobs: blobs, queue: queue, log: log}
}

// HandleSQS is the Lambda entry: each diff-jobs message holds an S3 event
// notification. A message whose diff fails is reported for retry alone.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	var resp lambdaevents.SQSEventResponse
	for _, msg := range ev.Records {
		if err := h.handleMessage(ctx, msg); err != nil {
			// With the upload's retailer and generation, so that tracing
			// an upload in the logs finds its failures too.
			h.log.ErrorContext(ctx, "diff job failed", append(jobAttrs(msg), "message_id", msg.MessageId, "err", err)...)
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			h.backOff(ctx, msg)
		}
	}
	return resp, nil
}

// backOff brings a failed job back after RetryBackoff x 2^(receives-1).
// Best effort: without it the job comes back after the visibility timeout.
func (h *Handler) backOff(ctx context.Context, msg lambdaevents.SQSMessage) {
	b, ok := h.queue.(Backoff)
	if !ok || h.cfg.JobQueueURL == "" || msg.ReceiptHandle == "" {
		return
	}
	receives, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	delay := h.cfg.RetryBackoff
	for i := 1; i < receives && delay < 15*time.Minute; i++ {
		delay *= 2
	}
	delay = min(delay, 15*time.Minute)
	if err := b.ChangeVisibility(context.WithoutCancel(ctx), h.cfg.JobQueueURL, msg.ReceiptHandle, delay); err != nil {
		h.log.WarnContext(ctx, "diff job back-off", "message_id", msg.MessageId, "err", err)
	}
}

// jobAttrs are the log attributes naming the upload of a diff-jobs message
// (its first record's), none when it names none.
func jobAttrs(msg lambdaevents.SQSMessage) []any {
	var s3ev lambdaevents.S3Event
	if json.Unmarshal([]byte(msg.Body), &s3ev) != nil {
		return nil
	}
	jobs, err := message.DiffJobsFromS3Event(s3ev)
	if err != nil || len(jobs) == 0 {
		return nil
	}
	return []any{"retailer_id", jobs[0].RetailerID, "generation", jobs[0].Generation}
}

func (h *Handler) handleMessage(ctx context.Context, msg lambdaevents.SQSMessage) error {
	var s3ev lambdaevents.S3Event
	if err := json.Unmarshal([]byte(msg.Body), &s3ev); err != nil {
		return fmt.Errorf("message %s is not an S3 event: %w", msg.MessageId, err)
	}
	jobs, err := message.DiffJobsFromS3Event(s3ev)
	if err != nil {
		return err
	}
	for _, job := range jobs {
		err := h.Diff(ctx, job)
		if h.Events != nil {
			h.Events.Flush(ctx, job.RetailerID)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Diff processes one upload. It returns an error only for failures worth a
// retry (storage, queue, database); a bad snapshot ends rejected, an
// unneeded one (duplicate event, superseded) ends quietly.
func (h *Handler) Diff(ctx context.Context, job message.DiffJob) error {
	log := h.log.With("retailer_id", job.RetailerID, "generation", job.Generation)
	retailer, err := h.store.Retailer(ctx, job.RetailerID)
	if errors.Is(err, catalog.ErrNotFound) {
		log.WarnContext(ctx, "upload for an unknown retailer ignored", "key", job.Key)
		return nil
	}
	if err != nil {
		return err
	}
	metering.For(ctx, job.RetailerID)
	decision, err := h.store.BeginDiff(ctx, job.RetailerID, job.Generation, job.ETag)
	if err != nil {
		return err
	}
	r := &run{h: h, log: log, store: h.store, retailer: retailer, job: job, decision: decision}
	// Whatever this run did, a delta that waited for this generation may
	// start now (DESIGN 13, I10).
	defer h.startWaitingDelta(ctx, log, job.RetailerID)
	if decision.Undo.Generation > 0 {
		r.startUndo(ctx, decision.Undo)
	}
	if !decision.Proceed {
		log.InfoContext(ctx, "diff skipped", "reason", decision.Reason)
		return nil
	}
	last := decision.Attempt >= h.cfg.MaxAttempts && !decision.Offboarding
	if decision.Attempt > h.cfg.MaxAttempts && !decision.Offboarding {
		// Every attempt ran and none finished: the last ones, at least,
		// were killed before they could say why (the function's timeout).
		why := decision.LastFailure
		if why == "" {
			why = "no run finished (each ran out of time or was stopped)"
		}
		return r.fail(ctx, fmt.Sprintf("the diff failed on each of its %d attempts; the last failure: %s", h.cfg.MaxAttempts, why))
	}
	runCtx, budget, cancel := h.cfg.budget(ctx)
	defer cancel()
	start := time.Now()
	err = r.do(runCtx)
	if err != nil && ctx.Err() == nil {
		why := err.Error()
		if runCtx.Err() != nil {
			why = fmt.Sprintf("the run did not finish within its time budget of %s (the function's timeout less a margin)", budget.Round(time.Second))
		}
		if last {
			log.ErrorContext(ctx, "diff failed on its last attempt; the generation ends rejected", "attempt", decision.Attempt, "err", err)
			return r.fail(ctx, fmt.Sprintf("the diff failed on each of its %d attempts; the last failure: %s", h.cfg.MaxAttempts, why))
		}
		if rerr := h.store.RecordDiffFailure(ctx, job.RetailerID, job.Generation, why); rerr != nil {
			log.WarnContext(ctx, "record the diff failure", "err", rerr)
		}
		return fmt.Errorf("diff attempt %d of %d: %w", decision.Attempt, h.cfg.MaxAttempts, err)
	}
	if err != nil {
		return err
	}
	h.Metrics.Emit(ctx, r.fields(), metrics.Duration(metrics.DiffSeconds, time.Since(start)))
	return nil
}

// fail ends the run's generation rejected as diff_failed (I10), undoing
// what it (or a generation it stopped) may have written.
func (r *run) fail(ctx context.Context, message string) error {
	undo, err := r.store.Reject(ctx, r.job.RetailerID, r.job.Generation, catalog.Rejection{Code: catalog.CodeDiffFailed, Message: message})
	if err != nil {
		return err
	}
	if !undo.Rejected {
		r.log.InfoContext(ctx, "diff failed, and the generation was not rejected (it ended meanwhile, or it is an offboarding, which is re-driven until it applies)")
		return nil
	}
	r.log.ErrorContext(ctx, "generation rejected: its diff cannot finish", "code", catalog.CodeDiffFailed, "reason", message)
	r.ended(ctx, catalog.StateRejected, metrics.Count(metrics.Rejections, 1).By("Code", catalog.CodeDiffFailed),
		metrics.Count(metrics.GenerationsFailed, 1).By("Code", catalog.CodeDiffFailed))
	r.startUndo(ctx, undo)
	return nil
}

// startUndo sends the diff job of the undo a rejection or a hold reserved
// (I10). Best effort: a job that is not sent, the stuck sweeper sends
// within a minute or two.
func (r *run) startUndo(ctx context.Context, undo catalog.Undo) {
	if undo.Generation == 0 {
		return
	}
	r.log.WarnContext(ctx, "the catalog is returned to the last applied generation", "undo_generation", undo.Generation,
		"source_generation", undo.Source)
	if r.h.Jobs == nil {
		return
	}
	if err := r.h.Jobs.SendDiffJob(context.WithoutCancel(ctx), r.job.RetailerID, undo.Generation); err != nil {
		r.log.WarnContext(ctx, "send the undo's diff job; the stuck sweeper will", "undo_generation", undo.Generation, "err", err)
	}
}

func (r *run) fields() metrics.Fields {
	return metrics.Fields{RetailerID: r.job.RetailerID, Generation: r.job.Generation}
}

// ended records that the run's upload reached a final state.
func (r *run) ended(ctx context.Context, state catalog.State, more ...metrics.Value) {
	r.h.Metrics.Emit(ctx, r.fields(), append(more, metrics.Count(metrics.Uploads, 1).By("State", string(state)))...)
}

// run is one diff of one generation.
type run struct {
	h        *Handler
	log      *slog.Logger
	store    Store
	retailer catalog.Retailer
	job      message.DiffJob
	decision catalog.DiffDecision

	etag     string
	entries  *extsort.Sorter // the new snapshot's (id, hash, line), sorted
	products int64
	names    []string                // the snapshot's attribute names (union over its products, sorted)
	counts   catalog.AttributeCounts // the snapshot's per-attribute counts (attribute_dropped)
	// deltaDrop is a delta's attribute_dropped input (deltaDrift); nil for
	// any other generation.
	deltaDrop *catalog.DropInput
	sizes     *catalog.RowSizes // chunk-line sizes of the large rows, by line
	size      int64             // the upload's bytes, for the usage counters

	// The last merge: its plan against planBase (no stopped generations).
	plan     *catalog.Plan
	planBase int64
	// The new generation's index, streamed to the blob store by the first
	// merge walk (whatever its baseline: the index holds the new entries
	// only) and made to appear by writeIndex, after the take-over; aborted
	// when the diff ends otherwise.
	index   blob.Writer
	indexed bool // index holds every entry
	// local is the materialized catalog read instead of the upload (a
	// delta over stopped generations, a rollback to a delta): delta.go.
	local string
	// started and read time a delta's diff (its log line).
	started, read time.Time

	// problems is the problems file of a rejection by the reader (every
	// problem, DESIGN 13); nil: the rejection's own problems.
	problems problemFile
	// applied is the plan recorded as the chunks go (applied_plan.go).
	applied *appliedPlan
}

// uploadGone reports that the generation's pinned upload cannot be read any
// more: replaced by another version (blob.ErrChanged) or deleted. The
// generation can never finish, so it is rejected rather than retried.
type uploadGone struct{ err error }

func (e *uploadGone) Error() string { return e.err.Error() }
func (e *uploadGone) Unwrap() error { return e.err }

// openUpload opens the generation's upload at its pinned version (any
// version when none is pinned yet); a version that is gone is *uploadGone.
func (r *run) openUpload(ctx context.Context, etag string) (blob.Object, error) {
	if r.local != "" {
		return r.openLocal()
	}
	if r.decision.ObjectKey == "" {
		// The empty catalog: an offboarding, or an undo when nothing was
		// ever applied.
		return blob.Object{Body: io.NopCloser(strings.NewReader(""))}, nil
	}
	obj, err := r.h.blobs.Open(ctx, r.decision.ObjectKey, etag)
	if errors.Is(err, blob.ErrChanged) || errors.Is(err, blob.ErrNotFound) {
		return obj, &uploadGone{err}
	}
	return obj, err
}

// rejectGone ends the generation whose pinned upload is gone.
func (r *run) rejectGone(ctx context.Context, gone *uploadGone) error {
	se := &snapshot.Error{Code: catalog.CodeUploadMissing,
		Message: "the uploaded object is gone; reserve a new generation and upload again"}
	if errors.Is(gone.err, blob.ErrChanged) {
		se = &snapshot.Error{Code: catalog.CodeUploadChanged,
			Message: "the uploaded object was replaced by another version after it was first read; an upload URL is single-use: reserve a new generation and upload again"}
	}
	return r.reject(ctx, se)
}

func (r *run) do(ctx context.Context) error {
	err := r.diff(ctx)
	var gone *uploadGone
	if errors.As(err, &gone) {
		return r.rejectGone(ctx, gone)
	}
	return err
}

func (r *run) diff(ctx context.Context) error {
	start := time.Now()
	defer r.removeLocal()
	if done, err := r.prepareContent(ctx); done || err != nil {
		return err
	}
	rejected, err := r.readSnapshot(ctx)
	if err != nil || rejected {
		return err
	}
	read := time.Now()
	if r.entries == nil {
		// superseded while reading
		return nil
	}
	defer r.entries.Close()
	defer r.abortIndex(ctx)
	if err := r.keepCounts(ctx); err != nil {
		return err
	}
	if r.decision.DryRun {
		return r.preview(ctx)
	}
	// A held snapshot must not stop older work: decide the hold against the
	// baseline before taking over.
	if !r.decision.Confirmed {
		held, err := r.hold(ctx, r.decision)
		if err != nil || held {
			return err
		}
	}
	takeover, err := r.store.TakeOver(ctx, r.job.RetailerID, r.job.Generation)
	if errors.Is(err, catalog.ErrSuperseded) {
		r.log.InfoContext(ctx, "a newer generation took over first; stopping")
		r.ended(ctx, catalog.StateSuperseded)
		return nil
	}
	if err != nil {
		return err
	}
	plan, err := r.merge(ctx, takeover)
	if err != nil {
		return err
	}
	counts := r.countsOf(plan)
	if !r.decision.Confirmed && takeover.Baseline != r.decision.Baseline {
		// The baseline moved while we read: decide the hold again.
		if held, err := r.holdPlan(ctx, plan, takeover, r.fullPlan(plan)); err != nil || held {
			return err
		}
	}
	// The chunks are planned before any is sent (their total is recorded
	// now): upserts by line, then deletes, within the row and byte limits.
	lines := slices.Clone(plan.Upserts)
	slices.Sort(lines)
	chunkPlan := catalog.PlanChunks(r.h.limits(), lines, r.sizes, plan.Deletes, message.DeleteLineLen)
	chunks := len(chunkPlan)
	if chunks == 0 || !r.indexed {
		// (An index not written yet is written by a walk over the
		// entries, which pass 2 drops: before it.)
		if err := r.writeIndex(ctx); err != nil {
			return err
		}
	}
	if chunks == 0 {
		if counts.EmptyPlan, err = r.emptyAppliedPlan(ctx, takeover); err != nil {
			return err
		}
		if started, err := r.startApplying(ctx, takeover, plan, counts, chunks); err != nil || !started {
			return err
		}
		r.logPlanned(ctx, takeover, plan, chunks, start, read)
		r.appliedWithoutChunks(ctx)
		return nil
	}
	// Pass 2 reads the upload again from now on, beside the index's
	// completion and StartApplying (on S3, the index's last part and
	// CompleteMultipartUpload); no chunk is sent before both are done
	// (I5: the index exists before any chunk is sent).
	type opening struct {
		started bool
		err     error
		planned time.Time
	}
	gate := make(chan opening, 1)
	go func() {
		var o opening
		if o.err = r.writeIndex(ctx); o.err == nil {
			o.started, o.err = r.startApplying(ctx, takeover, plan, counts, chunks)
		}
		if o.started && o.err == nil {
			r.logPlanned(ctx, takeover, plan, chunks, start, read)
		}
		o.planned = time.Now()
		gate <- o
	}()
	var open *opening
	opened := func() opening {
		if open == nil {
			o := <-gate
			open = &o
		}
		return *open
	}
	defer opened() // before the index is aborted (deferred above)
	ap := r.newAppliedPlan(plan.Ops(), takeover.Baseline, len(takeover.Stopped) > 0)
	sent, err := r.sendChunks(ctx, plan, lines, chunkPlan, ap, func() bool {
		o := opened()
		return o.started && o.err == nil
	})
	if o := opened(); o.err != nil || !o.started {
		return o.err // superseded before sending chunks (it ended so), or failed
	}
	if err != nil {
		return err
	}
	r.log.InfoContext(ctx, "diff done", "chunks_sent", sent, "chunks", chunks, "elapsed_ms", time.Since(start).Milliseconds(),
		"send_ms", time.Since(opened().planned).Milliseconds())
	return nil
}

// logPlanned logs that the generation's chunks are planned and recorded.
func (r *run) logPlanned(ctx context.Context, takeover catalog.DiffDecision, plan catalog.Plan, chunks int, start, read time.Time) {
	planned := time.Now()
	r.log.InfoContext(ctx, "diff planned", "products", r.products, "baseline", takeover.Baseline,
		"stopped", takeover.Stopped, "inserted", plan.Inserted, "updated", plan.Updated, "deleted", plan.Deleted,
		"unchanged", plan.Unchanged, "repaired", plan.Repaired, "chunks", chunks, "elapsed_ms", planned.Sub(start).Milliseconds(),
		"read_ms", read.Sub(start).Milliseconds(), "plan_ms", planned.Sub(read).Milliseconds())
}

// startApplying records that the generation applies in chunks (its
// counts and chunk total), counts its rows and retires what it took over;
// false when it was superseded meanwhile (it ended so).
func (r *run) startApplying(ctx context.Context, takeover catalog.DiffDecision, plan catalog.Plan, counts catalog.Counts, chunks int) (bool, error) {
	if err := r.store.StartApplying(ctx, r.job.RetailerID, r.job.Generation, counts, chunks); err != nil {
		if errors.Is(err, catalog.ErrSuperseded) {
			r.log.InfoContext(ctx, "superseded before sending chunks")
			r.ended(ctx, catalog.StateSuperseded)
			return false, nil
		}
		return false, err
	}
	r.h.Metrics.Emit(ctx, r.fields(), metrics.Count(metrics.RowsInserted, plan.Inserted), metrics.Count(metrics.RowsUpdated, plan.Updated),
		metrics.Count(metrics.RowsDeleted, plan.Deleted), metrics.Count(metrics.RowsUnchanged, plan.Unchanged))
	r.retire(ctx, takeover)
	return true, nil
}

// appliedWithoutChunks ends a generation that changes nothing: StartApplying
// with zero chunks made it applied.
func (r *run) appliedWithoutChunks(ctx context.Context) {
	var took []metrics.Value
	if !r.job.EventTime.IsZero() {
		took = append(took, metrics.Duration(metrics.PutToAppliedSeconds, time.Since(r.job.EventTime)))
	}
	r.ended(ctx, catalog.StateApplied, took...)
}

// countsOf is what the generation records of a plan: its counts and the
// snapshot's attribute names.
func (r *run) countsOf(plan catalog.Plan) catalog.Counts {
	return catalog.Counts{Inserted: plan.Inserted, Updated: plan.Updated, Deleted: plan.Deleted,
		Unchanged: plan.Unchanged, Products: r.products, AttributeNames: r.names, Bytes: r.size}
}

// hold decides the hold rule (I8) against the baseline of d alone.
func (r *run) hold(ctx context.Context, d catalog.DiffDecision) (bool, error) {
	// Merged even against no baseline, or for an empty snapshot: a held
	// upload's plan lists what it would change (the walk is not done
	// twice: the take-over's merge reuses it).
	plan, err := r.merge(ctx, catalog.DiffDecision{Baseline: d.Baseline})
	if err != nil {
		return false, err
	}
	return r.holdPlan(ctx, plan, d, r.fullPlan(plan))
}

// fullPlan writes a full snapshot's plan (writePlan) for holdPlan.
func (r *run) fullPlan(plan catalog.Plan) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) { return r.writePlan(ctx, plan) }
}

// holdPlan holds the snapshot when the hold rules say so, against the
// baseline of d: empty_snapshot, mass_delete, attribute_dropped (an
// attribute removed or blanked, dropInput), mass_update (the attribute
// names differ from the baseline's and over the threshold would be updated).
// A held generation's plan is written first by writePlan (the pages it
// wrote): a full snapshot's reads the upload again (fullPlan), a delta's
// is its changes (writeDeltaPlan), whose lines carry no plan.
func (r *run) holdPlan(ctx context.Context, plan catalog.Plan, d catalog.DiffDecision, writePlan func(context.Context) (int, error)) (bool, error) {
	code, msg, err := r.holdReason(ctx, plan, d)
	if err != nil || code == "" {
		return false, err
	}
	r.log.InfoContext(ctx, "snapshot held for confirmation", "reason", code, "deleted", plan.Deleted, "updated", plan.Updated)
	// Its plan first, so that a held status always has one (DESIGN 13).
	pages, err := writePlan(ctx)
	if err != nil {
		return true, err
	}
	if pages >= 0 { // else over the plan's bounds: none is kept (plan_unavailable)
		if err := r.store.RecordPlan(ctx, r.job.RetailerID, r.job.Generation, pages, d.Baseline); err != nil {
			return true, err
		}
	}
	undo, err := r.store.Hold(ctx, r.job.RetailerID, r.job.Generation, code, msg, r.countsOf(plan))
	if err != nil {
		return true, err
	}
	r.ended(ctx, catalog.StateHeld)
	r.startUndo(ctx, undo)
	return true, nil
}

// holdReason is the hold the rules give plan against d's baseline (I8), or
// "": a real upload is held for it, a dry run names it.
func (r *run) holdReason(ctx context.Context, plan catalog.Plan, d catalog.DiffDecision) (code, message string, err error) {
	drop, err := r.dropInput(ctx, plan, d)
	if err != nil {
		return "", "", err
	}
	code, message = r.retailer.Hold.HoldReason(catalog.HoldInput{
		BaselineProducts: d.BaselineProducts, NewProducts: r.products, Deletes: plan.Deleted, Updates: plan.Updated,
		BaselineNames: d.BaselineNames, NewNames: r.names, Drop: drop,
	})
	return code, message, nil
}

// readSnapshot is pass 1: every row's id, hash and line, sorted by id, with
// the whole-snapshot checks (I7). rejected is true when the snapshot was rejected.
func (r *run) readSnapshot(ctx context.Context) (rejected bool, err error) {
	obj, err := r.openUpload(ctx, r.decision.ETag)
	if err != nil {
		return false, err
	}
	defer obj.Body.Close()
	r.etag, r.size = obj.ETag, obj.Size
	if r.decision.ETag == "" && r.decision.ObjectKey != "" && r.local == "" {
		// The first read of this generation: pin what it reads.
		pinned, err := r.store.PinUpload(ctx, r.job.RetailerID, r.job.Generation, obj.ETag)
		if err != nil {
			return false, err
		}
		if pinned != obj.ETag {
			return false, &uploadGone{fmt.Errorf("upload %s is %s, but %s was read first: %w", r.job.Key, obj.ETag, pinned, blob.ErrChanged)}
		}
	}
	if r.h.cfg.MaxUploadBytes > 0 && obj.Size > r.h.cfg.MaxUploadBytes {
		return true, r.reject(ctx, &snapshot.Error{Code: snapshot.CodeFileTooLarge,
			Message: fmt.Sprintf("the upload has %d bytes, over the limit of %d", obj.Size, r.h.cfg.MaxUploadBytes)})
	}
	rd, err := r.newReader(obj.Body)
	if err != nil {
		return r.rejectOrFail(ctx, err)
	}
	defer rd.Close()
	rd.SkipAttributes = true  // pass 1 keeps only ids and hashes
	rd.CountAttributes = true // and per-attribute counts (attribute_dropped)
	rd.Workers = r.h.cfg.Workers
	spill, err := newProblemSpill(r.h.cfg.SpillDir)
	if err != nil {
		return false, err
	}
	defer spill.Close()
	rd.AllProblems = spill // every problem, for the problems file (DESIGN 13)
	entries := extsort.NewSorter(extsort.SortOptions{MemoryBytes: r.h.cfg.SortMemoryBytes, TempDir: r.h.cfg.SpillDir,
		MaxDuplicates: snapshot.MaxListedProblems})
	sizes := catalog.NewRowSizes(r.h.limits())
	keep := false
	defer func() {
		if !keep {
			entries.Close()
		}
	}()
	var n int
	var stored, maxStored int64 = 0, r.maxStoredBytes()
	for {
		row, err := rd.Scan()
		if err == io.EOF {
			break
		}
		if err != nil {
			// Apart, so that the errors.As target is not allocated for
			// every row.
			return r.readFailed(ctx, err, rd, entries, spill)
		}
		if stored += int64(len(row.ID) + row.AttributesLen); stored > maxStored {
			return true, r.reject(ctx, &snapshot.Error{Code: snapshot.CodeFileTooLarge, Line: row.Line,
				Message: fmt.Sprintf("the catalog of this file takes over %d bytes stored (ids and attributes as canonical JSON, "+
					"every column name in every product), the limit: the file is read no further", maxStored)})
		}
		entries.Add(row.ID, row.Hash, int32(row.Line))
		sizes.Add(int32(row.Line), message.UpsertLineLen(row.ID, row.AttributesLen))
		n++
		if n&0xFFFF == 0 && ctx.Err() != nil {
			return false, fmt.Errorf("read snapshot: %w", ctx.Err()) // over its budget
		}
		if n%r.h.cfg.SupersedeCheckRows == 0 && !r.decision.DryRun { // a preview stops for nothing
			r.log.InfoContext(ctx, "reading snapshot", "rows", n, "bytes", rd.BytesRead())
			// Before taking over, a newer upload that has merely arrived
			// stops this one (its state says superseded); the fence
			// (IsLatest) covers the rest.
			if newer, err := r.store.NewerArrival(ctx, r.job.RetailerID, r.job.Generation); err != nil {
				return false, err
			} else if newer > 0 {
				r.log.InfoContext(ctx, "a newer upload arrived while reading; stopping", "newer", newer)
				return false, nil
			}
			if latest, err := r.store.IsLatest(ctx, r.job.RetailerID, r.job.Generation); err != nil {
				return false, err
			} else if !latest {
				r.log.InfoContext(ctx, "superseded while reading; stopping")
				return false, nil
			}
		}
	}
	if err := entries.Finish(); errors.Is(err, extsort.ErrSortSpaceFull) {
		// The same snapshot would fill the same space again: a clear
		// rejection rather than retries.
		return true, r.reject(ctx, &snapshot.Error{Code: snapshot.CodeFileTooLarge, Message: fmt.Sprintf(
			"the snapshot's %d products need more temporary space to sort than the diff has (%v)", entries.Len(), err)})
	} else if err != nil {
		return false, fmt.Errorf("sort snapshot entries: %w", err)
	}
	if dups := duplicateProblems(entries); len(dups) > 0 {
		_, total := entries.Duplicates()
		r.problems = readerProblems(nil, dups, total > int64(len(dups)))
		return true, r.reject(ctx, snapshot.Reject(dups, total > int64(len(dups))))
	}
	if err := r.writeProblems(ctx, noProblems); err != nil {
		return false, err
	}
	if spilled, times := entries.Spilled(); times > 0 {
		r.log.InfoContext(ctx, "sorted runs spilled to disk", "bytes", spilled, "times", times)
	}
	r.entries, r.products, r.sizes, keep = entries, entries.Len(), sizes, true
	r.names = rd.AttributeNames()
	r.counts = rd.AttributeCounts()
	// What pass 1 allocated besides the sorted runs (the parser's batches,
	// the sorter's) is garbage now; collecting it here, while the live
	// heap is small and holds few pointers (the runs are byte blocks: a
	// few ms), keeps the heap of the merge and pass 2 near twice the runs
	// instead of twice what pass 1 had live at its last collection.
	runtime.GC()
	return false, nil
}

// readFailed ends pass 1 on the reader's error err: a rejection of the
// snapshot (true), or a failure worth a retry.
func (r *run) readFailed(ctx context.Context, err error, rd *snapshot.Reader, entries *extsort.Sorter, spill *problemSpill) (bool, error) {
	var se *snapshot.Error
	if !errors.As(err, &se) {
		return r.rejectOrFail(ctx, err)
	}
	// The rows read so far may repeat ids too: their duplicates join the
	// list, so that one round fixes the file. Not when the file is refused
	// for its size (the product or inflate limit: it was read no further):
	// sorting what a gzip bomb held would take the diff's budget, to no use.
	var dups []snapshot.Problem
	var total int64
	if !sizeLimit(se) && !spill.sizeLimit && entries.Finish() == nil {
		dups = duplicateProblems(entries)
		_, total = entries.Duplicates()
		se = snapshot.Merge(se, dups...)
		se.More = se.More || total > int64(len(dups))
	}
	r.problems = readerProblems(spill, dups, rd.ProblemsCut() || total > int64(len(dups)))
	return true, r.reject(ctx, se)
}

// sizeLimit reports whether the reader stopped at a limit of the whole
// file (too_many_products, file_too_large).
func sizeLimit(se *snapshot.Error) bool {
	for _, p := range se.List() {
		if p.Code == snapshot.CodeTooManyProducts || p.Code == snapshot.CodeFileTooLarge {
			return true
		}
	}
	return false
}

// duplicateProblems are the duplicate product_ids the sorter found, as
// problems (each naming both lines).
func duplicateProblems(entries *extsort.Sorter) []snapshot.Problem {
	dups, _ := entries.Duplicates()
	out := make([]snapshot.Problem, len(dups))
	for i, d := range dups {
		out[i] = snapshot.DuplicateProblem(d.ID, d.First, d.Second)
	}
	return out
}

// maxStoredBytes bounds what one snapshot may store: its products' ids and
// canonical attributes together are at most the inflate limit
// (Config.MaxInflatedBytes), as its decompressed bytes are. A CSV's column
// names are stored in every product, so a small file of long names and
// empty cells would otherwise store thousands of times its size.
func (r *run) maxStoredBytes() int64 {
	return snapshot.Limits{MaxFileBytes: r.h.cfg.MaxInflatedBytes}.WithDefaults().MaxFileBytes
}

// newReader opens a snapshot stream. The decompressed size and the
// products are bounded too (Config.MaxInflatedBytes, MaxProducts), so a
// gzip bomb is rejected as soon as it passes them, not read.
func (r *run) newReader(body io.Reader) (*snapshot.Reader, error) {
	format, err := snapshot.ParseFormat(r.decision.Format)
	if err != nil {
		return nil, err
	}
	limits := snapshot.Limits{MaxRowBytes: r.h.cfg.MaxRowBytes, MaxFileBytes: r.h.cfg.MaxInflatedBytes, MaxProducts: r.h.cfg.MaxProducts}
	return snapshot.NewReader(body, format, limits)
}

func (r *run) rejectOrFail(ctx context.Context, err error) (bool, error) {
	var se *snapshot.Error
	if errors.As(err, &se) {
		return true, r.reject(ctx, se)
	}
	return false, fmt.Errorf("read snapshot: %w", err)
}

func (r *run) reject(ctx context.Context, se *snapshot.Error) error {
	problems := se.List() // messages bounded (I12), also that of an Error built here
	r.log.InfoContext(ctx, "snapshot rejected", "code", se.Code, "line", se.Line, "reason", problems[0].Message,
		"problems", len(problems), "more_problems", se.More)
	content := r.problems
	if content == nil {
		content = listedProblems(se)
	}
	if err := r.writeProblems(context.WithoutCancel(ctx), content); err != nil {
		return err
	}
	rej := catalog.Rejection{Code: se.Code, Message: problems[0].Message, Line: se.Line, More: se.More,
		Problems: make([]catalog.Problem, len(problems))}
	for i, p := range problems {
		rej.Problems[i] = catalog.Problem{Code: p.Code, Line: p.Line, Message: p.Message}
	}
	// Recorded even when the run is over its budget: the rejection is what
	// the run found.
	undo, err := r.store.Reject(context.WithoutCancel(ctx), r.job.RetailerID, r.job.Generation, rej)
	if err != nil {
		return err
	}
	if undo.Rejected {
		r.ended(ctx, catalog.StateRejected, metrics.Count(metrics.Rejections, 1).By("Code", se.Code))
	}
	r.startUndo(ctx, undo)
	return nil
}

// merge compares with the baseline and the stopped generations' indexes,
// and writes the new generation's index in the same walk. A merge against
// the same baseline without stopped generations is not done twice.
func (r *run) merge(ctx context.Context, d catalog.DiffDecision) (catalog.Plan, error) {
	if r.plan != nil && r.planBase == d.Baseline && len(d.Stopped) == 0 {
		return *r.plan, nil
	}
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	open := func(gen int64) (catalog.RefIterator, error) {
		obj, err := r.h.blobs.Open(ctx, keys.Index(r.job.RetailerID, gen), "")
		if err != nil {
			return nil, fmt.Errorf("open index of generation %d: %w", gen, err)
		}
		closers = append(closers, obj.Body)
		return catalog.NewIndexReader(obj.Body), nil
	}
	var baseline catalog.RefIterator
	if d.Baseline > 0 {
		it, err := open(d.Baseline)
		if err != nil {
			return catalog.Plan{}, err
		}
		baseline = it
	}
	var stopped []catalog.RefIterator
	for _, g := range d.Stopped {
		it, err := open(g)
		if err != nil {
			return catalog.Plan{}, err
		}
		stopped = append(stopped, it)
	}
	// The index is written beside the walk, on the other core: it is the
	// new entries alone, which the sorter copies from its runs.
	var indexDone chan error
	if !r.indexed && !r.decision.DryRun { // a preview writes no index
		r.abortIndex(ctx) // a walk that failed half way
		w, err := r.h.blobs.Create(ctx, keys.Index(r.job.RetailerID, r.job.Generation))
		if err != nil {
			return catalog.Plan{}, fmt.Errorf("write index: %w", err)
		}
		r.index = w
		indexDone = make(chan error, 1)
		go func() {
			_, err := r.entries.WriteIndex(w)
			indexDone <- err
		}()
	}
	plan, err := catalog.MergeRefs(r.entries.Iter(), baseline, stopped, nil)
	if indexDone != nil {
		if ierr := <-indexDone; ierr != nil && err == nil {
			return plan, fmt.Errorf("write index: %w", ierr)
		}
		if err == nil {
			r.indexed = true
		}
	}
	if err != nil {
		return plan, fmt.Errorf("merge: %w", err)
	}
	if len(d.Stopped) == 0 {
		r.plan, r.planBase = &plan, d.Baseline
	} else {
		r.plan = nil
	}
	return plan, nil
}

// retire tags what no diff reads again, for the bucket's lifecycle rules
// to expire: every index of the retailer older than the applied baseline
// (a later diff reads the baseline of its time, which is this one or
// newer, and the indexes of generations stopped after it), and every
// upload older than it but the one the baseline's content was read from
// (an undo reads it, I10: an upload is kept while it is the applied
// catalog's, and upload_retention_days after it was made otherwise).
// Housekeeping: a failure is logged and retried by the next diff, never
// fails this one.
func (r *run) retire(ctx context.Context, takeover catalog.DiffDecision) {
	ret, ok := r.h.blobs.(IndexRetirer)
	baseline := takeover.Baseline
	if !ok || baseline <= 1 {
		return
	}
	for _, kind := range []struct {
		what   string
		prefix string
		gen    func(retailerID, key string) (int64, bool)
	}{
		{"indexes", keys.IndexPrefix(r.job.RetailerID), keys.IndexGeneration},
		{"uploads", keys.UploadPrefix(r.job.RetailerID), keys.UploadGeneration},
	} {
		found, err := ret.List(ctx, kind.prefix)
		if err != nil {
			r.log.WarnContext(ctx, "list "+kind.what+" to retire", "err", err)
			return
		}
		retired := 0
		for _, key := range found {
			gen, ok := kind.gen(r.job.RetailerID, key)
			if !ok || gen >= baseline || key == takeover.BaselineObjectKey || slices.Contains(takeover.BaselineKeys, key) {
				continue
			}
			if err := ret.Tag(ctx, key, keys.SupersededTagKey, keys.SupersededTagValue); err != nil {
				r.log.WarnContext(ctx, "retire "+kind.what, "key", key, "err", err)
				return
			}
			retired++
		}
		if retired > 0 {
			r.log.InfoContext(ctx, kind.what+" retired", "older_than", baseline, kind.what, retired)
		}
	}
}

// writeIndex makes the new generation's index appear: it must exist before
// any chunk is sent, for the next diff to repair what this one may write
// if it is stopped (I5).
func (r *run) writeIndex(ctx context.Context) error {
	if !r.indexed {
		r.plan = nil // walk again, writing the index
		if _, err := r.merge(ctx, catalog.DiffDecision{}); err != nil {
			return err
		}
	}
	w := r.index
	r.index = nil
	if err := w.Close(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

// abortIndex discards an index being written, if any.
func (r *run) abortIndex(ctx context.Context) {
	if r.index == nil {
		return
	}
	if err := r.index.Abort(); err != nil {
		r.log.WarnContext(ctx, "abort the index upload", "err", err)
	}
	r.index, r.indexed = nil, false
}

// limits are the chunk limits of the configuration.
func (h *Handler) limits() catalog.ChunkLimits {
	return catalog.ChunkLimits{Rows: h.cfg.ChunkRows, Bytes: h.cfg.ChunkBytes}
}

// sendChunks is pass 2: the changed rows (lines, ascending), read again in
// file order, then the deletes, in the chunks of chunkPlan (ops per chunk);
// before each chunk the generation must still be the latest (I4). Only
// the chunk being filled and the one being sent are held, and the plan ap
// records (nil: none). No chunk is sent before open returns, and none if
// it returns false.
func (r *run) sendChunks(ctx context.Context, plan catalog.Plan, lines []int32, chunkPlan []int, ap *appliedPlan, open func() bool) (int, error) {
	queueURL := r.h.cfg.SmallQueueURL
	if plan.Ops() >= r.h.cfg.LargeThreshold {
		queueURL = r.h.cfg.LargeQueueURL
	}
	c := r.newChunker(ctx, queueURL, chunkPlan, ap, open)
	defer c.wait()

	if len(lines) > 0 {
		// Only the upserted rows are parsed again: the others are skipped
		// by line, without parsing (the ETag guarantees the same bytes).
		r.entries.Close()
		r.entries = nil // the sorted entries are not needed any more
		obj, err := r.openUpload(ctx, r.etag)
		if err != nil {
			return c.wait(), err
		}
		defer obj.Body.Close()
		rd, err := r.newReader(obj.Body)
		if err != nil {
			return c.wait(), fmt.Errorf("reread snapshot: %w", err)
		}
		defer rd.Close()
		rd.Lines = lines
		rd.ReuseAttributes = true
		rd.Workers = r.h.cfg.Workers
		found := 0
		for {
			row, err := rd.Scan()
			if err == io.EOF {
				break
			}
			if err != nil {
				return c.wait(), fmt.Errorf("reread snapshot: %w", err)
			}
			found++
			if err := c.upsert(row.ID, row.Hash, row.Attributes); err != nil {
				return c.wait(), err
			}
			if c.halted() {
				break
			}
		}
		if found != len(lines) && !c.halted() {
			return c.wait(), fmt.Errorf("reread snapshot: found %d of %d rows to send: the upload changed while being read", found, len(lines))
		}
	}
	for _, id := range plan.Deletes {
		if c.halted() {
			break
		}
		if err := c.delete(id); err != nil {
			return c.wait(), err
		}
	}
	sent, stopped, err := c.finish()
	if err != nil {
		return sent, err
	}
	if stopped {
		r.log.InfoContext(ctx, "superseded while sending chunks; stopped", "chunks_sent", sent)
		return sent, nil
	}
	if sent != c.total {
		return sent, fmt.Errorf("sent %d chunks, planned %d: the upload changed while being read", sent, c.total)
	}
	return sent, nil
}

// chunker accumulates ops into chunk objects, as planned, and sends one
// message each. The chunks are sent by a goroutine of their own, one at a
// time and in order, while the caller fills the next one: the fence check,
// the plan's "from" reads and the writes of a chunk overlap the reading of
// the next. A chunk is sent whole or not at all; once one is not (the
// generation is no longer the latest, or a send failed) no later one is.
type chunker struct {
	r        *run
	queueURL string
	total    int
	plan     []int        // ops of each chunk
	applied  *appliedPlan // the plan recorded as the chunks go (nil: none)

	// The chunk being filled, the caller's.
	filling int // its seq
	rows    int
	buf     []byte
	pending []pendingOp // its ops, for the applied plan

	out    chan filledChunk
	free   chan []byte // chunk buffers the sender is done with
	done   chan struct{}
	halt   atomic.Bool // the sender sends nothing more
	closed bool

	// The sender's, read after done.
	sent    int
	stopped bool // superseded (I4)
	err     error
}

// filledChunk is a chunk handed to the sender.
type filledChunk struct {
	seq, rows int
	buf       []byte
	ops       []pendingOp
}

// newChunker starts the sender of the chunks of chunkPlan; wait (or
// finish) ends it. The sender sends nothing before open (nil: none)
// returns, and nothing if it returns false.
func (r *run) newChunker(ctx context.Context, queueURL string, chunkPlan []int, ap *appliedPlan, open func() bool) *chunker {
	c := &chunker{r: r, queueURL: queueURL, total: len(chunkPlan), plan: chunkPlan, applied: ap,
		out: make(chan filledChunk), free: make(chan []byte, 2), done: make(chan struct{})}
	c.free <- nil // the second buffer
	go c.sender(ctx, open)
	return c
}

func (c *chunker) sender(ctx context.Context, open func() bool) {
	defer close(c.done)
	if open != nil && !open() {
		c.halt.Store(true)
	}
	for ch := range c.out {
		if !c.halt.Load() {
			if err := c.send(ctx, ch); err != nil {
				c.err = err
				c.halt.Store(true)
			}
		}
		c.free <- ch.buf[:0] // never blocks: two buffers at most
	}
}

// halted reports that no more chunks will be sent (superseded or failed):
// the caller may stop reading.
func (c *chunker) halted() bool { return c.halt.Load() }

// upsert appends an upsert op (attrs canonical) to the chunk being filled.
func (c *chunker) upsert(id []byte, hash catalog.Hash, attrs []byte) error {
	c.buf = message.AppendUpsertLine(c.buf, id, hash, attrs)
	if c.applied.keeps() {
		c.pending = append(c.pending, pendingOp{id: string(id), attrs: slices.Clone(attrs)})
	}
	return c.added()
}

// delete appends a delete op to the chunk being filled.
func (c *chunker) delete(id string) error {
	c.buf = message.AppendDeleteLine(c.buf, id)
	if c.applied.keeps() {
		c.pending = append(c.pending, pendingOp{id: id})
	}
	return c.added()
}

// added counts the op just appended to c.buf and hands a full chunk to the
// sender.
func (c *chunker) added() error {
	c.rows++
	if c.filling >= len(c.plan) {
		return fmt.Errorf("more ops than the %d planned chunks hold: the upload changed while being read", len(c.plan))
	}
	if c.rows >= c.plan[c.filling] {
		c.handOff()
	}
	return nil
}

// handOff gives the chunk being filled to the sender, and waits for a free
// buffer: the sender's previous chunk sent.
func (c *chunker) handOff() {
	if c.rows == 0 || c.halt.Load() {
		return
	}
	c.out <- filledChunk{seq: c.filling, rows: c.rows, buf: c.buf, ops: c.pending}
	c.filling++
	c.rows, c.pending = 0, nil
	c.buf = <-c.free
}

// finish sends the last chunk and waits for the sender: the chunks sent,
// whether it stopped because the generation was superseded, and the first
// error of a send.
func (c *chunker) finish() (sent int, stopped bool, err error) {
	c.handOff()
	c.wait()
	return c.sent, c.stopped, c.err
}

// wait ends the sender without sending the chunk being filled, and returns
// the chunks sent.
func (c *chunker) wait() int {
	if !c.closed {
		c.closed = true
		close(c.out)
		<-c.done
	}
	return c.sent
}

// send sends one chunk: the fence check (I4), the applied plan's "from"
// (and its pages before the last chunk), the object, the message.
func (c *chunker) send(ctx context.Context, ch filledChunk) error {
	r := c.r
	latest, err := r.store.IsLatest(ctx, r.job.RetailerID, r.job.Generation)
	if err != nil {
		return err
	}
	if !latest {
		c.stopped = true
		c.halt.Store(true)
		return nil
	}
	// The plan's "from" is read before the chunk can change it.
	if err := c.applied.beforeSend(ctx, ch.ops); err != nil {
		return err
	}
	key := keys.Chunk(r.job.RetailerID, r.job.Generation, ch.seq)
	if ch.seq+1 == c.total && c.applied.keeps() {
		// The plan is whole: recorded before the last chunk can make the
		// generation applied (its message, below), so that an applied
		// status always comes with its plan (the route would answer
		// plan_unavailable meanwhile). The chunk's object is written
		// meanwhile: nothing reads it before its message.
		put := make(chan error, 1)
		go func() { put <- r.h.blobs.Put(ctx, key, ch.buf) }()
		c.applied.write(ctx)
		if err := <-put; err != nil {
			return fmt.Errorf("write chunk %d: %w", ch.seq, err)
		}
	} else if err := r.h.blobs.Put(ctx, key, ch.buf); err != nil {
		return fmt.Errorf("write chunk %d: %w", ch.seq, err)
	}
	sum := sha256.Sum256(ch.buf)
	msg := message.ChunkMessage{RetailerID: r.job.RetailerID, Generation: r.job.Generation, Seq: ch.seq,
		Total: c.total, Rows: ch.rows, Key: key, SHA256: hex.EncodeToString(sum[:])}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if err := r.h.queue.Send(ctx, c.queueURL, string(body),
		message.MessageGroupID(r.job.RetailerID, ch.seq, r.h.cfg.InflightCap),
		message.MessageDeduplicationID(r.job.RetailerID, r.job.Generation, ch.seq)); err != nil {
		return fmt.Errorf("send chunk %d: %w", ch.seq, err)
	}
	if (ch.seq+1)%20 == 0 || ch.seq+1 == c.total {
		r.log.InfoContext(ctx, "chunks sent", "sent", ch.seq+1, "total", c.total)
	}
	c.sent++
	return nil
}
