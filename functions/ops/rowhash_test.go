package ops

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/snapshot"
)

// pgString writes s as PostgreSQL's jsonb output does (escape_json).
func pgString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				fmt.Fprintf(b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}

// pgObject prints a flat object as jsonb's output does: keys by length,
// then bytes; ", " and ": ".
func pgObject(keys []string, values []string) string {
	idx := make([]int, len(keys))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if len(keys[a]) != len(keys[b]) {
			return len(keys[a]) - len(keys[b])
		}
		return strings.Compare(keys[a], keys[b])
	})
	var b strings.Builder
	b.WriteByte('{')
	for k, i := range idx {
		if k > 0 {
			b.WriteString(", ")
		}
		pgString(&b, keys[i])
		b.WriteString(": ")
		b.WriteString(values[i])
	}
	b.WriteByte('}')
	return b.String()
}

// The fast path writes exactly what the canonical form is, for every flat
// object as PostgreSQL prints it, and leaves the rest to the reference.
func TestRowHasherFastPathIsCanonical(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "b", "price", "Ünïcode", "€", "–", "\u2028", "\u2029", "\"", "\\", "\n", "\t", "\x01", "\x7f", " ", "/", "<>&", "😀", "z", "0"}
	word := func() string {
		var b strings.Builder
		for k := rng.IntN(4); k >= 0; k-- {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	fast, slow := 0, 0
	var rh rowHasher
	for i := 0; i < 5000; i++ {
		seen := map[string]bool{}
		var keys, values []string
		for k := rng.IntN(14); k > 0; k-- {
			key := word()
			if seen[key] {
				continue
			}
			seen[key] = true
			keys = append(keys, key)
			var v strings.Builder
			switch rng.IntN(6) {
			case 0:
				v.WriteString([]string{"1000", "2.50", "-0.001", "0", "12345678901234567890", "true", "false", "null"}[rng.IntN(8)])
			case 1:
				v.WriteString(`{"x": [1, "y"]}`)
			default:
				pgString(&v, word())
			}
			values = append(values, v.String())
		}
		text := pgObject(keys, values)
		require.True(t, utf8.ValidString(text))
		want, err := snapshot.Canonicalize([]byte(text))
		require.NoError(t, err, text)
		if got, ok := rh.fast([]byte(text)); ok {
			fast++
			require.Equal(t, string(want), string(got), "fast path of %s", text)
		} else {
			slow++
		}
		require.Equal(t, snapshot.HashAttributes(want), rh.hash([]byte(text)), text)
	}
	require.Greater(t, fast, 300)
	require.Greater(t, slow, 100)
	require.Equal(t, snapshot.Hash{}, rh.hash([]byte("not json")))
	require.Equal(t, snapshot.HashAttributes([]byte("{}")), rh.hash([]byte("{}")))
	require.False(t, bytes.Equal(rh.buf, nil))
}
