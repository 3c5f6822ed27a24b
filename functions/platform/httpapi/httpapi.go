// Package httpapi holds what every HTTP function shares: JSON responses, the
// one table mapping domain errors to HTTP statuses, ETags, and the adapter
// that serves an http.Handler behind API Gateway (HTTP API, payload v2), so
// the local stack and Lambda run the same handlers.
package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// statusByKind is the one table from domain error kinds to HTTP statuses.
var statusByKind = []struct {
	kind   error
	status int
}{
	{catalog.ErrInvalid, http.StatusBadRequest},
	{catalog.ErrUnauthorized, http.StatusUnauthorized},
	{catalog.ErrForbidden, http.StatusForbidden},
	{catalog.ErrNotFound, http.StatusNotFound},
	{catalog.ErrConflict, http.StatusConflict},
	{catalog.ErrTooLarge, http.StatusRequestEntityTooLarge},
	{catalog.ErrRateLimited, http.StatusTooManyRequests},
}

// ErrorBody is the contract's error shape.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the inside of ErrorBody.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError writes err with the status of its kind; anything that is not a
// domain error is a 500 whose details go to the log, not to the client.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var de *catalog.Error
	if errors.As(err, &de) {
		for _, row := range statusByKind {
			if errors.Is(de.Kind, row.kind) {
				if de.RetryAfter > 0 {
					// Whole seconds, rounded up: never earlier than the limit frees.
					w.Header().Set("Retry-After", strconv.FormatInt(int64((de.RetryAfter+time.Second-1)/time.Second), 10))
				}
				WriteJSON(w, row.status, ErrorBody{ErrorDetail{Code: de.Code, Message: de.Message}})
				return
			}
		}
	}
	log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	WriteJSON(w, http.StatusInternalServerError, ErrorBody{ErrorDetail{Code: "internal", Message: "internal error"}})
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encode response"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// WriteCacheableJSON writes v as JSON with a strong ETag of the body, and
// answers 304 when the request's If-None-Match names that tag.
func WriteCacheableJSON(w http.ResponseWriter, r *http.Request, cacheControl string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		WriteJSON(w, http.StatusInternalServerError, ErrorBody{ErrorDetail{Code: "internal", Message: "encode response"}})
		return
	}
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:12]) + `"`
	w.Header().Set("ETag", etag)
	if cacheControl != "" {
		w.Header().Set("Cache-Control", cacheControl)
	}
	if etagMatches(r.Header.Values("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n'))
}

// WriteVersionedBody writes a body already encoded (JSON ending in a
// newline) with a version in its ETag, "<version>-<hash of the body>": 200
// with the body, or 304 when If-None-Match names its tag. The version (a
// generation) only grows for the same resource, so a server that holds an
// older copy than the one a client revalidates can tell (see
// NewestETagVersion) and ask a fresher source. It sets Content-Length, so
// the answer goes out in one piece.
func WriteVersionedBody(w http.ResponseWriter, r *http.Request, cacheControl string, version int64, body []byte) {
	sum := sha256.Sum256(body)
	var tag [64]byte
	etag := tag[:0]
	etag = append(etag, '"')
	etag = strconv.AppendInt(etag, version, 10)
	etag = append(etag, '-')
	etag = hex.AppendEncode(etag, sum[:12])
	etag = append(etag, '"')
	tagged := string(etag)
	h := w.Header()
	h["Etag"] = []string{tagged}
	if cacheControl != "" {
		h["Cache-Control"] = []string{cacheControl}
	}
	if etagMatches(r.Header.Values("If-None-Match"), tagged) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}

// jsonContentType is shared by every answer (net/http only reads it).
var jsonContentType = []string{"application/json"}

// NewestETagVersion returns the highest version among the If-None-Match tags
// written by WriteVersionedBody (0 when there is none).
func NewestETagVersion(r *http.Request) int64 {
	var newest int64
	for _, h := range r.Header.Values("If-None-Match") {
		for _, part := range strings.Split(h, ",") {
			tag := strings.TrimPrefix(strings.TrimSpace(part), "W/")
			tag = strings.Trim(tag, `"`)
			v, _, ok := strings.Cut(tag, "-")
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > newest {
				newest = n
			}
		}
	}
	return newest
}

func etagMatches(headers []string, etag string) bool {
	for _, h := range headers {
		for _, part := range strings.Split(h, ",") {
			part = strings.TrimSpace(part)
			if part == "*" || part == etag || part == "W/"+etag {
				return true
			}
		}
	}
	return false
}

// DecodeJSON reads a JSON body of at most maxBytes into v; an empty body
// leaves v as it is. Unknown fields and trailing data are errors.
func DecodeJSON(r *http.Request, maxBytes int64, v any) error {
	if r.Body == nil {
		return nil
	}
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return catalog.Errorf(catalog.ErrTooLarge, "body_too_large", "request body over %d bytes", maxBytes)
		}
		return catalog.Errorf(catalog.ErrInvalid, "invalid_body", "request body: %v", err)
	}
	if dec.More() {
		return catalog.Errorf(catalog.ErrInvalid, "invalid_body", "request body: trailing data after the JSON object")
	}
	return nil
}

// NotFound answers unknown routes in the contract's error shape.
func NotFound(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusNotFound, ErrorBody{ErrorDetail{Code: "route_not_found", Message: "no route " + r.Method + " " + r.URL.Path}})
}

// Shortened is a request's value as an error message may quote it: at most
// 32 bytes of it (valid UTF-8), then "…" when it was longer.
func Shortened(v string) string {
	if len(v) <= 32 {
		return v
	}
	return strings.ToValidUTF8(v[:32], "") + "…"
}
