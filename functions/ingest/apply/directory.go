package apply

import (
	"context"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// updateDirectory brings the product directory (control database) in line
// with a chunk whose shard transaction has committed, now or at an earlier
// delivery: after an applied chunk, after a duplicate (the process may have
// stopped between the shard commit and the directory update), and after a
// superseded chunk only when an earlier delivery committed it. The update is
// fenced by generation and idempotent (Store.UpdateDirectory), so
// repeating it is harmless; an error fails the message, which is retried.
func (h *Handler) updateDirectory(ctx context.Context, m message.ChunkMessage, ops []message.ChunkOp, outcome catalog.ApplyOutcome) error {
	if outcome == catalog.ChunkSuperseded {
		counted, err := h.store.ChunkCounted(ctx, m.RetailerID, m.Generation, m.Seq)
		if err != nil || !counted {
			return err
		}
	}
	return h.store.UpdateDirectory(ctx, m.RetailerID, m.Generation, ops)
}
