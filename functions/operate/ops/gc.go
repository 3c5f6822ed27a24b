package ops

import (
	"context"
	"errors"
	"fmt"
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
	p := catalog.CollectPolicy{AppliedBefore: now.Add(-h.cfg.TombstoneAfter), ParkedBefore: now.Add(-h.cfg.ParkedAfter)}
	var res GCResult
	if retailerID != "" {
		c, err := h.collectRetailer(ctx, retailerID, p)
		if err != nil {
			return res, err
		}
		res.add(c)
		return res, nil
	}
	for after := ""; ; {
		ids, err := h.store.RetailerIDs(ctx, after, 500)
		if err != nil {
			return res, fmt.Errorf("collect: list retailers after %q: %w", after, err)
		}
		for _, id := range ids {
			c, err := h.collectRetailer(ctx, id, p)
			if ce := (*catalog.Error)(nil); errors.As(err, &ce) && ce.Code == "retailer_moving" {
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
		if len(ids) < 500 {
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

// collectRetailer collects one retailer, logging its progress every
// progressEvery and its total at the end (with the write floor it left).
func (h *Handler) collectRetailer(ctx context.Context, retailerID string, p catalog.CollectPolicy) (catalog.Collected, error) {
	start := h.cfg.Now()
	last := start
	c, err := h.store.Collect(ctx, retailerID, p, func(c catalog.Collected) {
		if now := h.cfg.Now(); now.Sub(last) >= progressEvery {
			last = now
			h.log.InfoContext(ctx, "collecting", "retailer_id", retailerID, "generation", c.Floor,
				"tombstones", c.Tombstones, "directory_entries", c.DirectoryEntries, "chunk_rows", c.ChunkRows,
				"outbox_rows", c.OutboxRows, "batches", c.Batches)
		}
	})
	if err != nil {
		return c, fmt.Errorf("collect retailer %s: %w", retailerID, err)
	}
	took := h.cfg.Now().Sub(start)
	h.log.InfoContext(ctx, "collected", "retailer_id", retailerID, "generation", c.Floor, "write_floor", c.Floor,
		"tombstones", c.Tombstones, "directory_entries", c.DirectoryEntries, "chunk_rows", c.ChunkRows,
		"outbox_rows", c.OutboxRows, "consumer_versions", c.ConsumerVersions, "batches", c.Batches,
		"indexes_rebuilt", c.IndexesRebuilt, "seconds", took.Seconds())
	if c.RebuildSkipped != "" {
		h.log.WarnContext(ctx, "churned indexes left unrebuilt", "retailer_id", retailerID, "generation", c.Floor,
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
