// Package analytics is the analytics consumer (DESIGN 8): the warehouse
// feed. Started by batches of change events from its SQS queue (subscribed
// to the change-events topic, catalog.changes events only), it reads each
// event's change object and writes the changes to Parquet files for Athena
// under analytics/changes/retailer_id={id}/date={YYYY-MM-DD}/, one file per
// retailer and day per batch.
//
// It is idempotent and version-aware: it keeps, per product, the highest
// generation it has written, and writes a change only when its generation
// is higher (an older or equal one, a duplicate or a replay, writes
// nothing). So the latest row per (retailer_id, product_id) by generation
// equals the catalog, a delete being a latest row with op = delete.
//
// Per retailer of a batch, in this order and with no database transaction
// open across the S3 PUT (I12): read which of the batch's changes are newer
// than what was recorded (one read, no lock), write their Parquet files,
// then record their generations (one statement that only raises). A crash
// or a failed record after the write leaves the files and records nothing:
// the retry writes the same rows again (into the same file when the batch
// comes back whole, another one otherwise). Rows of one product and
// generation are the same change, so the latest row per product by
// generation still equals the catalog; only duplicates are added. Two
// batches of one retailer at once may both write a change (both read
// before either recorded): the same generation gives identical rows, and
// of different generations the higher wins by generation whatever the
// order of the files or of the records, since a record never lowers a
// version. A change is skipped only when a version at least as high is
// recorded, which happens only after a file holding that version was
// written; and no file is ever replaced by one with other rows (a file's
// name covers its events and its rows). So every change is in a file, or a
// newer change of its product is.
//
// Each event of a batch fails alone (I12): a message that is no change
// event, a change object that is gone, unreadable, not the one the event
// names or slower than the batch's read budget, is reported failed by
// itself (its own retry delay, then the DLQ after its queue's receives)
// while the others are written. When a retailer's write fails, each of its
// events is written on its own, so that one whose changes cannot be
// written fails alone too.
package analytics

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/parquet-go/parquet-go"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/retry"
)

// Consumer names the analytics consumer's version state.
const Consumer = "analytics"

// Prefix is where the Parquet files go in the bucket.
const Prefix = "analytics/changes/"

// DefaultReadTimeout is how long the change objects of a batch may take to
// be read [Config.ReadTimeout]; readConcurrency how many are read at once.
const (
	DefaultReadTimeout = 30 * time.Second
	readConcurrency    = 16
)

// Blobs reads change objects and writes Parquet files. s3blob.Store and
// inmem.Blobs implement it.
type Blobs interface {
	// Get reads a whole object; blob.ErrNotFound when it does not exist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
}

// Versions is the consumers' record of the highest generation each has
// written per product. pgstore.Stores implements it. Neither call keeps a
// transaction open after it returns.
type Versions interface {
	// NewerVersions reports, for products of a retailer, whether each
	// generation is higher than the one the consumer recorded (none
	// recorded: it is). It only reads.
	NewerVersions(ctx context.Context, consumer, retailerID string, productIDs []string, generations []int64) ([]bool, error)
	// RecordVersions records each generation where it is higher than the
	// one recorded, and leaves the others: a record only raises, so
	// recording again or late changes nothing.
	RecordVersions(ctx context.Context, consumer, retailerID string, productIDs []string, generations []int64) error
}

// Config is what the analytics function is told at start.
type Config struct {
	QueueURL string         // its queue, whose messages' visibility a retry changes
	Retry    retry.Schedule // the delays between deliveries of a failed message
	// ReadTimeout bounds the reading of a batch's change objects
	// [DefaultReadTimeout], and so does half the invocation's remaining
	// time: an object not read by then fails its event alone, and the
	// others are written in the time left.
	ReadTimeout time.Duration
}

// Handler writes change events to Parquet.
type Handler struct {
	cfg      Config
	versions Versions
	blobs    Blobs
	queue    retry.Visibility
	log      *slog.Logger
}

// New builds the handler.
func New(cfg Config, versions Versions, blobs Blobs, queue retry.Visibility, log *slog.Logger) *Handler {
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = DefaultReadTimeout
	}
	return &Handler{cfg: cfg, versions: versions, blobs: blobs, queue: queue, log: log}
}

// Row is one row of the Parquet files: one change of one product.
type Row struct {
	RetailerID string    `parquet:"retailer_id,dict"`
	ProductID  string    `parquet:"product_id"`
	Generation int64     `parquet:"generation"`
	Op         string    `parquet:"op,dict"`             // "upsert" or "delete"
	Attributes *string   `parquet:"attributes,optional"` // a JSON object; null for a delete
	Hash       *string   `parquet:"hash,optional"`       // hex content hash; null for a delete
	AppliedAt  time.Time `parquet:"applied_at,timestamp(microsecond)"`
}

// FileKey is where the changes of a retailer on a day (UTC) from one batch
// go: name is the file's (fileName), the same when the same batch writes
// the same rows again.
func FileKey(retailerID string, day time.Time, name string) string {
	return fmt.Sprintf("%sretailer_id=%s/date=%s/%s.parquet", Prefix, retailerID, day.UTC().Format(time.DateOnly), name)
}

// RetailerPrefix is the prefix of every file of a retailer.
func RetailerPrefix(retailerID string) string { return Prefix + "retailer_id=" + retailerID + "/" }

// event is one change event of a batch with its changes.
type event struct {
	msg lambdaevents.SQSMessage
	env message.Envelope
	ops []message.ChunkOp
}

// HandleSQS is the Lambda entry. Each message is one envelope; a message
// that is not a change event, whose change object cannot be read in time,
// or whose changes cannot be written, is retried later (the schedule of
// Config.Retry), alone: the others are done.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	failures := retry.Failures{Schedule: h.cfg.Retry, Queue: h.queue, QueueURL: h.cfg.QueueURL, Log: h.log}
	read := h.readAll(ctx, ev.Records)
	byRetailer := map[string][]event{}
	for i, msg := range ev.Records {
		r := read[i]
		switch {
		case r.err != nil:
			failures.Fail(ctx, msg, r.err)
		case r.skip:
			// the subscription filters these out; nothing to write
		default:
			byRetailer[r.env.RetailerID] = append(byRetailer[r.env.RetailerID], event{msg: msg, env: r.env, ops: r.ops})
			metering.For(ctx, r.env.RetailerID) // the retailer's change event (DESIGN 10)
		}
	}
	retailers := make([]string, 0, len(byRetailer))
	for r := range byRetailer {
		retailers = append(retailers, r)
	}
	slices.Sort(retailers)
	for _, r := range retailers {
		evs := byRetailer[r]
		err := h.write(ctx, r, evs)
		if err == nil {
			continue
		}
		if len(evs) == 1 {
			failures.Fail(ctx, evs[0].msg, err)
			continue
		}
		// One event's changes may be what cannot be written: each on its
		// own, so that only what fails alone is retried.
		h.log.WarnContext(ctx, "writing the retailer's events together failed; writing each alone", "retailer_id", r,
			"events", len(evs), "err", err)
		for _, e := range evs {
			if err := h.write(ctx, r, []event{e}); err != nil {
				failures.Fail(ctx, e.msg, err)
			}
		}
	}
	return failures.Response(), nil
}

// readResult is what reading one message gave: its envelope and changes,
// skip for an event that is not a change event, or why it failed.
type readResult struct {
	env  message.Envelope
	ops  []message.ChunkOp
	skip bool
	err  error
}

// readAll reads the messages' change objects, readConcurrency at a time,
// within the batch's read budget (Config.ReadTimeout, at most half the
// time ctx has left): each message's outcome is its own.
func (h *Handler) readAll(ctx context.Context, msgs []lambdaevents.SQSMessage) []readResult {
	budget := h.cfg.ReadTimeout
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(deadline)/2)
	}
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	out := make([]readResult, len(msgs))
	slots := make(chan struct{}, readConcurrency)
	var wg sync.WaitGroup
	for i, msg := range msgs {
		var env message.Envelope
		if err := json.Unmarshal([]byte(msg.Body), &env); err != nil {
			out[i].err = fmt.Errorf("message %s is not a change event: %w", msg.MessageId, err)
			continue
		}
		if env.Type != message.TypeChanges {
			out[i].skip = true
			continue
		}
		if err := env.Validate(); err != nil {
			out[i].err = err
			continue
		}
		out[i].env = env
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-rctx.Done():
				out[i].err = fmt.Errorf("event %s: change object %s not read within the batch's read budget (%s): %w",
					env.ID, env.Object, budget, rctx.Err())
				return
			}
			out[i].ops, out[i].err = h.readChanges(rctx, env)
			if out[i].err != nil && rctx.Err() != nil && ctx.Err() == nil {
				out[i].err = fmt.Errorf("%w (the batch's read budget is %s)", out[i].err, budget)
			}
		}()
	}
	wg.Wait()
	return out
}

// readChanges reads an event's change object, checking its checksum.
func (h *Handler) readChanges(ctx context.Context, env message.Envelope) ([]message.ChunkOp, error) {
	body, err := h.blobs.Get(ctx, env.Object)
	if err != nil {
		return nil, fmt.Errorf("event %s: read change object %s: %w", env.ID, env.Object, err)
	}
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != env.SHA256 {
		return nil, fmt.Errorf("event %s: change object %s has checksum %s, the event says %s", env.ID, env.Object, got, env.SHA256)
	}
	ops, err := message.ReadChunk(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", env.ID, err)
	}
	return ops, nil
}

// write writes the changes of one retailer's events that are newer than
// what was recorded, one file per day, then records them: the versions are
// read before and recorded after the PUTs, never in a transaction around
// them.
func (h *Handler) write(ctx context.Context, retailerID string, evs []event) error {
	// The newest change of each product in the batch.
	newest := map[string]Row{}
	for _, e := range evs {
		for _, op := range e.ops {
			if cur, ok := newest[op.ProductID]; ok && cur.Generation >= e.env.Generation {
				continue
			}
			newest[op.ProductID] = rowOf(retailerID, e.env, op)
		}
	}
	rows := make([]Row, 0, len(newest))
	for _, r := range newest {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b Row) int { return strings.Compare(a.ProductID, b.ProductID) })
	ids := make([]string, len(rows))
	gens := make([]int64, len(rows))
	for i, r := range rows {
		ids[i], gens[i] = r.ProductID, r.Generation
	}
	newer, err := h.versions.NewerVersions(ctx, Consumer, retailerID, ids, gens)
	if err != nil {
		return fmt.Errorf("analytics of %s: %w", retailerID, err)
	}
	byDay := map[time.Time][]Row{}
	var days []time.Time
	ids, gens = ids[:0], gens[:0]
	for i, r := range rows {
		if !newer[i] {
			continue
		}
		day := r.AppliedAt.UTC().Truncate(24 * time.Hour)
		if byDay[day] == nil {
			days = append(days, day)
		}
		byDay[day] = append(byDay[day], r)
		ids, gens = append(ids, r.ProductID), append(gens, r.Generation)
	}
	slices.SortFunc(days, time.Time.Compare)
	for _, day := range days {
		body, err := Encode(byDay[day])
		if err != nil {
			return fmt.Errorf("analytics of %s: %w", retailerID, err)
		}
		key := FileKey(retailerID, day, fileName(evs, byDay[day]))
		if err := h.blobs.Put(ctx, key, body); err != nil {
			return fmt.Errorf("analytics of %s: write %s: %w", retailerID, key, err)
		}
	}
	// Only after the files: a version recorded is a version written.
	if err := h.versions.RecordVersions(ctx, Consumer, retailerID, ids, gens); err != nil {
		return fmt.Errorf("analytics of %s: %d files written, their versions not recorded (the retry writes them again): %w",
			retailerID, len(days), err)
	}
	h.log.InfoContext(ctx, "changes written", "retailer_id", retailerID, "events", len(evs),
		"products", len(rows), "rows", len(ids), "files", len(days), "ignored", len(rows)-len(ids))
	return nil
}

func rowOf(retailerID string, env message.Envelope, op message.ChunkOp) Row {
	r := Row{RetailerID: retailerID, ProductID: op.ProductID, Generation: env.Generation, Op: op.Op, AppliedAt: env.Time.UTC()}
	if op.Op == message.OpUpsert {
		attrs, hash := string(op.Attributes), op.Hash
		r.Attributes, r.Hash = &attrs, &hash
	}
	return r
}

// fileName names a file by the batch's events and the rows in it (each
// product with its generation): the same batch writing the same rows again
// (a retry after a crash before the record) writes the same file, and a
// file is never replaced by one with other rows, so no row once written
// is lost.
func fileName(evs []event, rows []Row) string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.env.ID
	}
	slices.Sort(ids)
	var buf []byte
	buf = binary.AppendUvarint(buf, uint64(len(ids)))
	for _, id := range ids {
		buf = binary.AppendUvarint(buf, uint64(len(id)))
		buf = append(buf, id...)
	}
	for _, r := range rows {
		buf = binary.AppendUvarint(buf, uint64(len(r.ProductID)))
		buf = append(buf, r.ProductID...)
		buf = binary.AppendVarint(buf, r.Generation)
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:16])
}

// Encode writes rows as a Snappy-compressed Parquet file.
func Encode(rows []Row) ([]byte, error) {
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows, parquet.Compression(&parquet.Snappy)); err != nil {
		return nil, fmt.Errorf("encode parquet: %w", err)
	}
	return buf.Bytes(), nil
}

// Decode reads the rows of a Parquet file written by Encode.
func Decode(body []byte) ([]Row, error) {
	rows, err := parquet.Read[Row](bytes.NewReader(body), int64(len(body)))
	if err != nil {
		return nil, fmt.Errorf("decode parquet: %w", err)
	}
	return rows, nil
}

// Latest reconstructs a catalog from rows, as a warehouse query would:
// the row of the highest generation per product, deletes left out;
// product id -> attributes (JSON). Two rows of one product and generation
// are the same change (written twice); it is an error when they differ.
func Latest(rows []Row) (map[string]string, error) {
	best := map[string]Row{}
	for _, r := range rows {
		cur, ok := best[r.ProductID]
		switch {
		case !ok || r.Generation > cur.Generation:
			best[r.ProductID] = r
		case r.Generation == cur.Generation && (r.Op != cur.Op || deref(r.Hash) != deref(cur.Hash)):
			return nil, fmt.Errorf("product %s has two different rows of generation %d", r.ProductID, r.Generation)
		}
	}
	out := map[string]string{}
	for id, r := range best {
		if r.Op == message.OpUpsert {
			out[id] = deref(r.Attributes)
		}
	}
	return out, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
