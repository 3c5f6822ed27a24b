package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/platform/logging"
)

// LambdaHandler serves h behind API Gateway's HTTP API (payload format 2.0):
// the request is rebuilt as an *http.Request (raw, still percent-encoded path,
// so a product_id holding "/" stays one segment) and the recorded response is
// returned as the proxy response. API Gateway's request id goes into the
// request's context, for every log line (package logging), and into every
// answer's X-Request-Id header (WithRequestID).
func LambdaHandler(h http.Handler) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	h = WithRequestID(h)
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		ctx = logging.WithAPIRequestID(ctx, req.RequestContext.RequestID)
		httpReq, err := RequestFromAPIGateway(ctx, req)
		if err != nil {
			// An event no HTTP request can be rebuilt from: answered in the
			// contract's error shape like any other 400.
			rec := httptest.NewRecorder()
			WithRequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				WriteJSON(w, http.StatusBadRequest, ErrorBody{ErrorDetail{Code: "bad_request", Message: err.Error()}})
			})).ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/", nil))
			return proxyResponse(rec), nil
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httpReq)
		return proxyResponse(rec), nil
	}
}

// proxyResponse is the API Gateway answer of a recorded response.
func proxyResponse(rec *httptest.ResponseRecorder) events.APIGatewayV2HTTPResponse {
	resp := events.APIGatewayV2HTTPResponse{StatusCode: rec.Code, Headers: map[string]string{}}
	for k, v := range rec.Header() {
		resp.Headers[k] = strings.Join(v, ",")
	}
	resp.Body = rec.Body.String()
	return resp
}

// RequestFromAPIGateway rebuilds the HTTP request API Gateway received.
func RequestFromAPIGateway(ctx context.Context, req events.APIGatewayV2HTTPRequest) (*http.Request, error) {
	path := req.RawPath
	if path == "" {
		path = "/"
	}
	u, err := url.Parse(path)
	if err != nil {
		return nil, fmt.Errorf("bad path %q: %w", path, err)
	}
	u.RawQuery = req.RawQueryString
	body := req.Body
	if req.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, fmt.Errorf("bad base64 body: %w", err)
		}
		body = string(b)
	}
	method := req.RequestContext.HTTP.Method
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequestWithContext(ctx, method, u.String(), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range req.Headers {
		r.Header.Set(k, v)
	}
	if len(req.Cookies) > 0 {
		r.Header.Set("Cookie", strings.Join(req.Cookies, "; "))
	}
	r.RemoteAddr = req.RequestContext.HTTP.SourceIP
	return r, nil
}

// MaxLambdaBodyBytes bounds an answer's body as the Lambda proxy response
// carries it (LambdaStringBytes): Lambda returns at most 6,291,556 bytes,
// and the rest is the status and headers'. A body of N bytes takes up to
// 2N there (each quote and backslash is escaped, U+2028 and U+2029 take
// six bytes for three), so one under MaxLambdaBodyBytes/2 always fits.
const MaxLambdaBodyBytes = 6_000_000

// FitsLambdaResponse reports whether body, escaped into a Lambda proxy
// response, stays within MaxLambdaBodyBytes (counted only for a body that
// may not: one under half of it, quotes and newline included, always fits).
func FitsLambdaResponse(body []byte) bool {
	return len(body) <= (MaxLambdaBodyBytes-3)/2 || LambdaStringBytes(body) <= MaxLambdaBodyBytes
}

// LambdaStringBytes is how many bytes body takes in a Lambda proxy
// response, where it is a JSON string as the runtime encodes it
// (aws-lambda-go: HTML characters not escaped), quotes and a newline
// included.
func LambdaStringBytes(body []byte) int {
	var n countingWriter
	enc := json.NewEncoder(&n)
	enc.SetEscapeHTML(false)
	enc.Encode(string(body))
	return int(n)
}

// countingWriter counts what is written to it.
type countingWriter int

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
