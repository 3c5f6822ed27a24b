package apply

import (
	"context"

	"github.com/retailcatalog/catalog/events/message"
)

// WaitingDeltas is what the apply's Store may also do (pgstore.Stores
// does): name the delta upload that waited for the generation just ended
// (DESIGN 13: a delta waits for every older generation that is not final).
type WaitingDeltas interface {
	// WaitingDelta returns the oldest received delta whose older
	// generations are all final (0: none).
	WaitingDelta(ctx context.Context, retailerID string) (int64, error)
}

// startWaitingDelta sends the diff job of a delta that waited for m's
// generation, now applied or rejected, so that it never stays received
// (I10). Best effort: the stuck sweeper re-drives it otherwise.
func (h *Handler) startWaitingDelta(ctx context.Context, m message.ChunkMessage) {
	w, ok := h.store.(WaitingDeltas)
	if !ok || h.Jobs == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	gen, err := w.WaitingDelta(ctx, m.RetailerID)
	if err == nil && gen > 0 {
		err = h.Jobs.SendDiffJob(ctx, m.RetailerID, gen)
	}
	if err != nil {
		h.log.WarnContext(ctx, "start a waiting delta; the stuck sweeper will", "retailer_id", m.RetailerID,
			"generation", m.Generation, "err", err)
	}
}
