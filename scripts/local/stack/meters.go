package stack

import (
	"context"
	"errors"
	"log/slog"

	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/finance/metering"
)

// Meters are the usage meters of the functions the stack runs, each with
// the memory infra deploys it with, so that the local cost report reads
// like the one on AWS.
type Meters struct {
	Upload, Read, Arrival, Diff, Apply, Relay, Consumers *metering.Meter
}

func newMeters(store metering.Store, log *slog.Logger) Meters {
	m := func(function string, memoryMB int, every int) *metering.Meter {
		o := metering.Options{Function: function, MemoryMB: memoryMB,
			RetentionDays: int(costs.DefaultFigures().V(costs.FigChunkRetentionDays)),
			Log:           log.With("function", function)}
		if every > 0 {
			o.FlushEvery = metering.StorefrontFlushEvery
		}
		return metering.New(store, o)
	}
	return Meters{Upload: m("upload", 512, 0), Read: m("read", 1024, 1), Arrival: m("arrival", 256, 0),
		Diff: m("diff", 3008, 0), Apply: m("apply", 1024, 0), Relay: m("relay", 512, 0),
		Consumers: m("consumers", 512, 0)}
}

func (m Meters) all() []*metering.Meter {
	return []*metering.Meter{m.Upload, m.Read, m.Arrival, m.Diff, m.Apply, m.Relay, m.Consumers}
}

// FlushUsage writes every meter's pending counts now (tests; the stack
// also writes them on its own).
func (st *Stack) FlushUsage(ctx context.Context) error {
	var errs []error
	for _, m := range st.Meters.all() {
		errs = append(errs, m.Flush(ctx))
	}
	return errors.Join(errs...)
}
