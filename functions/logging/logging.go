// Package logging builds the JSON logger every function writes with: one
// line per record (log/slog), the level from the configuration
// (AWS_LAMBDA_LOG_LEVEL, which Lambda's logging controls set, or
// CATALOG_LOG_LEVEL), and on every line the request ids of the invocation
// the record was logged in: the Lambda request id ("request_id") and, on
// the HTTP routes, API Gateway's ("api_request_id"), taken from the
// context. Log with the *Context methods (InfoContext, ...) so that the ids
// are found.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Keys of the request ids on every line.
const (
	RequestIDKey    = "request_id"
	APIRequestIDKey = "api_request_id"
)

// New returns a JSON logger writing to w at level, with the request ids of
// the context on every line.
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(NewHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})))
}

// NewHandler wraps h so that every record carries the request ids of its context.
func NewHandler(h slog.Handler) slog.Handler { return requestIDs{h} }

type requestIDs struct{ slog.Handler }

func (h requestIDs) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if id := LambdaRequestID(ctx); id != "" {
			r.AddAttrs(slog.String(RequestIDKey, id))
		}
		if id := APIRequestID(ctx); id != "" {
			r.AddAttrs(slog.String(APIRequestIDKey, id))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDs{h.Handler.WithAttrs(attrs)}
}

func (h requestIDs) WithGroup(name string) slog.Handler { return requestIDs{h.Handler.WithGroup(name)} }

// LambdaRequestID is the id of the Lambda invocation ctx belongs to ("" outside one).
func LambdaRequestID(ctx context.Context) string {
	if lc, ok := lambdacontext.FromContext(ctx); ok && lc != nil {
		return lc.AwsRequestID
	}
	return ""
}

// WithLambdaRequestID returns ctx as inside the Lambda invocation id (the
// local stack's event sources and HTTP server play Lambda with it).
func WithLambdaRequestID(ctx context.Context, id string) context.Context {
	lc, ok := lambdacontext.FromContext(ctx)
	if ok && lc != nil {
		c := *lc
		c.AwsRequestID = id
		return lambdacontext.NewContext(ctx, &c)
	}
	return lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: id})
}

type apiRequestIDKey struct{}

// WithAPIRequestID returns ctx carrying API Gateway's request id.
func WithAPIRequestID(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, apiRequestIDKey{}, id)
}

// APIRequestID is API Gateway's request id of the HTTP request ctx belongs to ("" when none).
func APIRequestID(ctx context.Context) string {
	id, _ := ctx.Value(apiRequestIDKey{}).(string)
	return id
}

// ParseLevel reads a level as Lambda's logging controls name them
// (TRACE, DEBUG, INFO, WARN, ERROR, FATAL, any case) or as slog does
// ("INFO+2", "warning" is not one).
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "TRACE":
		return slog.LevelDebug - 4, nil
	case "FATAL":
		return slog.LevelError + 4, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.TrimSpace(s))); err != nil {
		return 0, fmt.Errorf("log level %q: want TRACE, DEBUG, INFO, WARN, ERROR or FATAL", s)
	}
	return l, nil
}

// SyncWriter serializes writes to w, so that the logger and the metrics,
// writing to the same stream, never interleave within a line.
type SyncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewSyncWriter wraps w.
func NewSyncWriter(w io.Writer) *SyncWriter { return &SyncWriter{w: w} }

// Write writes p whole before any other Write starts.
func (s *SyncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
