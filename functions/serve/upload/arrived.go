package upload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// maxArrivedChecks bounds the slots a reservation looks at (one S3 HEAD
// each): a retailer has at most ReservationsPerHour of them within an
// expiry.
const maxArrivedChecks = 100

// takeArrivedUploads records as arrived (and queues the diff job of) each
// of the retailer's slots still awaiting its upload whose file is already
// in the bucket, before a new reservation supersedes the slots still
// awaiting theirs (DESIGN 13). S3's notification of an upload comes
// after its PUT has answered, often by a second or more: a retailer that
// PUTs a delta and then reserves the next one must not see the first
// superseded, its changes lost. A slot whose PUT has not ended is
// superseded as before (its upload, when it ends, is ignored). The
// arrival function's own event, later, finds the slot received and queues
// the same diff again, which the diff takes as any redelivered job.
func (h *Handler) takeArrivedUploads(ctx context.Context, retailerID string) error {
	gens, err := h.store.AwaitingUploads(ctx, retailerID, maxArrivedChecks)
	if err != nil {
		return err
	}
	for _, gen := range gens {
		_, err := h.blobs.Size(ctx, keys.Upload(retailerID, gen))
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check the upload of %s/%d: %w", retailerID, gen, err)
		}
		state, err := h.store.MarkArrived(ctx, retailerID, gen, time.Now(), 0)
		if err != nil {
			return fmt.Errorf("record the upload of %s/%d: %w", retailerID, gen, err)
		}
		if state != catalog.StateReceived {
			continue
		}
		if err := h.sendDiffJob(ctx, retailerID, gen); err != nil {
			return err
		}
		h.log.InfoContext(ctx, "upload found before its notification; diff queued", "retailer_id", retailerID, "generation", gen)
	}
	return nil
}
