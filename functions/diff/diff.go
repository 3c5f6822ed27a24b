// Package diff is the diff function: started by S3 object-created events
// (through the diff-jobs queue), it reads a retailer's new snapshot, compares
// it with the applied baseline's index (and the indexes of stopped
// generations, I5), and fans out only the changed rows, as chunk objects and
// one FIFO message per chunk, to the apply queues.
package diff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/pgstore"
	"github.com/retailcatalog/catalog/functions/s3blob"
	"github.com/retailcatalog/catalog/functions/snapshot"
)

// Blobs reads uploads and indexes and writes indexes and chunks. s3blob.Store implements it.
type Blobs interface {
	// Open streams an object; with ifMatch, s3blob.ErrChanged when its ETag differs.
	Open(ctx context.Context, key, ifMatch string) (s3blob.Object, error)
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
}

// Queue sends chunk messages. sqsqueue.Sender implements it.
type Queue interface {
	// Send sends body to queueURL with a FIFO group and deduplication id.
	Send(ctx context.Context, queueURL, body, groupID, dedupID string) error
}

// Config is what the diff function is told at start.
type Config struct {
	ChunkRows      int // rows per chunk, at most 5,000
	InflightCap    int // chunks of one retailer in flight at once (I9): FIFO groups per retailer
	LargeThreshold int // changed rows from which a snapshot goes to the large queue
	SmallQueueURL  string
	LargeQueueURL  string
	MaxUploadBytes int64 // an upload over this is rejected (file_too_large)
	MaxRowBytes    int   // a row over this is rejected (row_too_large)
	// SupersedeCheckRows: while reading, check every this many rows that the
	// generation is still the latest.
	SupersedeCheckRows int
}

func (c *Config) defaults() {
	if c.ChunkRows <= 0 || c.ChunkRows > 5000 {
		c.ChunkRows = 5000
	}
	if c.InflightCap <= 0 {
		c.InflightCap = 20
	}
	if c.LargeThreshold <= 0 {
		c.LargeThreshold = 100000
	}
	if c.SupersedeCheckRows <= 0 {
		c.SupersedeCheckRows = 250000
	}
}

// Handler runs diffs.
type Handler struct {
	cfg    Config
	stores *pgstore.Stores
	blobs  Blobs
	queue  Queue
	log    *slog.Logger
}

// New builds the handler.
func New(cfg Config, stores *pgstore.Stores, blobs Blobs, queue Queue, log *slog.Logger) *Handler {
	cfg.defaults()
	return &Handler{cfg: cfg, stores: stores, blobs: blobs, queue: queue, log: log}
}

// HandleSQS is the Lambda entry: each diff-jobs message holds an S3 event
// notification. A message whose diff fails is reported for retry alone.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	var resp lambdaevents.SQSEventResponse
	for _, msg := range ev.Records {
		if err := h.handleMessage(ctx, msg); err != nil {
			h.log.ErrorContext(ctx, "diff job failed", "message_id", msg.MessageId, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
		}
	}
	return resp, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg lambdaevents.SQSMessage) error {
	var s3ev lambdaevents.S3Event
	if err := json.Unmarshal([]byte(msg.Body), &s3ev); err != nil {
		return fmt.Errorf("message %s is not an S3 event: %w", msg.MessageId, err)
	}
	jobs, err := events.DiffJobsFromS3Event(s3ev)
	if err != nil {
		return err
	}
	for _, job := range jobs {
		if err := h.Diff(ctx, job); err != nil {
			return err
		}
	}
	return nil
}

// Diff processes one upload. It returns an error only for failures worth a
// retry (storage, queue, database); a bad snapshot ends rejected, an
// unneeded one (duplicate event, superseded) ends quietly.
func (h *Handler) Diff(ctx context.Context, job events.DiffJob) error {
	log := h.log.With("retailer_id", job.RetailerID, "generation", job.Generation)
	retailer, shard, err := h.stores.ForRetailer(ctx, job.RetailerID)
	if errors.Is(err, catalog.ErrNotFound) {
		log.WarnContext(ctx, "upload for an unknown retailer ignored", "key", job.Key)
		return nil
	}
	if err != nil {
		return err
	}
	decision, err := shard.BeginDiff(ctx, job.RetailerID, job.Generation)
	if err != nil {
		return err
	}
	if !decision.Proceed {
		log.InfoContext(ctx, "diff skipped", "reason", decision.Reason)
		return nil
	}
	r := &run{h: h, log: log, shard: shard, retailer: retailer, job: job, decision: decision}
	return r.do(ctx)
}

// run is one diff of one generation.
type run struct {
	h        *Handler
	log      *slog.Logger
	shard    *pgstore.Shard
	retailer catalog.Retailer
	job      events.DiffJob
	decision pgstore.DiffDecision

	etag    string
	entries []catalog.IndexEntry
}

func (r *run) do(ctx context.Context) error {
	start := time.Now()
	rejected, err := r.readSnapshot(ctx)
	if err != nil || rejected {
		return err
	}
	if r.entries == nil {
		// superseded while reading
		return nil
	}
	// A held snapshot must not stop older work: decide the hold against the
	// baseline before taking over.
	if !r.decision.Confirmed {
		held, err := r.hold(ctx, r.decision)
		if err != nil || held {
			return err
		}
	}
	takeover, err := r.shard.TakeOver(ctx, r.job.RetailerID, r.job.Generation)
	if errors.Is(err, pgstore.ErrSuperseded) {
		r.log.InfoContext(ctx, "a newer generation took over first; stopping")
		return nil
	}
	if err != nil {
		return err
	}
	plan, err := r.merge(ctx, takeover)
	if err != nil {
		return err
	}
	counts := countsOf(plan, len(r.entries))
	if !r.decision.Confirmed && takeover.Baseline != r.decision.Baseline {
		// The baseline moved while we read: decide the hold again.
		if held, err := r.holdPlan(ctx, plan, takeover.BaselineProducts); err != nil || held {
			return err
		}
	}
	if err := r.writeIndex(ctx); err != nil {
		return err
	}
	ops := plan.Ops()
	chunks := (ops + r.h.cfg.ChunkRows - 1) / r.h.cfg.ChunkRows
	if err := r.shard.StartApplying(ctx, r.job.RetailerID, r.job.Generation, counts, chunks); err != nil {
		if errors.Is(err, pgstore.ErrSuperseded) {
			r.log.InfoContext(ctx, "superseded before sending chunks")
			return nil
		}
		return err
	}
	r.log.InfoContext(ctx, "diff planned", "products", len(r.entries), "baseline", takeover.Baseline,
		"stopped", takeover.Stopped, "inserted", plan.Inserted, "updated", plan.Updated, "deleted", plan.Deleted,
		"unchanged", plan.Unchanged, "repaired", plan.Repaired, "chunks", chunks, "elapsed_ms", time.Since(start).Milliseconds())
	if chunks == 0 {
		return nil
	}
	sent, err := r.sendChunks(ctx, plan, chunks)
	if err != nil {
		return err
	}
	r.log.InfoContext(ctx, "diff done", "chunks_sent", sent, "chunks", chunks, "elapsed_ms", time.Since(start).Milliseconds())
	return nil
}

func countsOf(plan catalog.Plan, products int) pgstore.Counts {
	return pgstore.Counts{Inserted: plan.Inserted, Updated: plan.Updated, Deleted: plan.Deleted,
		Unchanged: plan.Unchanged, Products: int64(products)}
}

// hold decides the hold rule (I8) against the baseline of d alone.
func (r *run) hold(ctx context.Context, d pgstore.DiffDecision) (bool, error) {
	if d.Baseline == 0 || len(r.entries) == 0 {
		return r.holdPlan(ctx, catalog.Plan{Inserted: int64(len(r.entries))}, d.BaselineProducts)
	}
	plan, err := r.merge(ctx, pgstore.DiffDecision{Baseline: d.Baseline})
	if err != nil {
		return false, err
	}
	return r.holdPlan(ctx, plan, d.BaselineProducts)
}

func (r *run) holdPlan(ctx context.Context, plan catalog.Plan, baselineProducts int64) (bool, error) {
	code, msg := r.retailer.Hold.HoldReason(baselineProducts, int64(len(r.entries)), plan.Deleted)
	if code == "" {
		return false, nil
	}
	r.log.InfoContext(ctx, "snapshot held for confirmation", "reason", code, "deleted", plan.Deleted)
	return true, r.shard.Hold(ctx, r.job.RetailerID, r.job.Generation, code, msg, countsOf(plan, len(r.entries)))
}

// readSnapshot is pass 1: every row's id, hash and line, sorted by id, with
// the whole-snapshot checks (I7). rejected is true when the snapshot was rejected.
func (r *run) readSnapshot(ctx context.Context) (rejected bool, err error) {
	obj, err := r.h.blobs.Open(ctx, r.job.Key, "")
	if errors.Is(err, s3blob.ErrNotFound) {
		return true, r.reject(ctx, &snapshot.Error{Code: "upload_missing", Message: "the uploaded object is gone"})
	}
	if err != nil {
		return false, err
	}
	defer obj.Body.Close()
	r.etag = obj.ETag
	if r.h.cfg.MaxUploadBytes > 0 && obj.Size > r.h.cfg.MaxUploadBytes {
		return true, r.reject(ctx, &snapshot.Error{Code: snapshot.CodeFileTooLarge,
			Message: fmt.Sprintf("the upload has %d bytes, over the limit of %d", obj.Size, r.h.cfg.MaxUploadBytes)})
	}
	rd, err := r.newReader(obj.Body)
	if err != nil {
		return r.rejectOrFail(ctx, err)
	}
	rd.ReuseAttributes = true // pass 1 keeps only ids and hashes
	entries := make([]catalog.IndexEntry, 0, 1024)
	for {
		row, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return r.rejectOrFail(ctx, err)
		}
		entries = append(entries, catalog.IndexEntry{ProductID: row.ProductID, Hash: row.Hash, Line: int32(row.Line)})
		if len(entries)%r.h.cfg.SupersedeCheckRows == 0 {
			r.log.InfoContext(ctx, "reading snapshot", "rows", len(entries), "bytes", rd.BytesRead())
			if latest, err := r.shard.IsLatest(ctx, r.job.RetailerID, r.job.Generation); err != nil {
				return false, err
			} else if !latest {
				r.log.InfoContext(ctx, "superseded while reading; stopping")
				return false, nil
			}
		}
	}
	slices.SortFunc(entries, func(a, b catalog.IndexEntry) int { return strings.Compare(a.ProductID, b.ProductID) })
	for i := 1; i < len(entries); i++ {
		if entries[i].ProductID == entries[i-1].ProductID {
			first, second := entries[i-1].Line, entries[i].Line
			if first > second {
				first, second = second, first
			}
			return true, r.reject(ctx, snapshot.DuplicateError(entries[i].ProductID, int(first), int(second)))
		}
	}
	r.entries = entries
	return false, nil
}

// newReader opens a snapshot stream. The decompressed size is bounded too
// (ten times the upload limit), so a gzip bomb is rejected, not read.
func (r *run) newReader(body io.Reader) (*snapshot.Reader, error) {
	format, err := snapshot.ParseFormat(r.decision.Format)
	if err != nil {
		return nil, err
	}
	limits := snapshot.Limits{MaxRowBytes: r.h.cfg.MaxRowBytes}
	if r.h.cfg.MaxUploadBytes > 0 {
		limits.MaxFileBytes = 10 * r.h.cfg.MaxUploadBytes
	}
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
	r.log.InfoContext(ctx, "snapshot rejected", "code", se.Code, "line", se.Line, "reason", se.Message)
	return r.shard.Reject(ctx, r.job.RetailerID, r.job.Generation, se.Code, se.Message, se.Line)
}

// merge compares with the baseline and the stopped generations' indexes.
func (r *run) merge(ctx context.Context, d pgstore.DiffDecision) (catalog.Plan, error) {
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	open := func(gen int64) (catalog.IndexIterator, error) {
		obj, err := r.h.blobs.Open(ctx, events.IndexKey(r.job.RetailerID, gen), "")
		if err != nil {
			return nil, fmt.Errorf("open index of generation %d: %w", gen, err)
		}
		closers = append(closers, obj.Body)
		return catalog.NewIndexReader(obj.Body), nil
	}
	var baseline catalog.IndexIterator
	if d.Baseline > 0 {
		it, err := open(d.Baseline)
		if err != nil {
			return catalog.Plan{}, err
		}
		baseline = it
	}
	var stopped []catalog.IndexIterator
	for _, g := range d.Stopped {
		it, err := open(g)
		if err != nil {
			return catalog.Plan{}, err
		}
		stopped = append(stopped, it)
	}
	plan, err := catalog.Merge(r.entries, baseline, stopped)
	if err != nil {
		return plan, fmt.Errorf("merge: %w", err)
	}
	return plan, nil
}

func (r *run) writeIndex(ctx context.Context) error {
	var buf bytes.Buffer
	iw := catalog.NewIndexWriter(&buf)
	for _, e := range r.entries {
		if err := iw.Add(e); err != nil {
			return err
		}
	}
	if err := iw.Close(); err != nil {
		return err
	}
	return r.h.blobs.Put(ctx, events.IndexKey(r.job.RetailerID, r.job.Generation), buf.Bytes())
}

// sendChunks is pass 2: the changed rows, read again in file order, then the
// deletes, in chunks of ChunkRows; before each chunk the generation must
// still be the latest (I4).
func (r *run) sendChunks(ctx context.Context, plan catalog.Plan, chunks int) (int, error) {
	upsert := make([]bool, len(r.entries))
	for _, i := range plan.Upserts {
		upsert[i] = true
	}
	queueURL := r.h.cfg.SmallQueueURL
	if plan.Ops() >= r.h.cfg.LargeThreshold {
		queueURL = r.h.cfg.LargeQueueURL
	}
	c := &chunker{r: r, queueURL: queueURL, total: chunks}

	if len(plan.Upserts) > 0 {
		obj, err := r.h.blobs.Open(ctx, r.job.Key, r.etag)
		if err != nil {
			return c.seq, err
		}
		defer obj.Body.Close()
		rd, err := r.newReader(obj.Body)
		if err != nil {
			return c.seq, fmt.Errorf("reread snapshot: %w", err)
		}
		for {
			row, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return c.seq, fmt.Errorf("reread snapshot: %w", err)
			}
			i, found := slices.BinarySearchFunc(r.entries, row.ProductID, func(e catalog.IndexEntry, id string) int {
				return strings.Compare(e.ProductID, id)
			})
			if !found || !upsert[i] {
				continue
			}
			if err := c.add(ctx, events.ChunkOp{Op: events.OpUpsert, ProductID: row.ProductID,
				Hash: row.Hash.String(), Attributes: row.Attributes}); err != nil {
				return c.seq, err
			}
		}
	}
	for _, id := range plan.Deletes {
		if err := c.add(ctx, events.ChunkOp{Op: events.OpDelete, ProductID: id}); err != nil {
			return c.seq, err
		}
	}
	if err := c.flush(ctx); err != nil {
		return c.seq, err
	}
	if c.stopped {
		r.log.InfoContext(ctx, "superseded while sending chunks; stopped", "chunks_sent", c.seq)
		return c.seq, nil
	}
	if c.seq != chunks {
		return c.seq, fmt.Errorf("sent %d chunks, planned %d: the upload changed while being read", c.seq, chunks)
	}
	return c.seq, nil
}

// chunker accumulates ops into chunk objects and sends one message each.
type chunker struct {
	r        *run
	queueURL string
	total    int
	seq      int
	rows     int
	buf      []byte
	stopped  bool
}

func (c *chunker) add(ctx context.Context, op events.ChunkOp) error {
	if c.stopped {
		return nil
	}
	c.buf = events.AppendChunkLine(c.buf, op)
	c.rows++
	if c.rows >= c.r.h.cfg.ChunkRows {
		return c.flush(ctx)
	}
	return nil
}

func (c *chunker) flush(ctx context.Context) error {
	if c.rows == 0 || c.stopped {
		return nil
	}
	r := c.r
	latest, err := r.shard.IsLatest(ctx, r.job.RetailerID, r.job.Generation)
	if err != nil {
		return err
	}
	if !latest {
		c.stopped = true
		return nil
	}
	key := events.ChunkKey(r.job.RetailerID, r.job.Generation, c.seq)
	if err := r.h.blobs.Put(ctx, key, c.buf); err != nil {
		return fmt.Errorf("write chunk %d: %w", c.seq, err)
	}
	sum := sha256.Sum256(c.buf)
	msg := events.ChunkMessage{RetailerID: r.job.RetailerID, Generation: r.job.Generation, Seq: c.seq,
		Total: c.total, Rows: c.rows, Key: key, SHA256: hex.EncodeToString(sum[:])}
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	if err := r.h.queue.Send(ctx, c.queueURL, string(body),
		events.MessageGroupID(r.job.RetailerID, c.seq, r.h.cfg.InflightCap),
		events.MessageDeduplicationID(r.job.RetailerID, r.job.Generation, c.seq)); err != nil {
		return fmt.Errorf("send chunk %d: %w", c.seq, err)
	}
	if (c.seq+1)%20 == 0 || c.seq+1 == c.total {
		r.log.InfoContext(ctx, "chunks sent", "sent", c.seq+1, "total", c.total)
	}
	c.seq++
	c.rows = 0
	c.buf = c.buf[:0]
	return nil
}
