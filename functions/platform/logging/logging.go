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
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Keys of the request ids on every line.
const (
	RequestIDKey    = "request_id"
	APIRequestIDKey = "api_request_id"
)

// New returns a JSON logger writing to w at level, with the request ids of
// the context on every line and every value bounded (Bound).
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return slog.New(NewHandler(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: Bound})))
}

// MaxValueBytes bounds every value of a log line (I12): a message, a
// string, an error's text, a list, whatever a retailer's file or a peer's
// answer put into it.
const MaxValueBytes = 4 << 10

// maxListItems bounds the items of a list value.
const maxListItems = 64

// Bound is a slog ReplaceAttr that cuts a value over MaxValueBytes (with
// "…" and its full size) and a list over 64 items, so that no line of a
// function's log outgrows what CloudWatch keeps (256 KiB an event) or what
// an operator reads, however large the input that made it.
func Bound(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); len(s) > MaxValueBytes {
			a.Value = slog.StringValue(cut(s))
		}
	case slog.KindAny:
		switch v := a.Value.Any().(type) {
		case error:
			if s := v.Error(); len(s) > MaxValueBytes {
				a.Value = slog.StringValue(cut(s))
			}
		case fmt.Stringer:
			if s := v.String(); len(s) > MaxValueBytes {
				a.Value = slog.StringValue(cut(s))
			}
		case []string:
			if len(v) > maxListItems {
				a.Value = slog.AnyValue(append(v[:maxListItems:maxListItems], fmt.Sprintf("… %d more", len(v)-maxListItems)))
			}
		case []int64:
			if len(v) > maxListItems {
				a.Value = slog.StringValue(fmt.Sprintf("%v … %d more", v[:maxListItems], len(v)-maxListItems))
			}
		}
	}
	return a
}

// cut shortens s to MaxValueBytes at a character boundary, saying how long it was.
func cut(s string) string {
	n := MaxValueBytes - 32
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:n], len(s))
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
