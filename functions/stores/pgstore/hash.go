package pgstore

import (
	"encoding/hex"
	"fmt"
)

func decodeHash(s string) ([]byte, error) {
	h, err := hex.DecodeString(s)
	if err != nil || len(h) != 16 {
		return nil, fmt.Errorf("bad content hash %q", s)
	}
	return h, nil
}
