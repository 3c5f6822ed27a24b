package stack

import (
	"crypto/rand"
	"encoding/base64"
)

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "adm_" + base64.RawURLEncoding.EncodeToString(b)
}
