package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
)

// Collection (DESIGN 14): POST /v1/admin/gc, the daily "gc" task, `up
// --gc-every`. What goes, and the retailer-level write floor that keeps I3
// true once tombstones are gone: functions/stores/pgstore/collect.go and
// the migrations shard and control 0110.
//
// POST /v1/admin/gc collects in the request (Collect). The scheduled run
// of every retailer goes through the reconcile-jobs queue as a
// reconciliation does (StartCollection): a listing message per page of
// retailers, one message per retailer (collected in an invocation of its
// own, a retailer switching shards delivered again later, one failing on
// its third delivery given up with an ERROR), and after the last page one
// message that collects the old shards' forwarding records.

// progressEvery is how often a long collection of one retailer logs how far it is.
const progressEvery = 10 * time.Second

// GCResult is what a collection removed: the answer of POST /v1/admin/gc.
type GCResult struct {
	Retailers        int   `json:"retailers"`         // retailers collected
	Tombstones       int64 `json:"tombstones"`        // deleted products' rows
	DirectoryEntries int64 `json:"directory_entries"` // their product directory entries
	ChunkRows        int64 `json:"chunk_rows"`        // finished generations' chunk progress
	OutboxRows       int64 `json:"outbox_rows"`       // parked outbox rows past their retention
	ConsumerVersions int64 `json:"consumer_versions"` // consumers' versions of the collected products
	MoveRecords      int64 `json:"move_records"`      // old shards' forwarding records of finished moves (a run of every retailer)
	// Skipped are the retailers a run of every retailer left for the next
	// one: they were switching shards (a move) when it reached them.
	Skipped []string `json:"skipped,omitempty"`
}

func (r *GCResult) add(c catalog.Collected) {
	r.Retailers++
	r.Tombstones += c.Tombstones
	r.DirectoryEntries += c.DirectoryEntries
	r.ChunkRows += c.ChunkRows
	r.OutboxRows += c.OutboxRows
	r.ConsumerVersions += c.ConsumerVersions
}

type gcRequest struct {
	RetailerID string `json:"retailer_id"`
}

// POST /v1/admin/gc {"retailer_id"?} -> 200 GCResult.
func (h *Handler) gc(w http.ResponseWriter, r *http.Request) {
	var req gcRequest
	if err := h.adminRequest(r, 1<<10, &req, &req.RetailerID); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if req.RetailerID != "" {
		if _, err := h.store.Retailer(r.Context(), req.RetailerID); err != nil {
			httpapi.WriteError(w, r, h.log, err)
			return
		}
	}
	res, err := h.Collect(r.Context(), req.RetailerID)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, res)
}

// Collect collects one retailer (retailerID) or every one (""), one
// retailer after another, each in batches of short transactions, and
// returns what it removed. Safe beside uploads, applies and another
// collection. A retailer that fails stops the run with its error (what
// was removed before stays removed; the next run goes on from there),
// except one switching shards, which is skipped (GCResult.Skipped).
func (h *Handler) Collect(ctx context.Context, retailerID string) (GCResult, error) {
	now := h.cfg.Now()
	p := h.collectPolicy(now)
	var res GCResult
	if retailerID != "" {
		c, err := h.collectRetailer(ctx, h.log, retailerID, p)
		if err != nil {
			return res, err
		}
		res.add(c)
		return res, nil
	}
	for after := ""; ; {
		ids, err := h.store.RetailerIDs(ctx, after, h.cfg.ListPage)
		if err != nil {
			return res, fmt.Errorf("collect: list retailers after %q: %w", after, err)
		}
		for _, id := range ids {
			c, err := h.collectRetailer(ctx, h.log, id, p)
			if isMoving(err) {
				// Switching shards (a move's few seconds): the next run
				// collects it; the others are not held up.
				h.log.WarnContext(ctx, "collection skipped a retailer", "retailer_id", id, "generation", c.Floor, "error", err.Error())
				res.Skipped = append(res.Skipped, id)
				continue
			}
			if err != nil {
				return res, err
			}
			res.add(c)
		}
		if len(ids) < h.cfg.ListPage {
			break
		}
		after = ids[len(ids)-1]
	}
	n, err := h.store.CollectMoveRecords(ctx, p.AppliedBefore)
	if err != nil {
		return res, fmt.Errorf("collect: %w", err)
	}
	res.MoveRecords = n
	h.log.InfoContext(ctx, "collection done", "retailers", res.Retailers, "tombstones", res.Tombstones,
		"directory_entries", res.DirectoryEntries, "chunk_rows", res.ChunkRows, "outbox_rows", res.OutboxRows,
		"consumer_versions", res.ConsumerVersions, "move_records", res.MoveRecords, "seconds", h.cfg.Now().Sub(now).Seconds())
	return res, nil
}

// collectPolicy is what a collection starting at now may remove.
func (h *Handler) collectPolicy(now time.Time) catalog.CollectPolicy {
	return catalog.CollectPolicy{AppliedBefore: now.Add(-h.cfg.TombstoneAfter), ParkedBefore: now.Add(-h.cfg.ParkedAfter)}
}

// isMoving reports whether err is a retailer's shard refusing its writes
// while it switches shards (429 retailer_moving).
func isMoving(err error) bool {
	ce := (*catalog.Error)(nil)
	return errors.As(err, &ce) && ce.Code == "retailer_moving"
}

// collectRetailer collects one retailer, logging (to log) its progress
// every progressEvery and its total at the end (with the write floor it
// left).
func (h *Handler) collectRetailer(ctx context.Context, log *slog.Logger, retailerID string, p catalog.CollectPolicy) (catalog.Collected, error) {
	start := h.cfg.Now()
	last := start
	c, err := h.store.Collect(ctx, retailerID, p, func(c catalog.Collected) {
		if now := h.cfg.Now(); now.Sub(last) >= progressEvery {
			last = now
			log.InfoContext(ctx, "collecting", "retailer_id", retailerID, "generation", c.Floor,
				"tombstones", c.Tombstones, "directory_entries", c.DirectoryEntries, "chunk_rows", c.ChunkRows,
				"outbox_rows", c.OutboxRows, "batches", c.Batches)
		}
	})
	if err != nil {
		return c, fmt.Errorf("collect retailer %s: %w", retailerID, err)
	}
	took := h.cfg.Now().Sub(start)
	log.InfoContext(ctx, "collected", "retailer_id", retailerID, "generation", c.Floor, "write_floor", c.Floor,
		"tombstones", c.Tombstones, "directory_entries", c.DirectoryEntries, "chunk_rows", c.ChunkRows,
		"outbox_rows", c.OutboxRows, "consumer_versions", c.ConsumerVersions, "batches", c.Batches,
		"indexes_rebuilt", c.IndexesRebuilt, "seconds", took.Seconds())
	if c.RebuildSkipped != "" {
		log.WarnContext(ctx, "churned indexes left unrebuilt", "retailer_id", retailerID, "generation", c.Floor,
			"reason", c.RebuildSkipped)
	}
	if h.Metrics != nil {
		h.Metrics.Emit(ctx, metrics.Fields{RetailerID: retailerID, Generation: c.Floor},
			metrics.Count(metrics.RowsCollected, c.Tombstones).By("Kind", "tombstones"),
			metrics.Count(metrics.RowsCollected, c.DirectoryEntries).By("Kind", "directory_entries"),
			metrics.Count(metrics.RowsCollected, c.ChunkRows).By("Kind", "chunk_rows"),
			metrics.Count(metrics.RowsCollected, c.OutboxRows).By("Kind", "outbox_rows"),
			metrics.Count(metrics.RowsCollected, c.ConsumerVersions).By("Kind", "consumer_versions"),
			metrics.Duration(metrics.CollectionSeconds, took))
	}
	return c, nil
}

// receivesBeforeGivingUp is the delivery of a collection's message on
// which its failure is logged and the message dropped instead of retried.
const receivesBeforeGivingUp = 3

// StartCollection starts the scheduled collection of every retailer (the
// daily "gc" task, `up --gc-every`) and returns its run id ("gc-" and 16
// hex digits): its first listing message is queued on reconcile-jobs; the
// work happens as the queue is consumed (HandleSQS).
func (h *Handler) StartCollection(ctx context.Context) (string, error) {
	if h.cfg.Queues.Reconcile == "" {
		return "", errors.New("collect: no reconcile-jobs queue configured")
	}
	runID := newRunID("gc-")
	if err := h.sendJob(ctx, reconcileJob{Kind: jobCollect, RunID: runID}); err != nil {
		return "", fmt.Errorf("collect: %w", err)
	}
	h.log.InfoContext(ctx, "collection started", "run_id", runID)
	return runID, nil
}

// handleCollectJob does a collection's message: a listing page, a
// retailer, or the forwarding records. An error is for a retry; a
// retailer that fails on its receivesBeforeGivingUp-th delivery is given
// up (an ERROR naming it; the next run collects it), as are the forwarding
// records, so that no message loops for ever.
func (h *Handler) handleCollectJob(ctx context.Context, job reconcileJob, receives int) error {
	log := h.log.With("run_id", job.RunID)
	switch {
	case job.MoveRecords:
		now := h.cfg.Now()
		n, err := h.store.CollectMoveRecords(ctx, h.collectPolicy(now).AppliedBefore)
		if err != nil {
			if receives < receivesBeforeGivingUp {
				return fmt.Errorf("collect: %w", err)
			}
			log.ErrorContext(ctx, "collection gave up on the forwarding records of moves; the next run collects them",
				"receives", receives, "err", err.Error())
			return nil
		}
		log.InfoContext(ctx, "collection queued every retailer", "retailers", job.Listed, "move_records", n)
		return nil
	case job.RetailerID == "":
		return h.listForCollection(ctx, job)
	}
	c, err := h.collectRetailer(ctx, log, job.RetailerID, h.collectPolicy(h.cfg.Now()))
	switch {
	case err == nil:
		return nil
	case errors.Is(err, catalog.ErrNotFound):
		log.InfoContext(ctx, "collection skipped a retailer no longer registered", "retailer_id", job.RetailerID)
		return nil
	case receives >= receivesBeforeGivingUp:
		log.ErrorContext(ctx, "collection gave up on a retailer; the next run collects it", "retailer_id", job.RetailerID,
			"generation", c.Floor, "receives", receives, "err", err.Error())
		return nil
	case isMoving(err):
		// Switching shards (a move's few seconds): the queue delivers it
		// again after its visibility timeout.
		return retryLater{err}
	}
	return err
}

// listForCollection queues a collection of each retailer of one page,
// then the next page, or after the last one the forwarding records.
// Repeating a page is harmless: a retailer collected twice has nothing
// left the second time.
func (h *Handler) listForCollection(ctx context.Context, job reconcileJob) error {
	ids, err := h.store.RetailerIDs(ctx, job.After, h.cfg.ListPage)
	if err != nil {
		return fmt.Errorf("collect: list retailers after %q: %w", job.After, err)
	}
	for _, id := range ids {
		if err := h.sendJob(ctx, reconcileJob{Kind: jobCollect, RunID: job.RunID, RetailerID: id}); err != nil {
			return err
		}
	}
	listed := job.Listed + len(ids)
	if len(ids) == h.cfg.ListPage {
		return h.sendJob(ctx, reconcileJob{Kind: jobCollect, RunID: job.RunID, After: ids[len(ids)-1], Listed: listed})
	}
	return h.sendJob(ctx, reconcileJob{Kind: jobCollect, RunID: job.RunID, MoveRecords: true, Listed: listed})
}
