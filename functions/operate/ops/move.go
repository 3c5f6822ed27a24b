package ops

import (
	"context"
	"net/http"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// Mover moves retailers between shards (DESIGN 14). pgstore.Stores
// implements it.
type Mover interface {
	// StartMove records a move of the retailer to shard toShard and returns
	// its id (RunMoves does it): catalog.ErrNotFound for an unknown
	// retailer, ErrInvalid for a shard that does not exist, ErrConflict for
	// the shard it is on or while another move of it runs.
	StartMove(ctx context.Context, retailerID string, toShard int) (string, error)
	// Move returns a move as it is now; catalog.ErrNotFound when unknown.
	Move(ctx context.Context, moveID string) (catalog.Move, error)
	// RunMoves runs the running moves from their checkpoints until each
	// ends or until is passed, and returns how many still run.
	RunMoves(ctx context.Context, until time.Time) (int, error)
}

// TaskMoves is the schedule's task that runs the moves (every minute on AWS).
const TaskMoves = "moves"

// MoveSlice is how long one invocation runs moves: well within Lambda's
// 15 minutes; the next invocation (the schedule) resumes from the checkpoint.
const MoveSlice = 10 * time.Minute

type moveRequest struct {
	ToShard *int `json:"to_shard"`
}

type moveStarted struct {
	MoveID string `json:"move_id"`
}

// POST /v1/admin/retailers/{retailer_id}/move {"to_shard": N} -> 202 {"move_id"}.
func (h *Handler) startMove(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	retailerID := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(retailerID); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	var req moveRequest
	if err := httpapi.DecodeJSON(r, 1<<10, &req); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	if req.ToShard == nil {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_shard", "to_shard is required"))
		return
	}
	id, err := h.Mover.StartMove(r.Context(), retailerID, *req.ToShard)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "move started", "retailer_id", retailerID, "move_id", id, "to_shard", *req.ToShard)
	if h.MoveStarted != nil {
		h.MoveStarted()
	}
	httpapi.WriteJSON(w, http.StatusAccepted, moveStarted{MoveID: id})
}

// GET /v1/admin/moves/{move_id}.
func (h *Handler) getMove(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	m, err := h.Mover.Move(r.Context(), r.PathValue("move_id"))
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, m)
}

// RunMoves runs the moves for one slice (the schedule's task, the local
// stack's poller), logging each still running.
func (h *Handler) RunMoves(ctx context.Context) error {
	if h.Mover == nil {
		return nil
	}
	running, err := h.Mover.RunMoves(ctx, h.cfg.Now().Add(MoveSlice))
	if err != nil {
		h.log.ErrorContext(ctx, "move step failed (retried from its checkpoint)", "err", err)
	}
	if running > 0 {
		h.log.InfoContext(ctx, "moves still running", "moves", running)
	}
	return nil
}
