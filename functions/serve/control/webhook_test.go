package control_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/serve/control"
)

type resolver map[string]string

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(a)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// The webhook routes: saved with a URL the policy accepts and a sealed
// secret, shown without the secret, removed; another retailer's token 403.
func TestWebhookRoutes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	box, err := webhook.ParseKeys(webhook.NewKey())
	require.NoError(t, err)
	f.Control.EnableWebhooks(control.Webhooks{Store: f.Store, Secrets: box,
		Policy: webhook.Policy{Resolver: resolver{"hooks.example.com": "93.184.216.34", "evil.example.com": "127.0.0.1"}}})
	token := f.Onboard("r1")
	other := f.Onboard("r2")
	const path = "/v1/retailers/r1/webhook"

	var e errorBody
	require.Equal(t, http.StatusNotFound, f.Call("GET", path, token, "", &e))
	require.Equal(t, "webhook_not_found", e.Error.Code)
	for _, bad := range []string{"http://169.254.169.254/", "https://10.0.0.1/", "https://evil.example.com/", "http://127.0.0.1:8080/"} {
		e = errorBody{}
		require.Equal(t, http.StatusBadRequest, f.Call("PUT", path, token, `{"url":"`+bad+`","secret":"0123456789abcdef"}`, &e), bad)
		require.Equal(t, "invalid_webhook_url", e.Error.Code, bad)
	}
	require.Equal(t, http.StatusBadRequest, f.Call("PUT", path, token, `{"url":"https://hooks.example.com/x","secret":"short"}`, &e))
	require.Equal(t, "invalid_webhook_secret", e.Error.Code)
	require.Equal(t, http.StatusForbidden, f.Call("PUT", path, other, `{"url":"https://hooks.example.com/x","secret":"0123456789abcdef"}`, nil))

	var got struct{ URL string }
	require.Equal(t, http.StatusOK, f.Call("PUT", path, token, `{"url":"https://hooks.example.com/x","secret":"0123456789abcdef"}`, &got))
	require.Equal(t, "https://hooks.example.com/x", got.URL)
	stored, err := f.Store.Webhook(context.Background(), "r1")
	require.NoError(t, err)
	require.NotContains(t, string(stored.SecretSealed), "0123456789abcdef", "the secret is sealed")
	secret, err := box.Open("r1", stored.SecretSealed)
	require.NoError(t, err)
	require.Equal(t, "0123456789abcdef", string(secret))

	var raw map[string]any
	require.Equal(t, http.StatusOK, f.Call("GET", path, token, "", &raw))
	require.Equal(t, map[string]any{"url": "https://hooks.example.com/x"}, raw, "never the secret")
	require.Equal(t, http.StatusNoContent, f.Call("DELETE", path, token, "", nil))
	require.Equal(t, http.StatusNoContent, f.Call("DELETE", path, token, "", nil))
	require.Equal(t, http.StatusNotFound, f.Call("GET", path, token, "", nil))
	require.Equal(t, http.StatusUnauthorized, f.Call("GET", path, "", "", nil))
	require.True(t, strings.Contains(strings.Join(f.Control.Routes(), " "), "PUT /v1/retailers/{retailer_id}/webhook"))
}
