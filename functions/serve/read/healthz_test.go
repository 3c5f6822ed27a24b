package read_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// GET /healthz reports whether the databases answer, asks at most once per
// HealthTTL however many requests arrive (a public route must not reach
// every database per request), and keeps the reason out of the public answer.
func TestHealthzChecksTheDatabasesCached(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var failing atomic.Bool
	ready := func(context.Context) error {
		calls.Add(1)
		if failing.Load() {
			return errors.New("shard 1: dial tcp 10.0.3.4:5432: connect: connection refused (user=catalog_read)")
		}
		return nil
	}
	var logs strings.Builder
	var logMu sync.Mutex
	h := read.New(pgstoretest.New(t), slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logs}, nil)), ready)
	h.HealthTTL = time.Hour
	get := func() (int, httpapi.ErrorBody) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		var body httpapi.ErrorBody
		if rec.Code != http.StatusOK {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
		} else {
			require.JSONEq(t, `{"status":"ok"}`, rec.Body.String())
		}
		return rec.Code, body
	}

	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); code, _ := get(); require.Equal(t, http.StatusOK, code) }()
	}
	wg.Wait()
	require.EqualValues(t, 1, calls.Load(), "50 requests in one TTL, one check")

	// A failure is seen once the TTL has passed, and cached likewise.
	failing.Store(true)
	h.HealthTTL = time.Nanosecond
	code, body := get()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "not_ready", body.Error.Code)
	require.NotContains(t, body.Error.Message, "10.0.3.4", "addresses stay in the log")
	logMu.Lock()
	require.Contains(t, logs.String(), "10.0.3.4")
	logMu.Unlock()
	h.HealthTTL = time.Hour
	code, _ = get()
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.EqualValues(t, 2, calls.Load())

	// Without a check the storefront is always ready.
	rec := httptest.NewRecorder()
	read.New(pgstoretest.New(t), slog.New(slog.DiscardHandler), nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	require.Equal(t, http.StatusOK, rec.Code)
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
