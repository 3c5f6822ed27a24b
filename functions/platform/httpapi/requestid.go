package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"

	"github.com/retailcatalog/catalog/functions/platform/logging"
)

// RequestIDHeader is the response header that carries the request's id on
// every route: API Gateway's request id behind AWS (the same value as the
// apigw-requestid header API Gateway adds, and as "requestId" in its access
// log), a new id locally. The request's log lines carry it as
// "api_request_id", so a client quoting it finds them.
const RequestIDHeader = "X-Request-Id"

// WithRequestID answers every request of h with its id in RequestIDHeader:
// API Gateway's request id when the context has one (LambdaHandler puts it
// there), else a new random id, which then goes into the request's context
// for the log lines. A client's own X-Request-Id is not taken: the id must
// name one request, and a client could name another's.
func WithRequestID(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := logging.APIRequestID(r.Context())
		if id == "" {
			id = NewRequestID()
			r = r.WithContext(logging.WithAPIRequestID(r.Context(), id))
		}
		w.Header()[RequestIDHeader] = []string{id}
		h.ServeHTTP(w, r)
	})
}

// NewRequestID is a random request id (32 hex digits).
func NewRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
