package config

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/metering"
)

// DefaultObjectRetentionDays is how long the bucket keeps chunk objects
// (infra/storage.go; the cost figure costs.FigChunkRetentionDays, which
// config_test checks it against).
const DefaultObjectRetentionDays = 19

// Metering is what the usage meters (DESIGN 10) are told, read once by
// FromEnv; Meter applies it.
type Metering struct {
	MemoryMB      int           // AWS_LAMBDA_FUNCTION_MEMORY_SIZE (Lambda sets it); 0: the function's default
	Flush         time.Duration // CATALOG_METER_FLUSH: how long counts stay in memory, when FlushSet
	FlushSet      bool          // CATALOG_METER_FLUSH was given (0s included); else the function's default
	RetentionDays int           // CATALOG_OBJECT_RETENTION_DAYS [DefaultObjectRetentionDays]
	// CATALOG_COST_DEPLOYMENT: the sizes of the shared resources the cost
	// report's fixed costs come from, as given (the upload function parses it).
	CostDeployment string
}

func meteringFromEnv(getenv func(string) string) (Metering, error) {
	var m Metering
	var err error
	if m.MemoryMB, err = intVar(getenv, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE", 0); err != nil {
		return m, err
	}
	if v := strings.TrimSpace(getenv("CATALOG_METER_FLUSH")); v != "" {
		if m.Flush, err = time.ParseDuration(v); err != nil || m.Flush < 0 {
			return m, fmt.Errorf("CATALOG_METER_FLUSH %q: want a duration like 5s", v)
		}
		m.FlushSet = true
	}
	if m.RetentionDays, err = intVar(getenv, "CATALOG_OBJECT_RETENTION_DAYS", DefaultObjectRetentionDays); err != nil {
		return m, err
	}
	m.CostDeployment = getenv("CATALOG_COST_DEPLOYMENT")
	return m, nil
}

// Meter builds a function's usage meter (DESIGN 10) over store, from c's
// Metering: its memory (defaultMB when Lambda did not say), how long counts
// stay in memory (default flushEvery) and how long the objects it writes
// are kept.
func Meter(c *Config, store metering.Store, function string, defaultMB int, flushEvery time.Duration, log *slog.Logger) *metering.Meter {
	m := c.Metering
	mem := m.MemoryMB
	if mem == 0 {
		mem = defaultMB
	}
	if m.FlushSet {
		flushEvery = m.Flush
	}
	days := m.RetentionDays
	if days == 0 {
		days = DefaultObjectRetentionDays
	}
	return metering.New(store, metering.Options{Function: function, MemoryMB: mem, FlushEvery: flushEvery,
		RetentionDays: days, Log: log})
}
