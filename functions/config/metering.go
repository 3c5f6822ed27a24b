package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/metering"
)

// DefaultObjectRetentionDays is how long the bucket keeps chunk objects
// (infra/storage.go; the cost figure costs.FigChunkRetentionDays, which
// config_test checks it against).
const DefaultObjectRetentionDays = 19

// Meter builds a function's usage meter (DESIGN 10) over store: its memory
// from AWS_LAMBDA_FUNCTION_MEMORY_SIZE (Lambda sets it; defaultMB
// elsewhere), how long counts stay in memory from CATALOG_METER_FLUSH (a
// duration, default flushEvery), and how long the objects it writes are
// kept from CATALOG_OBJECT_RETENTION_DAYS (default: the bucket's chunk
// retention, DefaultObjectRetentionDays).
func Meter(getenv func(string) string, store metering.Store, function string, defaultMB int, flushEvery time.Duration, log *slog.Logger) (*metering.Meter, error) {
	mem, err := intVar(getenv, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", defaultMB)
	if err != nil {
		return nil, err
	}
	if v := strings.TrimSpace(getenv("CATALOG_METER_FLUSH")); v != "" {
		if flushEvery, err = time.ParseDuration(v); err != nil || flushEvery < 0 {
			return nil, fmt.Errorf("CATALOG_METER_FLUSH %q: want a duration like 5s", v)
		}
	}
	days, err := intVar(getenv, "CATALOG_OBJECT_RETENTION_DAYS", DefaultObjectRetentionDays)
	if err != nil {
		return nil, err
	}
	return metering.New(store, metering.Options{Function: function, MemoryMB: mem, FlushEvery: flushEvery,
		RetentionDays: days, Log: log}), nil
}
