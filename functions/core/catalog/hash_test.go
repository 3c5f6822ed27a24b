package catalog

import (
	"crypto/sha256"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHash(t *testing.T) {
	sum := sha256.Sum256([]byte("{}"))
	h := HashAttributes([]byte("{}"))
	require.Equal(t, sum[:16], h[:])
	require.Equal(t, "44136fa355b3678a1146ad16f7e8649e", h.String())
	back, err := ParseHash(h.String())
	require.NoError(t, err)
	require.Equal(t, h, back)
	for _, bad := range []string{"", "44136fa355b3678a1146ad16f7e8649", "44136fa355b3678a1146ad16f7e8649g", h.String() + "00"} {
		_, err := ParseHash(bad)
		require.Error(t, err, bad)
	}
	b, err := json.Marshal(map[string]Hash{"h": h})
	require.NoError(t, err)
	require.Equal(t, `{"h":"44136fa355b3678a1146ad16f7e8649e"}`, string(b))
	var m map[string]Hash
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, h, m["h"])
	require.Error(t, json.Unmarshal([]byte(`{"h":"xyz"}`), &m))
}
