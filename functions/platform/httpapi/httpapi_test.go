package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/logging"
)

// The API Gateway adapter rebuilds the request with the raw path, so a
// percent-encoded "/" in a product id stays inside one path segment.
func TestLambdaHandlerKeepsEncodedSegments(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/retailers/{retailer_id}/products/{product_id}", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{
			"retailer": r.PathValue("retailer_id"), "product": r.PathValue("product_id"),
			"q": r.URL.Query().Get("q"), "auth": r.Header.Get("Authorization"),
		})
	})
	h := httpapi.LambdaHandler(mux)
	resp, err := h(context.Background(), events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/retailers/r1/products/a%2Fb%20c", RawQueryString: "q=x%20y",
		Headers:        map[string]string{"authorization": "Bearer t"},
		RequestContext: events.APIGatewayV2HTTPRequestContext{HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}},
	})
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode)
	require.JSONEq(t, `{"retailer":"r1","product":"a/b c","q":"x y","auth":"Bearer t"}`, resp.Body)
	require.Equal(t, "application/json", resp.Headers["Content-Type"])
}

func TestWriteErrorMapsKindsToStatuses(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for kind, status := range map[error]int{
		catalog.ErrInvalid: 400, catalog.ErrUnauthorized: 401, catalog.ErrForbidden: 403,
		catalog.ErrNotFound: 404, catalog.ErrConflict: 409, catalog.ErrTooLarge: 413, catalog.ErrRateLimited: 429,
	} {
		rec := httptest.NewRecorder()
		httpapi.WriteError(rec, httptest.NewRequest("GET", "/", nil), log, catalog.Errorf(kind, "some_code", "msg"))
		require.Equal(t, status, rec.Code, kind.Error())
		require.JSONEq(t, `{"error":{"code":"some_code","message":"msg"}}`, rec.Body.String())
	}
	limited := catalog.Errorf(catalog.ErrRateLimited, "too_many_reservations", "msg")
	limited.RetryAfter = 1500 * time.Millisecond
	rec := httptest.NewRecorder()
	httpapi.WriteError(rec, httptest.NewRequest("POST", "/", nil), log, limited)
	require.Equal(t, 429, rec.Code)
	require.Equal(t, "2", rec.Header().Get("Retry-After"), "whole seconds, rounded up")
	rec = httptest.NewRecorder()
	httpapi.WriteError(rec, httptest.NewRequest("GET", "/", nil), log, errors.New("db password in here"))
	require.Equal(t, 500, rec.Code)
	require.NotContains(t, rec.Body.String(), "password", "internal details stay in the log")
}

func TestETagAndNotModified(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	httpapi.WriteCacheableJSON(rec, httptest.NewRequest("GET", "/", nil), "public, max-age=60", map[string]int{"a": 1})
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)
	require.Equal(t, "public, max-age=60", rec.Header().Get("Cache-Control"))
	for _, inm := range []string{etag, `"x", ` + etag, "W/" + etag, "*"} {
		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("If-None-Match", inm)
		rec = httptest.NewRecorder()
		httpapi.WriteCacheableJSON(rec, req, "", map[string]int{"a": 1})
		require.Equal(t, http.StatusNotModified, rec.Code, inm)
		require.Empty(t, rec.Body.String())
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("If-None-Match", `"other"`)
	rec = httptest.NewRecorder()
	httpapi.WriteCacheableJSON(rec, req, "", map[string]int{"a": 1})
	require.Equal(t, http.StatusOK, rec.Code)
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	var v struct{ A string }
	for body, want := range map[string]error{
		``:             nil,
		`{"A":"x"}`:    nil,
		`{"B":"x"}`:    catalog.ErrInvalid,
		`{"A":"x"} {}`: catalog.ErrInvalid,
		`{"A":"` + strings.Repeat("x", 100) + `"}`: catalog.ErrTooLarge,
	} {
		req := httptest.NewRequest("POST", "/", strings.NewReader(body))
		err := httpapi.DecodeJSON(req, 50, &v)
		if want == nil {
			require.NoError(t, err, body)
		} else {
			require.ErrorIs(t, err, want, body)
		}
	}
}

// Behind API Gateway every log line of a request carries both request ids:
// Lambda's (from the invocation's context) and API Gateway's.
func TestLambdaHandlerLogsBothRequestIDs(t *testing.T) {
	t.Parallel()
	var buf strings.Builder
	log := logging.New(&buf, slog.LevelInfo)
	h := httpapi.LambdaHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.InfoContext(r.Context(), "handled")
		httpapi.WriteJSON(w, http.StatusOK, struct{}{})
	}))
	ctx := logging.WithLambdaRequestID(context.Background(), "lambda-req")
	_, err := h(ctx, events.APIGatewayV2HTTPRequest{RawPath: "/healthz",
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "apigw-req",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}})
	require.NoError(t, err)
	require.Contains(t, buf.String(), `"request_id":"lambda-req"`)
	require.Contains(t, buf.String(), `"api_request_id":"apigw-req"`)
}

// Every answer behind API Gateway carries API Gateway's request id in
// X-Request-Id, the id of the request's log lines; an event no request can
// be rebuilt from gets a 400 in the contract's shape (JSON, Content-Type,
// the id), whatever its error says.
func TestLambdaHandlerAnswersWithTheRequestID(t *testing.T) {
	t.Parallel()
	h := httpapi.LambdaHandler(http.HandlerFunc(httpapi.NotFound))
	req := events.APIGatewayV2HTTPRequest{RawPath: "/nowhere",
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "JdWjNhfkoAMEVkQ=",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET"}}}
	resp, err := h(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 404, resp.StatusCode)
	require.Equal(t, "JdWjNhfkoAMEVkQ=", resp.Headers["X-Request-Id"])

	req.RawPath, req.Body, req.IsBase64Encoded = "/v1/x", `not base64 "quoted" \ `, true
	resp, err = h(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, 400, resp.StatusCode)
	require.Equal(t, "application/json", resp.Headers["Content-Type"])
	require.Equal(t, "JdWjNhfkoAMEVkQ=", resp.Headers["X-Request-Id"])
	var body httpapi.ErrorBody
	require.NoError(t, json.Unmarshal([]byte(resp.Body), &body), resp.Body)
	require.Equal(t, "bad_request", body.Error.Code)
	require.Contains(t, body.Error.Message, "bad base64 body")
}

// Locally (no API Gateway) each request gets a new id, in the answer and
// in the context its log lines are written with.
func TestWithRequestIDMakesOneLocally(t *testing.T) {
	t.Parallel()
	var inContext string
	h := httpapi.WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inContext = logging.APIRequestID(r.Context())
		w.WriteHeader(http.StatusNoContent)
	}))
	seen := map[string]bool{}
	for range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		id := rec.Header().Get("X-Request-Id")
		require.Len(t, id, 32)
		require.Equal(t, id, inContext)
		seen[id] = true
	}
	require.Len(t, seen, 3, "a new id per request")
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Request-Id", "chosen-by-the-client")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.NotEqual(t, "chosen-by-the-client", rec.Header().Get("X-Request-Id"))
}

// A value quoted in an error message is cut to 32 bytes of valid UTF-8.
func TestShortened(t *testing.T) {
	t.Parallel()
	require.Equal(t, "12", httpapi.Shortened("12"))
	long := strings.Repeat("9", 5000)
	require.Equal(t, long[:32]+"…", httpapi.Shortened(long))
	require.Equal(t, strings.Repeat("a", 31)+"…", httpapi.Shortened(strings.Repeat("a", 31)+"é"+"xx"), "no half character")
}
