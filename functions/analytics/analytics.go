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
package analytics

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/parquet-go/parquet-go"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/retry"
)

// Consumer names the analytics consumer's version state.
const Consumer = "analytics"

// Prefix is where the Parquet files go in the bucket.
const Prefix = "analytics/changes/"

// Blobs reads change objects and writes Parquet files. s3blob.Store and
// inmem.Blobs implement it.
type Blobs interface {
	// Get reads a whole object; blob.ErrNotFound when it does not exist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
}

// Versions is the consumers' record of the highest generation each has
// written per product. pgstore.Stores implements it.
type Versions interface {
	// AdvanceVersions records, for products of a retailer (each once), the
	// generation of the change the consumer is about to write, where it is
	// higher than the one recorded, and reports for each whether it was.
	// write runs before the record is kept, with that report: when it
	// fails, nothing is recorded, and the error is returned.
	AdvanceVersions(ctx context.Context, consumer, retailerID string, productIDs []string, generations []int64,
		write func(newer []bool) error) error
}

// Config is what the analytics function is told at start.
type Config struct {
	QueueURL string         // its queue, whose messages' visibility a retry changes
	Retry    retry.Schedule // the delays between deliveries of a failed message
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
// go: name is the batch's, the same when the same batch is delivered again.
func FileKey(retailerID string, day time.Time, name string) string {
	return fmt.Sprintf("%sretailer_id=%s/date=%s/%s.parquet", Prefix, retailerID, day.UTC().Format(time.DateOnly), name)
}

// RetailerPrefix is the prefix of every file of a retailer.
func RetailerPrefix(retailerID string) string { return Prefix + "retailer_id=" + retailerID + "/" }

// event is one change event of a batch with its changes.
type event struct {
	msg lambdaevents.SQSMessage
	env events.Envelope
	ops []events.ChunkOp
}

// HandleSQS is the Lambda entry. Each message is one envelope; a message
// whose change object cannot be read, or whose retailer's files cannot be
// written, is retried later (the schedule of Config.Retry), the others are
// done.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	failures := retry.Failures{Schedule: h.cfg.Retry, Queue: h.queue, QueueURL: h.cfg.QueueURL, Log: h.log}
	byRetailer := map[string][]event{}
	for _, msg := range ev.Records {
		var env events.Envelope
		if err := json.Unmarshal([]byte(msg.Body), &env); err != nil {
			failures.Fail(ctx, msg, fmt.Errorf("message %s is not a change event: %w", msg.MessageId, err))
			continue
		}
		if env.Type != events.TypeChanges {
			continue // the subscription filters these out; nothing to write
		}
		if err := env.Validate(); err != nil {
			failures.Fail(ctx, msg, err)
			continue
		}
		ops, err := h.readChanges(ctx, env)
		if err != nil {
			failures.Fail(ctx, msg, err)
			continue
		}
		byRetailer[env.RetailerID] = append(byRetailer[env.RetailerID], event{msg: msg, env: env, ops: ops})
		metering.For(ctx, env.RetailerID) // the retailer's change event (DESIGN 10)
	}
	retailers := make([]string, 0, len(byRetailer))
	for r := range byRetailer {
		retailers = append(retailers, r)
	}
	slices.Sort(retailers)
	for _, r := range retailers {
		if err := h.write(ctx, r, byRetailer[r]); err != nil {
			for _, e := range byRetailer[r] {
				failures.Fail(ctx, e.msg, err)
			}
		}
	}
	return failures.Response(), nil
}

// readChanges reads an event's change object, checking its checksum.
func (h *Handler) readChanges(ctx context.Context, env events.Envelope) ([]events.ChunkOp, error) {
	body, err := h.blobs.Get(ctx, env.Object)
	if err != nil {
		return nil, fmt.Errorf("event %s: read change object %s: %w", env.ID, env.Object, err)
	}
	sum := sha256.Sum256(body)
	if got := hex.EncodeToString(sum[:]); got != env.SHA256 {
		return nil, fmt.Errorf("event %s: change object %s has checksum %s, the event says %s", env.ID, env.Object, got, env.SHA256)
	}
	ops, err := events.ReadChunk(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("event %s: %w", env.ID, err)
	}
	return ops, nil
}

// write writes the changes of one retailer's events that are newer than
// what was written before, one file per day.
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
	name := batchName(evs)
	var written, files int
	err := h.versions.AdvanceVersions(ctx, Consumer, retailerID, ids, gens, func(newer []bool) error {
		byDay := map[time.Time][]Row{}
		for i, r := range rows {
			if newer[i] {
				day := r.AppliedAt.UTC().Truncate(24 * time.Hour)
				byDay[day] = append(byDay[day], r)
			}
		}
		for day, dayRows := range byDay {
			body, err := Encode(dayRows)
			if err != nil {
				return err
			}
			key := FileKey(retailerID, day, name)
			if err := h.blobs.Put(ctx, key, body); err != nil {
				return fmt.Errorf("write %s: %w", key, err)
			}
			written += len(dayRows)
			files++
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("analytics of %s: %w", retailerID, err)
	}
	h.log.InfoContext(ctx, "changes written", "retailer_id", retailerID, "events", len(evs),
		"products", len(rows), "rows", written, "files", files, "ignored", len(rows)-written)
	return nil
}

func rowOf(retailerID string, env events.Envelope, op events.ChunkOp) Row {
	r := Row{RetailerID: retailerID, ProductID: op.ProductID, Generation: env.Generation, Op: op.Op, AppliedAt: env.Time.UTC()}
	if op.Op == events.OpUpsert {
		attrs, hash := string(op.Attributes), op.Hash
		r.Attributes, r.Hash = &attrs, &hash
	}
	return r
}

// batchName names a batch's files by the events in it, so that the same
// batch delivered again writes the same files.
func batchName(evs []event) string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.env.ID
	}
	slices.Sort(ids)
	sum := sha256.Sum256([]byte(strings.Join(ids, "\n")))
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
		if r.Op == events.OpUpsert {
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
