package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
)

// Hash is the content hash of a product's canonical attributes.
type Hash [16]byte

// HashAttributes returns the first 16 bytes of the SHA-256 of canonical.
func HashAttributes(canonical []byte) Hash {
	sum := sha256.Sum256(canonical)
	var h Hash
	copy(h[:], sum[:16])
	return h
}

// String returns h in lowercase hex (32 characters).
func (h Hash) String() string {
	return hex.EncodeToString(h[:])
}

// MarshalText encodes h as String does, so that h is a hex string in JSON.
func (h Hash) MarshalText() ([]byte, error) {
	return []byte(h.String()), nil
}

// UnmarshalText decodes the form written by MarshalText.
func (h *Hash) UnmarshalText(text []byte) error {
	v, err := ParseHash(string(text))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// ParseHash parses the 32-character hex form written by Hash.String.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return h, fmt.Errorf("snapshot: hash %q: want %d hex digits", s, 2*len(h))
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return Hash{}, fmt.Errorf("snapshot: hash %q: %v", s, err)
	}
	return h, nil
}
