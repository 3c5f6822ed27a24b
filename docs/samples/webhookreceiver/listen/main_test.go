package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// A delivery signed with the secret prints the line docs/RETAILERS.md
// shows; one signed with another secret gets 401 and a line on stderr.
func TestPrinter(t *testing.T) {
	t.Parallel()
	secret := []byte("0123456789abcdef0123456789abcdef")
	var out, errOut bytes.Buffer
	srv := httptest.NewServer(printer(secret, &out, &errOut))
	t.Cleanup(srv.Close)
	body := []byte(`{"id":"acme:3:applied","type":"catalog.snapshot.applied","time":"2026-12-01T04:00:00Z","retailer_id":"acme","generation":3,` +
		`"status":{"retailer_id":"acme","generation":3,"state":"applied","error":null}}`)
	post := func(key []byte) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/", bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderEventID, "acme:3:applied")
		req.Header.Set(webhook.HeaderSignature, webhook.Sign(key, body))
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusNoContent, post(secret))
	require.Equal(t, http.StatusUnauthorized, post([]byte("another secret, 16 bytes or more")))
	require.Contains(t, errOut.String(), "did not verify")

	guide, err := os.ReadFile("../../../RETAILERS.md")
	require.NoError(t, err)
	section := string(guide)[strings.Index(string(guide), "### Trying it on the local stack"):]
	shown := regexp.MustCompile("(?s)```text\n(.*?)\n```").FindStringSubmatch(section)
	require.NotNil(t, shown, "docs/RETAILERS.md shows what the receiver prints")
	require.Equal(t, shown[1]+"\n", out.String(), "one line, as the guide shows it")
}
