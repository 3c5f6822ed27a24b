// Package arrival is the arrival function, the first stop of every upload:
// S3's object-created events for snapshots/ come to it through the standard
// queue `arrivals`. It records that a generation's upload arrived (received;
// expired when it came too late after its slot's expiry) and queues the
// diff job on diff-jobs.fifo in the retailer's own message group, so that
// one retailer's diffs run one at a time, in arrival order, while every
// other retailer's group stays free for the other diff workers.
//
// S3 cannot notify a FIFO queue, and no managed service fills a message
// group from the object key, hence this small function between the two.
package arrival

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// Store is what the arrival needs of the databases. pgstore.Stores
// implements it.
type Store interface {
	// MarkArrived records that gen's upload arrived at (the event's time):
	// a slot awaiting it becomes received, or expired when at is more than
	// grace after the slot's expiry; it returns the generation's state
	// after. catalog.ErrNotFound for an unknown retailer or generation.
	MarkArrived(ctx context.Context, retailerID string, gen int64, at time.Time, grace time.Duration) (catalog.State, error)
}

// Config is what the arrival function is told at start.
type Config struct {
	DiffQueueURL string // diff-jobs.fifo
	// Grace is how long after its slot's expiry an upload is still taken
	// [DefaultGrace]: S3 checks a presigned URL's expiry when the PUT
	// starts, and a large upload ends later.
	Grace time.Duration
}

// DefaultGrace covers a 5 GiB PUT at 1.5 MB/s.
const DefaultGrace = time.Hour

// Handler handles the arrivals queue.
type Handler struct {
	cfg   Config
	store Store
	queue queue.Sender
	log   *slog.Logger
	// Metrics records the uploads received and those that came too late
	// (nil: none).
	Metrics *metrics.Recorder
}

// New builds the handler.
func New(cfg Config, store Store, q queue.Sender, log *slog.Logger) *Handler {
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	return &Handler{cfg: cfg, store: store, queue: q, log: log}
}

// HandleSQS is the Lambda entry: each message holds an S3 event
// notification. A message whose records cannot all be recorded and
// forwarded is reported for retry alone (recording and forwarding again is
// harmless: the FIFO queue drops a duplicate job within 5 minutes, and a
// diff job is idempotent anyway).
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	var resp lambdaevents.SQSEventResponse
	for _, msg := range ev.Records {
		if err := h.handleMessage(ctx, msg); err != nil {
			h.log.ErrorContext(ctx, "arrival failed", "message_id", msg.MessageId, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
		}
	}
	return resp, nil
}

func (h *Handler) handleMessage(ctx context.Context, msg lambdaevents.SQSMessage) error {
	var s3ev lambdaevents.S3Event
	if err := json.Unmarshal([]byte(msg.Body), &s3ev); err != nil {
		h.log.WarnContext(ctx, "message is not an S3 event; dropped", "message_id", msg.MessageId, "err", err)
		return nil
	}
	for _, rec := range s3ev.Records {
		if err := h.Arrive(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

// Arrive handles one record of an S3 event: an upload under snapshots/ is
// recorded and its diff job queued in the retailer's group; anything else
// is ignored.
func (h *Handler) Arrive(ctx context.Context, rec lambdaevents.S3EventRecord) error {
	if !strings.HasPrefix(rec.EventName, "ObjectCreated:") || !strings.HasPrefix(rec.S3.Object.Key, "snapshots/") {
		return nil
	}
	retailerID, gen, err := keys.ParseUpload(rec.S3.Object.Key)
	if err != nil {
		key, _ := url.QueryUnescape(rec.S3.Object.Key)
		h.log.WarnContext(ctx, "object under snapshots/ is not an upload; ignored", "key", key, "err", err)
		return nil
	}
	log := h.log.With("retailer_id", retailerID, "generation", gen)
	at := rec.EventTime
	if at.IsZero() {
		at = time.Now()
	}
	state, err := h.store.MarkArrived(ctx, retailerID, gen, at, h.cfg.Grace)
	if errors.Is(err, catalog.ErrNotFound) {
		log.WarnContext(ctx, "upload for an unknown retailer or generation ignored")
		return nil
	}
	if err != nil {
		return err
	}
	fields := metrics.Fields{RetailerID: retailerID, Generation: gen}
	metering.For(ctx, retailerID) // a known retailer's upload (DESIGN 10)
	if state.Terminal() {
		// Superseded by a newer reservation, too late, or finished: the
		// diff would only say so again.
		log.InfoContext(ctx, "upload arrived; nothing to diff", "state", state)
		if state == catalog.StateExpired {
			h.Metrics.Emit(ctx, fields, metrics.Count(metrics.Uploads, 1).By("State", string(state)))
		}
		return nil
	}
	body, err := json.Marshal(lambdaevents.S3Event{Records: []lambdaevents.S3EventRecord{rec}})
	if err != nil {
		return err
	}
	if err := h.queue.Send(ctx, h.cfg.DiffQueueURL, string(body), message.DiffJobGroupID(retailerID), message.DiffJobDedupID(string(body))); err != nil {
		return fmt.Errorf("queue the diff of %s/%d: %w", retailerID, gen, err)
	}
	log.InfoContext(ctx, "upload arrived; diff queued", "state", state, "size", rec.S3.Object.Size)
	h.Metrics.Emit(ctx, fields, metrics.Count(metrics.UploadsReceived, 1))
	return nil
}
