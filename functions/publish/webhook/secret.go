package webhook

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// SecretBox seals webhook secrets for the database and opens them for a
// delivery.
//
// Why sealed, not hashed: the signature is an HMAC of each delivery under
// the secret, so the consumer needs the secret itself, or (the "hash for
// HMAC" alternative) the two SHA-256 states of the HMAC key padded with
// ipad and opad, from which anyone can sign exactly as with the secret. A
// database that stored those would hand every retailer's signing power to
// whoever reads it. Sealed with AES-256-GCM under a key kept outside the
// database (Secrets Manager on AWS, a file in the data dir locally), a
// stolen table alone signs nothing; the retailer id is the associated
// data, so a sealed secret copied to another retailer's row does not open.
//
// Keys rotate: the first key seals, every key opens (each sealed secret
// names its key by a 4-byte id).
type SecretBox struct {
	keys []boxKey
}

type boxKey struct {
	id   [4]byte
	aead cipher.AEAD
}

// sealVersion is the first byte of a sealed secret.
const sealVersion = 1

// KeyBytes is the length of a key.
const KeyBytes = 32

// NewSecretBox builds a box from keys of KeyBytes each, the first sealing.
func NewSecretBox(keys ...[]byte) (*SecretBox, error) {
	if len(keys) == 0 {
		return nil, errors.New("webhook secrets: no key")
	}
	b := &SecretBox{}
	for i, k := range keys {
		if len(k) != KeyBytes {
			return nil, fmt.Errorf("webhook secrets: key %d has %d bytes, want %d", i+1, len(k), KeyBytes)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(k)
		var id [4]byte
		copy(id[:], sum[:4])
		b.keys = append(b.keys, boxKey{id: id, aead: aead})
	}
	return b, nil
}

// ParseKeys builds a box from comma-separated keys (CATALOG_WEBHOOK_KEYS),
// the first sealing. A key is KeyBytes in base64 (NewKey), or a passphrase
// of at least MinPassphrase characters whose SHA-256 is the key: what a
// secret store generates (infra's webhook-keys secret is 64 random
// letters and digits).
func ParseKeys(v string) (*SecretBox, error) {
	var keys [][]byte
	for i, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(s)
		switch {
		case err == nil && len(k) == KeyBytes:
		case len(s) >= MinPassphrase:
			sum := sha256.Sum256([]byte(s))
			k = sum[:]
		default:
			return nil, fmt.Errorf("webhook secrets: key %d is neither %d bytes in base64 nor a passphrase of %d characters or more", i+1, KeyBytes, MinPassphrase)
		}
		keys = append(keys, k)
	}
	return NewSecretBox(keys...)
}

// MinPassphrase is the shortest passphrase ParseKeys takes for a key.
const MinPassphrase = 40

// NewKey returns a random key, base64 (what ParseKeys reads).
func NewKey() string {
	k := make([]byte, KeyBytes)
	rand.Read(k)
	return base64.StdEncoding.EncodeToString(k)
}

// Seal seals a retailer's secret: version, key id, nonce, ciphertext.
func (b *SecretBox) Seal(retailerID string, secret []byte) ([]byte, error) {
	k := b.keys[0]
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte{sealVersion}, k.id[:]...)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, secret, []byte(retailerID)), nil
}

// Open opens what Seal sealed for the same retailer.
func (b *SecretBox) Open(retailerID string, sealed []byte) ([]byte, error) {
	if len(sealed) < 5 || sealed[0] != sealVersion {
		return nil, errors.New("webhook secret: not a sealed secret")
	}
	for _, k := range b.keys {
		if string(k.id[:]) != string(sealed[1:5]) {
			continue
		}
		rest := sealed[5:]
		if len(rest) < k.aead.NonceSize() {
			return nil, errors.New("webhook secret: truncated")
		}
		secret, err := k.aead.Open(nil, rest[:k.aead.NonceSize()], rest[k.aead.NonceSize():], []byte(retailerID))
		if err != nil {
			return nil, fmt.Errorf("webhook secret of %s does not open: %w", retailerID, err)
		}
		return secret, nil
	}
	return nil, errors.New("webhook secret: sealed with a key this function does not have (CATALOG_WEBHOOK_KEYS)")
}
