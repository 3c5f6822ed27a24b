package webhook_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// fakeResolver answers from a table.
type fakeResolver map[string][]string

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := f[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

var names = fakeResolver{
	"hooks.example.com": {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
	"evil.example.com":  {"127.0.0.1"},
	"mixed.example.com": {"93.184.216.34", "10.0.0.7"},
	"meta.example.com":  {"169.254.169.254"},
}

// On AWS settings: https to public addresses only, whatever the URL says.
func TestAWSPolicyRefusesSSRF(t *testing.T) {
	t.Parallel()
	p := webhook.Policy{Resolver: names}
	ctx := context.Background()
	_, err := p.CheckURL(ctx, "https://hooks.example.com/catalog?k=1")
	require.NoError(t, err)
	_, err = p.CheckURL(ctx, "https://93.184.216.34:8443/x")
	require.NoError(t, err)
	for _, bad := range []string{
		"http://169.254.169.254/",                  // metadata, and not https
		"https://169.254.169.254/latest/meta-data", // metadata
		"http://10.0.0.1/",
		"https://10.0.0.1/",
		"https://172.16.3.4/", "https://192.168.1.1/", "https://100.64.0.1/", "https://0.0.0.0/",
		"https://evil.example.com/",  // a name resolving to 127.0.0.1
		"https://mixed.example.com/", // one private address is enough
		"https://meta.example.com/",
		"https://[::1]/", "https://[fd00:ec2::254]/", "https://[::ffff:10.0.0.1]/", "https://[fe80::1]/",
		"https://[64:ff9b::a00:1]/", "https://[2002:a00:1::]/",
		"https://localhost/",     // does not resolve here; refused either way
		"http://127.0.0.1:8080/", // the local exception is off
		"https://user:pw@hooks.example.com/",
		"https://hooks.example.com/#frag",
		"ftp://hooks.example.com/",
		"hooks.example.com/path",
		"https://" + strings.Repeat("a", 3000) + ".com/",
		"https://93.184.216.34:0/x", "https://93.184.216.34:99999/x", // no such port
	} {
		_, err := p.CheckURL(ctx, bad)
		require.Error(t, err, bad)
		require.ErrorIs(t, err, catalog.ErrInvalid, bad)
	}
}

func TestLocalPolicyAllowsLoopbackHTTP(t *testing.T) {
	t.Parallel()
	p := webhook.Policy{AllowLoopbackHTTP: true, Resolver: names}
	ctx := context.Background()
	_, err := p.CheckURL(ctx, "http://127.0.0.1:9999/hook")
	require.NoError(t, err)
	for _, bad := range []string{"http://127.0.0.1/hook", "http://localhost:9999/", "http://10.0.0.1:80/", "https://evil.example.com/",
		"http://127.0.0.1:0/hook", "http://127.0.0.1:65536/hook"} {
		_, err := p.CheckURL(ctx, bad)
		require.Error(t, err, bad)
	}
}

// The client checks the address each connection really reaches (a name
// that resolved to a public address at save time may not now), and
// follows no redirect.
func TestClientRefusesPrivateConnectionsAndRedirects(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	_, err := webhook.Policy{}.Client().Post(srv.URL, "application/json", strings.NewReader("{}"))
	require.Error(t, err, "AWS settings: no connection to 127.0.0.1")
	require.True(t, strings.Contains(err.Error(), "non-public"), err)

	local := webhook.Policy{AllowLoopbackHTTP: true}.Client()
	resp, err := local.Post(srv.URL, "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	resp, err = local.Post(srv.URL+"/redirect", "application/json", strings.NewReader("{}"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "a redirect is answered, not followed")
}

func TestSignature(t *testing.T) {
	t.Parallel()
	// RFC 4231 test case 2.
	sig := webhook.Sign([]byte("Jefe"), []byte("what do ya want for nothing?"))
	require.Equal(t, "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843", sig)
	require.True(t, webhook.Verify([]byte("Jefe"), []byte("what do ya want for nothing?"), sig))
	require.False(t, webhook.Verify([]byte("Jefe"), []byte("what do ya want for nothing!"), sig))
}

func TestSecretBox(t *testing.T) {
	t.Parallel()
	oldKey, newKey := webhook.NewKey(), webhook.NewKey()
	old, err := webhook.ParseKeys(oldKey)
	require.NoError(t, err)
	sealed, err := old.Seal("r1", []byte("s3cret-s3cret-s3cret"))
	require.NoError(t, err)
	require.NotContains(t, string(sealed), "s3cret")
	got, err := old.Open("r1", sealed)
	require.NoError(t, err)
	require.Equal(t, "s3cret-s3cret-s3cret", string(got))
	_, err = old.Open("r2", sealed)
	require.Error(t, err, "bound to its retailer")

	rotated, err := webhook.ParseKeys(newKey + "," + oldKey)
	require.NoError(t, err)
	got, err = rotated.Open("r1", sealed)
	require.NoError(t, err, "an old key still opens")
	require.Equal(t, "s3cret-s3cret-s3cret", string(got))
	resealed, err := rotated.Seal("r1", got)
	require.NoError(t, err)
	_, err = old.Open("r1", resealed)
	require.Error(t, err, "the new key seals")

	_, err = webhook.ParseKeys("")
	require.Error(t, err)
	_, err = webhook.ParseKeys("c2hvcnQ=")
	require.Error(t, err)
	_, err = webhook.ParseKeys(newKey + ",short-passphrase")
	require.Error(t, err)
	// A generated passphrase (as Secrets Manager makes one) is a key too,
	// its SHA-256; rotation works the same.
	pass := strings.Repeat("Ab3", 21)
	byPass, err := webhook.ParseKeys(pass)
	require.NoError(t, err)
	sealed, err = byPass.Seal("r1", []byte("s3cret-s3cret-s3cret"))
	require.NoError(t, err)
	rotated, err = webhook.ParseKeys(newKey + "," + pass)
	require.NoError(t, err)
	got, err = rotated.Open("r1", sealed)
	require.NoError(t, err)
	require.Equal(t, "s3cret-s3cret-s3cret", string(got))
	require.Error(t, webhook.CheckSecret("short"))
	require.NoError(t, webhook.CheckSecret(strings.Repeat("x", 16)))
	require.True(t, errors.Is(webhook.CheckSecret(strings.Repeat("x", 257)), catalog.ErrInvalid))
}
