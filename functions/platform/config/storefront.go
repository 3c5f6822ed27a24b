package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults of the read function's access log (docs/RUNBOOK.md, "The
// storefront's access log").
const (
	// DefaultReadAccessLogSample logs 1% of the successful fast requests
	// (the cost model's default, costs.DefaultReadLogSample).
	DefaultReadAccessLogSample = 0.01
)

// Storefront is how the read function logs its requests, read once by
// FromEnv.
type Storefront struct {
	// AccessLogSample (CATALOG_READ_ACCESS_LOG_SAMPLE, 0 to 1) is the share
	// of successful (status < 400) requests faster than SlowRequest that
	// write an access log line; errors and slow requests always do.
	AccessLogSample float64
	// SlowRequest (CATALOG_READ_SLOW_REQUEST, a duration) is the duration
	// from which a request is always logged; 0: the read function's
	// default (read.DefaultSlowRequest, 100 ms).
	SlowRequest time.Duration
}

func storefrontFromEnv(getenv func(string) string) (Storefront, error) {
	s := Storefront{AccessLogSample: DefaultReadAccessLogSample}
	if v := strings.TrimSpace(getenv("CATALOG_READ_ACCESS_LOG_SAMPLE")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return s, fmt.Errorf("CATALOG_READ_ACCESS_LOG_SAMPLE %q: want a share from 0 to 1 (0.01 logs 1%% of the fast successful requests)", v)
		}
		s.AccessLogSample = f
	}
	if v := strings.TrimSpace(getenv("CATALOG_READ_SLOW_REQUEST")); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("CATALOG_READ_SLOW_REQUEST %q: want a positive duration like 100ms", v)
		}
		s.SlowRequest = d
	}
	return s, nil
}
