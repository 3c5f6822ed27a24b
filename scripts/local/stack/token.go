package stack

import (
	"crypto/rand"
	"encoding/base64"
)

// NewAdminToken returns a fresh random admin token.
func NewAdminToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "adm_" + base64.RawURLEncoding.EncodeToString(b)
}
