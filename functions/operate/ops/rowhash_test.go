package ops

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retailcatalog/catalog/functions/core/catalog"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/snapshot"
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
		require.Equal(t, catalog.HashAttributes(want), rh.hash([]byte(text)), text)
	}
	require.Greater(t, fast, 300)
	require.Greater(t, slow, 100)
	require.Equal(t, catalog.Hash{}, rh.hash([]byte("not json")))
	require.Equal(t, catalog.HashAttributes([]byte("{}")), rh.hash([]byte("{}")))
	require.False(t, bytes.Equal(rh.buf, nil))
}

// Rows of one shape (the same keys) are matched against the last row's
// shape; a row that is not of it (a key more or less, a key that extends
// or prefixes one of the shape's, a nested value where the shape had a
// scalar) is parsed anew. Every row hashes as the reference does.
func TestRowHasherShapes(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	shapes := [][]string{
		{"gtin", "size", "brand", "price", "title", "description", "availability"},
		{"gtin", "size", "brand", "price", "title", "description", "availability", "extra"},
		{"gtin", "size", "brand", "price", "title", "description"},
		{"gti", "size", "brand", "price", "title", "description", "availability"},
		{"gtinn", "size", "brand", "price", "title", "description", "availability"},
		{"a", "ab", "b", "ba", "B", "é", `a\b`},
		{"x"},
	}
	values := []string{`""`, `"S"`, `"Globex \"soft\" tee"`, `"a\\"`, `"\\"`, `"x\ny\t\u0001"`, `"€ – 😀"`, `" "`, `"a, \"b\": c"`,
		`", \"size\": "`, `"}"`, `1000`, `-0.001`, `12345678901234567890.5`, `true`, `false`, `null`, `{"n": [1, "y"]}`, `[]`}
	var rh rowHasher
	shaped := 0
	for i := 0; i < 20000; i++ {
		keys := shapes[0]
		if rng.IntN(4) == 0 {
			keys = shapes[rng.IntN(len(shapes))]
		}
		vals := make([]string, len(keys))
		for k := range vals {
			if rng.IntN(3) == 0 {
				vals[k] = values[rng.IntN(len(values))]
			} else {
				vals[k] = values[rng.IntN(3)]
			}
		}
		text := pgObject(keys, vals)
		want, err := snapshot.Canonicalize([]byte(text))
		require.NoError(t, err, text)
		matched := len(rh.shape) > 0
		if got, ok := rh.fast([]byte(text)); ok {
			require.Equal(t, string(want), string(got), "fast path of %s", text)
			if matched && len(rh.vals) == len(keys) {
				shaped++
			}
		}
		require.Equal(t, catalog.HashAttributes(want), rh.hash([]byte(text)), text)
	}
	require.Greater(t, shaped, 5000)
}

// BenchmarkRowHasher: a typical row of a CSV upload's catalog (12 string
// members) as PostgreSQL prints it, hashed afresh.
func BenchmarkRowHasher(b *testing.B) {
	row := []byte(`{"gtin": "6153715647728", "size": "S", "brand": "Globex", "color": "black", "price": "53.57", "title": "Globex slim cotton tee", "updated": "2025-01-08T10:45:00Z", "category": "Electronics > Audio", "currency": "USD", "image_url": "https://img.example.com/p/0010000000.jpg", "description": "The \"soft\" one, in black", "availability": "preorder"}`)
	var rh rowHasher
	b.SetBytes(int64(len(row)))
	b.ReportAllocs()
	for b.Loop() {
		rh.hash(row)
	}
}
