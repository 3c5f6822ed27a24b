// Package apply is the apply function: started by batches of chunk messages
// from a FIFO queue, it writes each chunk's rows to the retailer's shard in
// one fenced transaction, counting the chunk exactly once.
package apply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// Blobs reads chunk objects. s3blob.Store and inmem.Blobs implement it.
type Blobs interface {
	// Open streams an object (ifMatch "": any version); blob.ErrNotFound
	// when it does not exist.
	Open(ctx context.Context, key, ifMatch string) (blob.Object, error)
}

// Store is what the apply needs of the databases, keyed by retailer.
// pgstore.Stores implements it.
type Store interface {
	// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
	Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error)
	// IsLatest reports whether gen is still the retailer's newest arrived generation (I4).
	IsLatest(ctx context.Context, retailerID string, gen int64) (bool, error)
	// ChunkCounted reports whether a transaction that wrote chunk seq of gen has committed.
	ChunkCounted(ctx context.Context, retailerID string, gen int64, seq int) (bool, error)
	// ApplyChunk writes the chunk of m (whose ops are ops) in one fenced
	// transaction, counts it exactly once (I2, I3, I4, I6) and, in the same
	// transaction, records its change event (DESIGN 8); a superseded or
	// counted chunk writes nothing and says so in the result.
	ApplyChunk(ctx context.Context, m message.ChunkMessage, ops []message.ChunkOp) (catalog.ApplyResult, error)
	// UpdateDirectory brings the product directory in line with a committed
	// chunk; fenced by generation and idempotent.
	UpdateDirectory(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp) error
	// Generation returns one generation's status (its times, for the
	// PUT-to-applied metric).
	Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error)
	// Reject ends a generation that cannot be finished (apply_failed) and,
	// when the catalog would keep a mix, reserves the undo (I10), whose
	// diff job the caller sends.
	Reject(ctx context.Context, retailerID string, gen int64, rej catalog.Rejection) (catalog.Undo, error)
}

// DiffJobSender sends a generation's diff job (message.DiffJobs implements
// it): the apply sends the undo's after a chunk the database refuses (I10).
type DiffJobSender interface {
	SendDiffJob(ctx context.Context, retailerID string, gen int64) error
}

// DefaultMaxAttempts is how many times a chunk the database refuses for
// its content is tried before its generation ends apply_failed: fewer
// than the apply queues' receives before their dead-letter queues (5).
const DefaultMaxAttempts = 3

// Flusher publishes a retailer's pending change events at once: the
// relay's fast path (relay.Relay implements it). Best effort: what it
// misses, the relay's sweeper publishes.
type Flusher interface {
	Flush(ctx context.Context, retailerID string)
}

// Handler applies chunks.
type Handler struct {
	store Store
	blobs Blobs
	log   *slog.Logger
	// Observe, when set, is called around each chunk's apply (tests count
	// chunks in flight with it); it is nil in production.
	Observe func(msg message.ChunkMessage, start bool)
	// Events, when set, publishes the change events of each chunk right
	// after it commits, in the background of the invocation while its next
	// message applies (coalesced per retailer); the invocation waits for
	// it before it returns. Nil leaves them to the sweeper.
	Events Flusher
	// Metrics records chunks applied, rows written, fenced writes refused
	// and each generation's PUT-to-applied time (nil: none).
	Metrics *metrics.Recorder
	// MaxAttempts is how many receives of a chunk the database refuses for
	// its content (catalog.ErrRefused) are tried before its generation is
	// rejected apply_failed and undone (I10) [DefaultMaxAttempts].
	MaxAttempts int
	// Jobs sends the diff job of the undo such a rejection reserves; nil
	// leaves it to the stuck sweeper (within a minute or two).
	Jobs DiffJobSender
	// Refused, when set, brings a chunk the database refused back after its
	// schedule rather than after the queue's visibility timeout (six times
	// the function's timeout on AWS): the generation is decided within
	// minutes.
	Refused *RefusedRetry
}

// RefusedRetry is when a chunk the database refused for its content is
// tried again.
type RefusedRetry struct {
	Schedule retry.Schedule // CATALOG_BACKOFF_BASE, doubling
	Queue    retry.Visibility
	// QueueURLs are the apply queues; a message's is the one its event
	// source ARN names.
	QueueURLs []string
}

// delay brings msg back after the schedule's delay for its receive.
// Best effort: without it the message comes back after the visibility
// timeout.
func (r *RefusedRetry) delay(ctx context.Context, log *slog.Logger, msg lambdaevents.SQSMessage) {
	name := msg.EventSourceARN[strings.LastIndex(msg.EventSourceARN, ":")+1:]
	for _, url := range r.QueueURLs {
		if name == "" || !strings.HasSuffix(url, "/"+name) {
			continue
		}
		d := r.Schedule.Delay(retry.ReceiveCount(msg))
		if err := r.Queue.Delay(context.WithoutCancel(ctx), url, msg.ReceiptHandle, d); err != nil {
			log.WarnContext(ctx, "delay a refused chunk; it comes back after the visibility timeout", "message_id", msg.MessageId, "err", err)
		}
		return
	}
}

// New builds the handler.
func New(store Store, blobs Blobs, log *slog.Logger) *Handler {
	return &Handler{store: store, blobs: blobs, log: log}
}

// HandleSQS is the Lambda entry. Messages are applied in order. A message
// that fails is reported, and so is every later message of the batch in the
// same FIFO group (MessageGroupId), unread, so that order within a group
// holds; the other groups of the batch (other retailers, or other groups
// of the same retailer) go on, and what succeeded is not redone. The
// events of each chunk are published (Events) while the next one applies;
// HandleSQS returns once they are, or flushMargin before ctx's deadline,
// with nothing left running.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	var resp lambdaevents.SQSEventResponse
	var flush *backgroundFlush // the fast path, right after each chunk commits
	if h.Events != nil {
		flush = newBackgroundFlush(ctx, h.Events)
		defer flush.wait(ctx)
	}
	var failedGroups map[string]bool
	for _, msg := range ev.Records {
		group := msg.Attributes["MessageGroupId"] // "" without one: one group
		if failedGroups[group] {
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			continue
		}
		m, err := h.handleMessage(ctx, msg)
		if err != nil {
			h.log.ErrorContext(ctx, "apply failed", "retailer_id", m.RetailerID, "generation", m.Generation, "seq", m.Seq,
				"message_id", msg.MessageId, "message_group_id", group, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			if errors.Is(err, catalog.ErrRefused) && h.Refused != nil {
				h.Refused.delay(ctx, h.log, msg)
			}
			if failedGroups == nil {
				failedGroups = map[string]bool{}
			}
			failedGroups[group] = true
			continue
		}
		if flush != nil {
			flush.add(m.RetailerID)
		}
	}
	return resp, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg lambdaevents.SQSMessage) (message.ChunkMessage, error) {
	var m message.ChunkMessage
	if err := json.Unmarshal([]byte(msg.Body), &m); err != nil {
		return message.ChunkMessage{}, fmt.Errorf("message %s is not a chunk message: %w", msg.MessageId, err)
	}
	attempt, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
	err := h.Apply(ctx, m)
	if errors.Is(err, catalog.ErrRefused) && attempt >= h.maxAttempts() {
		return m, h.refused(ctx, m, attempt, err)
	}
	return m, err
}

func (h *Handler) maxAttempts() int {
	if h.MaxAttempts > 0 {
		return h.MaxAttempts
	}
	return DefaultMaxAttempts
}

// refused ends the generation of a chunk the database refused on each of
// its attempts: rejected apply_failed, and the catalog returned to the last
// applied generation by the undo the rejection reserves (I10). The chunk's
// message is then done with.
func (h *Handler) refused(ctx context.Context, m message.ChunkMessage, attempt int, cause error) error {
	log := h.log.With("retailer_id", m.RetailerID, "generation", m.Generation, "seq", m.Seq)
	undo, err := h.store.Reject(ctx, m.RetailerID, m.Generation, catalog.Rejection{Code: catalog.CodeApplyFailed,
		Message: fmt.Sprintf("chunk %d of %d was refused by the database on each of %d tries: %v", m.Seq+1, m.Total, attempt, dbReason(cause))})
	if err != nil {
		return fmt.Errorf("reject after a refused chunk: %w", err)
	}
	if undo.Rejected {
		defer h.startWaitingDelta(ctx, m)
		log.ErrorContext(ctx, "generation rejected: the database refuses one of its chunks", "code", catalog.CodeApplyFailed,
			"attempts", attempt, "err", cause)
		h.Metrics.Emit(ctx, fields(m), metrics.Count(metrics.Uploads, 1).By("State", string(catalog.StateRejected)),
			metrics.Count(metrics.Rejections, 1).By("Code", catalog.CodeApplyFailed),
			metrics.Count(metrics.GenerationsFailed, 1).By("Code", catalog.CodeApplyFailed))
	}
	if undo.Generation > 0 {
		log.WarnContext(ctx, "the catalog is returned to the last applied generation", "undo_generation", undo.Generation,
			"source_generation", undo.Source)
		if h.Jobs != nil {
			if err := h.Jobs.SendDiffJob(context.WithoutCancel(ctx), m.RetailerID, undo.Generation); err != nil {
				log.WarnContext(ctx, "send the undo's diff job; the stuck sweeper will", "undo_generation", undo.Generation, "err", err)
			}
		}
	}
	return nil
}

// dbReason is what the database said of a refused write: the error's text
// after the wrapping of the layers in between.
func dbReason(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, catalog.ErrRefused.Error()+": "); ok {
		return after
	}
	return msg
}

// Apply applies one chunk. Superseded and already-applied chunks are
// acknowledged without writing.
func (h *Handler) Apply(ctx context.Context, m message.ChunkMessage) error {
	if h.Observe != nil {
		h.Observe(m, true)
		defer h.Observe(m, false)
	}
	log := h.log.With("retailer_id", m.RetailerID, "generation", m.Generation, "seq", m.Seq)
	_, err := h.store.Retailer(ctx, m.RetailerID)
	if errors.Is(err, catalog.ErrNotFound) {
		log.WarnContext(ctx, "chunk of an unknown retailer dropped")
		return nil
	}
	if err != nil {
		return err
	}
	metering.For(ctx, m.RetailerID)
	// Cheap check first (I4): a superseded chunk is not even read.
	latest, err := h.store.IsLatest(ctx, m.RetailerID, m.Generation)
	if err != nil {
		return err
	}
	if !latest {
		// An earlier delivery may have committed this chunk and stopped before
		// its directory update: then the chunk is read again to finish that.
		counted, err := h.store.ChunkCounted(ctx, m.RetailerID, m.Generation, m.Seq)
		if err != nil {
			return err
		}
		if !counted {
			log.InfoContext(ctx, "chunk superseded; acknowledged without writing")
			h.Metrics.Emit(ctx, fields(m), metrics.Count(metrics.FencedWritesRefused, 1))
			return nil
		}
	}
	start := time.Now()
	ops, err := h.readChunk(ctx, m)
	if err != nil {
		return fmt.Errorf("apply chunk %d: %w", m.Seq, err)
	}
	res, err := h.store.ApplyChunk(ctx, m, ops)
	if err != nil {
		return err
	}
	if err := h.updateDirectory(ctx, m, ops, res.Outcome); err != nil {
		return err
	}
	switch res.Outcome {
	case catalog.ChunkSuperseded:
		log.InfoContext(ctx, "chunk superseded; nothing written")
		h.Metrics.Emit(ctx, fields(m), metrics.Count(metrics.FencedWritesRefused, 1))
	case catalog.ChunkDuplicate:
		log.InfoContext(ctx, "chunk applied before; nothing written")
	default:
		log.InfoContext(ctx, "chunk applied", "rows", len(ops), "written", res.Written,
			"generation_applied", res.GenerationApplied, "elapsed_ms", time.Since(start).Milliseconds())
		h.Metrics.Emit(ctx, fields(m), metrics.Count(metrics.ChunksApplied, 1), metrics.Count(metrics.RowsWritten, res.Written))
		if res.GenerationApplied {
			h.generationApplied(ctx, m)
			h.startWaitingDelta(ctx, m)
		}
	}
	return nil
}

func fields(m message.ChunkMessage) metrics.Fields {
	return metrics.Fields{RetailerID: m.RetailerID, Generation: m.Generation}
}

// generationApplied records an upload that reached applied: its final
// state and the time from its arrival to now.
func (h *Handler) generationApplied(ctx context.Context, m message.ChunkMessage) {
	if h.Metrics == nil {
		return
	}
	applied := []metrics.Value{metrics.Count(metrics.Uploads, 1).By("State", string(catalog.StateApplied))}
	if st, err := h.store.Generation(ctx, m.RetailerID, m.Generation); err == nil && st.ReceivedAt != nil && st.AppliedAt != nil {
		applied = append(applied, metrics.Duration(metrics.PutToAppliedSeconds, st.AppliedAt.Sub(*st.ReceivedAt)))
	}
	h.Metrics.Emit(ctx, fields(m), applied...)
}

// readChunk streams the chunk object through its checksum and the decoder:
// the object is never held whole beside its ops (a chunk is bounded in
// bytes by the diff, catalog.DefaultChunkBytes). An object that does not match
// its message's checksum is not applied.
func (h *Handler) readChunk(ctx context.Context, m message.ChunkMessage) ([]message.ChunkOp, error) {
	obj, err := h.blobs.Open(ctx, m.Key, "")
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	ops, err := message.DecodeChunk(obj.Body, m.SHA256)
	if err != nil {
		return nil, fmt.Errorf("object %s: %w", m.Key, err)
	}
	return ops, nil
}
