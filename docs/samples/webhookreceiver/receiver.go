// Package webhookreceiver receives the catalog's webhook deliveries.
package webhookreceiver

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
)

// Verify reports whether signature (the X-Catalog-Signature header) is
// the HMAC-SHA256 of body with secret.
func Verify(secret, body []byte, signature string) bool {
	got, err := hex.DecodeString(strings.TrimPrefix(signature, "sha256="))
	if err != nil || !strings.HasPrefix(signature, "sha256=") {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Handler receives the catalog's deliveries.
func Handler(secret []byte, handle func(eventID string, body []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !Verify(secret, body, r.Header.Get("X-Catalog-Signature")) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if err := handle(r.Header.Get("X-Catalog-Event-Id"), body); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable) // retried later
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}
