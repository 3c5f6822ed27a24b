package read

import (
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// AccessLog is how the storefront logs its requests: every error and every
// slow request, and a sample of the rest (the read function's log lines
// are a per-request cost at ~22K requests/s: DESIGN 10, docs/SCALE.md).
type AccessLog struct {
	// Sample is the share of successful (status < 400) requests faster
	// than Slow that are logged, from 0 (none) to 1 (all).
	Sample float64
	// Slow is the duration from which a request is always logged
	// [DefaultSlowRequest].
	Slow time.Duration
	// Rand draws from [0, 1) [math/rand/v2's Float64].
	Rand func() float64
}

// DefaultSlowRequest is the duration from which a storefront request is
// always logged: ~20x the p99 of a healthy read (docs/PERFORMANCE.md).
const DefaultSlowRequest = 100 * time.Millisecond

func (a *AccessLog) slow() time.Duration {
	if a.Slow <= 0 {
		return DefaultSlowRequest
	}
	return a.Slow
}

// logs reports whether a request that ended with status after d is logged,
// and whether it was by sampling.
func (a *AccessLog) logs(status int, d time.Duration) (logged, sampled bool) {
	if status >= 400 || d >= a.slow() {
		return true, false
	}
	if a.Sample <= 0 {
		return false, false
	}
	draw := rand.Float64
	if a.Rand != nil {
		draw = a.Rand
	}
	return a.Sample >= 1 || draw() < a.Sample, true
}

// logged wraps a route's handler with the access log, when h.AccessLog is
// set: one JSON line per logged request, with its route, status, bytes,
// duration and retailer (and api_request_id, from the context). A sampled
// line says its rate, so that counts read from the log can be scaled.
func (h *Handler) logged(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a := h.AccessLog
		if a == nil {
			next(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next(sw, r)
		d := time.Since(start)
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		logged, sampled := a.logs(status, d)
		if !logged {
			return
		}
		level := slog.LevelInfo
		switch {
		case status >= 500:
			level = slog.LevelError
		case status >= 400 && status != http.StatusNotFound, d >= a.slow():
			level = slog.LevelWarn
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("route", r.Pattern), slog.Int("status", status),
			slog.Int64("bytes", sw.n), slog.Float64("ms", float64(d.Microseconds())/1000)}
		if id := r.PathValue("retailer_id"); id != "" {
			attrs = append(attrs, slog.String("retailer_id", id))
		}
		if sampled {
			attrs = append(attrs, slog.Float64("sample", a.Sample))
		}
		h.log.LogAttrs(r.Context(), level, "request", attrs...)
	}
}

// statusWriter records a response's status and body bytes.
type statusWriter struct {
	http.ResponseWriter
	status int
	n      int64
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	n, err := s.ResponseWriter.Write(p)
	s.n += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
