package ops

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// The stuck-generation sweeper (DESIGN 9): a generation with work left
// (received, diffing, applying, a confirmed hold) that has not moved for
// StallAfter is re-driven: its diff job sent again, or, when it applies,
// the chunks not applied sent again from their objects (every step is
// idempotent: a diff re-run changes nothing it did, a chunk counted is not
// applied twice). A generation that has not moved through MaxRedrives
// re-drives ends rejected (diff_failed before it applies, apply_failed
// after) and what it may have written is undone by the rollback the
// rejection reserves (I10): every generation ends. An offboarding is the
// one exception (it is never given up, so it stays stuck for an operator:
// why reports it and GenerationsStuck, alarmed, counts it). An undo whose
// diff job was lost (still received a minute after it was reserved) is
// re-driven at once. On AWS an EventBridge schedule runs it; locally a
// ticker.

// sweepLimit bounds the generations one sweep looks at per shard.
const sweepLimit = 1000

// SweepResult is what one sweep did.
type SweepResult struct {
	Redriven int // generations re-driven
	Rejected int // generations ended rejected after MaxRedrives re-drives (I10)
	Stuck    int // offboardings left alone after MaxRedrives re-drives
}

// Sweep re-drives the generations stalled for StallAfter.
func (h *Handler) Sweep(ctx context.Context) (SweepResult, error) {
	var res SweepResult
	stalled, err := h.store.Stalled(ctx, h.cfg.Now().Add(-h.cfg.StallAfter), sweepLimit)
	if err != nil {
		return res, err
	}
	var errs []error
	for _, g := range stalled {
		log := h.log.With("retailer_id", g.RetailerID, "generation", g.Generation)
		if g.Redrives >= h.cfg.MaxRedrives {
			rejected, err := h.giveUp(ctx, g)
			if err != nil {
				errs = append(errs, fmt.Errorf("give up %s/%d: %w", g.RetailerID, g.Generation, err))
				continue
			}
			if rejected {
				res.Rejected++
				continue
			}
			res.Stuck++
			log.ErrorContext(ctx, "offboarding stuck after every re-drive: an operator must look (catalogctl why)",
				"state", g.State, "redrives", g.Redrives, "last_moved", g.LastMoved)
			continue
		}
		action, err := h.redrive(ctx, g)
		if err != nil {
			errs = append(errs, fmt.Errorf("re-drive %s/%d: %w", g.RetailerID, g.Generation, err))
			continue
		}
		n, err := h.store.RecordRedrive(ctx, g.RetailerID, g.Generation, action)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res.Redriven++
		log.WarnContext(ctx, "stalled generation re-driven", "state", g.State, "action", action, "redrives", n,
			"idle_s", int(h.cfg.Now().Sub(g.LastMoved).Seconds()))
		h.Metrics.Emit(ctx, metrics.Fields{RetailerID: g.RetailerID, Generation: g.Generation},
			metrics.Count(metrics.GenerationsRedriven, 1))
	}
	// Every sweep says how many are stuck, zero included: the alarm's data.
	h.Metrics.Emit(ctx, metrics.Fields{}, metrics.Count(metrics.GenerationsStuck, int64(res.Stuck)))
	return res, errors.Join(errs...)
}

// giveUp ends a generation that did not move through every re-drive:
// rejected, diff_failed before it applies and apply_failed after, and the
// catalog returned to the last applied generation by the undo the
// rejection reserves (its diff job sent here). It reports false for an
// offboarding, which is never given up.
func (h *Handler) giveUp(ctx context.Context, g catalog.StalledGeneration) (bool, error) {
	code, stage := catalog.CodeDiffFailed, "its diff"
	if g.State == catalog.StateApplying {
		code, stage = catalog.CodeApplyFailed, "its chunks"
	}
	undo, err := h.store.Reject(ctx, g.RetailerID, g.Generation, catalog.Rejection{Code: code, Message: fmt.Sprintf(
		"%s made no progress for %s after each of %d re-drives (last moved %s)", stage,
		h.cfg.StallAfter.Round(time.Second), g.Redrives, g.LastMoved.UTC().Format(time.RFC3339))})
	if err != nil || !undo.Rejected {
		return false, err
	}
	log := h.log.With("retailer_id", g.RetailerID, "generation", g.Generation)
	log.ErrorContext(ctx, "generation rejected after every re-drive", "code", code, "state", g.State, "redrives", g.Redrives)
	fields := metrics.Fields{RetailerID: g.RetailerID, Generation: g.Generation}
	h.Metrics.Emit(ctx, fields, metrics.Count(metrics.Uploads, 1).By("State", string(catalog.StateRejected)),
		metrics.Count(metrics.Rejections, 1).By("Code", code), metrics.Count(metrics.GenerationsFailed, 1).By("Code", code))
	if undo.Generation > 0 {
		log.WarnContext(ctx, "the catalog is returned to the last applied generation", "undo_generation", undo.Generation,
			"source_generation", undo.Source)
		if err := h.resendDiffJob(ctx, g.RetailerID, undo.Generation); err != nil {
			// The undo is received: the next sweep finds it.
			log.WarnContext(ctx, "send the undo's diff job", "undo_generation", undo.Generation, "err", err)
		}
	}
	return true, nil
}

// redrive sends a stalled generation's work again and says what it did.
func (h *Handler) redrive(ctx context.Context, g catalog.StalledGeneration) (string, error) {
	if g.State != catalog.StateApplying {
		return "diff job sent again", h.resendDiffJob(ctx, g.RetailerID, g.Generation)
	}
	p, err := h.store.Progress(ctx, g.RetailerID, g.Generation)
	if err != nil {
		return "", err
	}
	queueURL := h.cfg.Queues.ApplySmall
	if g.Changed >= int64(h.cfg.LargeThreshold) {
		queueURL = h.cfg.Queues.ApplyLarge
	}
	type chunk struct {
		seq  int
		body []byte
	}
	var missing []chunk
	for seq := 0; seq < g.ChunksTotal; seq++ {
		if p.Applied(seq) {
			continue
		}
		_, body, err := h.chunkMessage(ctx, g.RetailerID, g.Generation, seq, g.ChunksTotal)
		if errors.Is(err, blob.ErrNotFound) {
			// The diff stopped before writing this chunk: it must run again
			// (it sends every chunk; the applied ones are counted already).
			return "diff job sent again (chunk objects missing)", h.resendDiffJob(ctx, g.RetailerID, g.Generation)
		}
		if err != nil {
			return "", err
		}
		missing = append(missing, chunk{seq, body})
	}
	sent := 0
	for _, c := range missing {
		// A dedup id of its own: the FIFO queue drops a repeat of the
		// original's within five minutes, and the apply counts a chunk once.
		dedup := fmt.Sprintf("%s:redrive-%d", message.MessageDeduplicationID(g.RetailerID, g.Generation, c.seq), g.Redrives+1)
		if err := h.queue.Send(ctx, queueURL, string(c.body), message.MessageGroupID(g.RetailerID, c.seq, h.cfg.InflightCap), dedup); err != nil {
			return "", fmt.Errorf("send chunk %d: %w", c.seq, err)
		}
		sent++
	}
	if sent == 0 {
		// Every chunk is counted but the generation is not applied: the
		// last chunk's transaction finishes it, so this cannot last; the
		// diff's re-run finds nothing to send and leaves it as it is.
		return "diff job sent again (no chunk missing)", h.resendDiffJob(ctx, g.RetailerID, g.Generation)
	}
	return fmt.Sprintf("%s sent again", plural(sent, "chunk", "chunks")), nil
}

// resendDiffJob puts the upload's object-created event on diff-jobs.fifo,
// in the retailer's group, as the arrival does (a new event time: a new
// deduplication id).
func (h *Handler) resendDiffJob(ctx context.Context, retailerID string, gen int64) error {
	body := message.ObjectCreatedMessage(h.cfg.Region, h.blobs.Bucket(), keys.Upload(retailerID, gen), h.cfg.Now())
	return h.queue.Send(ctx, h.cfg.Queues.DiffJobs, body, message.DiffJobGroupID(retailerID), message.DiffJobDedupID(body))
}

// chunkMessage is the message of a chunk as the diff sent it, from its
// object (its checksum and rows counted afresh).
func (h *Handler) chunkMessage(ctx context.Context, retailerID string, gen int64, seq, total int) (message.ChunkMessage, []byte, error) {
	key := keys.Chunk(retailerID, gen, seq)
	obj, err := h.blobs.Get(ctx, key)
	if err != nil {
		return message.ChunkMessage{}, nil, err
	}
	sum := sha256.Sum256(obj)
	msg := message.ChunkMessage{RetailerID: retailerID, Generation: gen, Seq: seq, Total: total,
		Rows: bytes.Count(obj, []byte("\n")), Key: key, SHA256: hex.EncodeToString(sum[:])}
	body, err := json.Marshal(msg)
	return msg, body, err
}
