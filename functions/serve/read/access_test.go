package read_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/serve/read"
)

// The read function's access log: errors (4xx, 5xx) and slow requests are
// always logged, successful fast ones at the sampling rate (none at 0,
// every one at 1, a quarter at 0.25), a sampled line saying its rate; a
// line names the route, status, bytes, duration and retailer, and stays
// within the ~350 B the cost model prices (figures.json
// log_bytes_per_read_access).
func TestAccessLogSampling(t *testing.T) {
	t.Parallel()
	store := newMemCatalog(func(i int) string { return `{"title": "x"}` }, "p1", "p2")
	run := func(a *read.AccessLog, paths ...string) []map[string]any {
		var mu sync.Mutex
		var out strings.Builder
		h := read.New(store, slog.New(slog.NewJSONHandler(lockedWriter{&mu, &out}, nil)), nil)
		h.AccessLog = a
		for _, p := range paths {
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
		}
		var lines []map[string]any
		sc := bufio.NewScanner(strings.NewReader(out.String()))
		for sc.Scan() {
			require.Less(t, len(sc.Bytes()), 350, "a line: %s", sc.Bytes())
			var l map[string]any
			require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
			lines = append(lines, l)
		}
		return lines
	}
	hundred := func(path string) []string {
		var ps []string
		for range 100 {
			ps = append(ps, path)
		}
		return ps
	}

	require.Empty(t, run(nil, hundred("/v1/retailers/r1/products/p1")...), "no access log configured")
	require.Empty(t, run(&read.AccessLog{Sample: 0}, hundred("/v1/retailers/r1/products/p1")...), "rate 0: no successful fast request")

	lines := run(&read.AccessLog{Sample: 0}, "/v1/retailers/r1/products/p1", "/v1/retailers/r1/products/nope", "/v1/retailers/r1/products/a%01", "/v1/retailers/bad!/products/p1")
	require.Len(t, lines, 3, "errors always")
	require.Equal(t, map[string]any{"level": "INFO", "msg": "request", "method": "GET", "route": "GET /v1/retailers/{retailer_id}/products/{product_id}",
		"status": 404.0, "bytes": lines[0]["bytes"], "ms": lines[0]["ms"], "retailer_id": "r1", "time": lines[0]["time"]}, lines[0])
	require.Positive(t, lines[0]["bytes"])
	require.Equal(t, "WARN", lines[1]["level"])
	require.Equal(t, 400.0, lines[1]["status"])
	require.NotContains(t, lines[0], "sample")

	all := run(&read.AccessLog{Sample: 1}, hundred("/v1/retailers/r1/products/p2")...)
	require.Len(t, all, 100)
	require.Equal(t, 1.0, all[0]["sample"])
	require.Equal(t, 200.0, all[0]["status"])

	n := 0
	quarter := &read.AccessLog{Sample: 0.25, Rand: func() float64 { n++; return float64(n%4) / 4 }}
	require.Len(t, run(quarter, hundred("/v1/retailers/r1/products/p1")...), 25)

	slowStore := newMemCatalog(func(int) string { return `{}` }, "p1")
	slowStore.delay = 3 * time.Millisecond
	var mu sync.Mutex
	var out strings.Builder
	h := read.New(slowStore, slog.New(slog.NewJSONHandler(lockedWriter{&mu, &out}, nil)), nil)
	h.AccessLog = &read.AccessLog{Sample: 0, Slow: 2 * time.Millisecond}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/v1/retailers/r1/products/p1", nil))
	require.Contains(t, out.String(), `"status":200`, "slow: always")
	require.Contains(t, out.String(), `"level":"WARN"`)
}
