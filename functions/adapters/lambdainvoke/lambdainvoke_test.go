package lambdainvoke_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/adapters/lambdainvoke"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// A fake Lambda Invoke API: the delivery arrives as the function's event,
// the function's answer is the result; a function error is an error.
func TestPosterInvokesTheSender(t *testing.T) {
	t.Parallel()
	var got webhook.Delivery
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		body, _ := io.ReadAll(r.Body)
		require.NoError(t, json.Unmarshal(body, &got))
		if got.EventID == "crash" {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
			w.Write([]byte(`{"errorMessage":"boom"}`))
			return
		}
		json.NewEncoder(w).Encode(webhook.Result{Status: 503, Error: "webhook answered 503 Service Unavailable"})
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}
	p := lambdainvoke.NewPoster(lambdainvoke.NewClient(cfg, srv.URL), "catalog-webhook-sender")
	d := webhook.Delivery{URL: "https://hooks.example.com/x", EventID: "r1:3:applied", Signature: "sha256=ab", Body: []byte(`{"id":"r1:3:applied"}`)}
	res, err := p.Post(context.Background(), d)
	require.NoError(t, err)
	require.Equal(t, webhook.Result{Status: 503, Error: "webhook answered 503 Service Unavailable"}, res)
	require.Equal(t, d, got, "the delivery as sent, body byte for byte")
	require.True(t, strings.HasSuffix(path, "/functions/catalog-webhook-sender/invocations"), path)
	require.False(t, res.Delivered())

	d.EventID = "crash"
	_, err = p.Post(context.Background(), d)
	require.ErrorContains(t, err, "boom")
}
