package upload

import (
	"context"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// reserveFunc reserves a generation of one mode.
type reserveFunc func(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error)

// reserver is the reservation of a mode (DESIGN 13): "" or "full" a full
// snapshot, "delta" a delta upload, each a dry run of it with dryRun;
// anything else 400 invalid_mode.
func (h *Handler) reserver(mode string, dryRun bool) (reserveFunc, error) {
	switch {
	case dryRun && (mode == "" || mode == catalog.ModeFull):
		return h.store.ReserveDryRun, nil
	case dryRun && mode == catalog.ModeDelta:
		return h.store.ReserveDeltaDryRun, nil
	case mode == "" || mode == catalog.ModeFull:
		return h.store.ReserveGeneration, nil
	case mode == catalog.ModeDelta:
		return h.store.ReserveDelta, nil
	}
	return nil, catalog.Errorf(catalog.ErrInvalid, "invalid_mode", `mode must be "full" or "delta", got %q`, mode)
}
