package ops

import (
	"bytes"
	"slices"

	"github.com/retailcatalog/catalog/functions/snapshot"
)

// rowHasher computes the content hash of stored attributes afresh: the
// hash of their canonical form, as the diff hashes a snapshot row. It keeps
// its buffers between rows (one per walk, not for concurrent use).
//
// PostgreSQL prints a jsonb object as {"key": value, ...}: keys sorted by
// length, then bytes, ", " and ": " between, strings escaped as the
// canonical form escapes them (", \, \b \f \n \r \t, \u00XX) except
// U+2028 and U+2029, numbers in numeric's form. So a flat object (no
// nested object or array), with no backslash in a key and no U+2028 or
// U+2029, is canonical once its members are sorted by the keys' bytes and
// the spaces dropped: the fast path,
// about a microsecond a row. Anything else goes through
// snapshot.Canonicalizer, the reference (and the catalog of a CSV upload,
// all strings, never does).
type rowHasher struct {
	canon snapshot.Canonicalizer
	buf   []byte
	mems  []member
	// The keys of the last row, in the database's order, and the order
	// that sorts them: the rows of one catalog mostly share their keys, so
	// the sort is mostly a comparison with the last row's keys.
	lastKeys []byte
	lastEnds []int
	perm     []int
	sorted   []member
}

type member struct {
	key, value []byte // the key without its quotes; the value as printed
}

// hash is the content hash of attributes (a JSON object as the database
// prints it); the zero hash when it is not one (never a real row's).
func (rh *rowHasher) hash(attributes []byte) snapshot.Hash {
	if out, ok := rh.fast(attributes); ok {
		return snapshot.HashAttributes(out)
	}
	out, err := rh.canon.Append(rh.buf[:0], attributes)
	if err != nil {
		return snapshot.Hash{}
	}
	rh.buf = out
	return snapshot.HashAttributes(out)
}

// fast writes the canonical form of a flat object printed by PostgreSQL,
// or reports that the object is not one it can take.
func (rh *rowHasher) fast(s []byte) ([]byte, bool) {
	if hasLineSeparator(s) {
		return nil, false
	}
	n := len(s)
	if n < 2 || s[0] != '{' || s[n-1] != '}' {
		return nil, false
	}
	rh.mems = rh.mems[:0]
	i := 1
	if i < n-1 && s[i] == '}' {
		return append(rh.buf[:0], "{}"...), true
	}
	if n == 2 {
		return append(rh.buf[:0], "{}"...), true
	}
	for {
		// "key"
		if i >= n || s[i] != '"' {
			return nil, false
		}
		end, ok := stringEnd(s, i)
		if !ok {
			return nil, false
		}
		key := s[i+1 : end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return nil, false
		}
		i = end + 1
		// ": "
		if i+1 >= n || s[i] != ':' || s[i+1] != ' ' {
			return nil, false
		}
		i += 2
		// value: a string or a scalar
		start := i
		switch {
		case i < n && s[i] == '"':
			if end, ok = stringEnd(s, i); !ok {
				return nil, false
			}
			i = end + 1
		case i < n && (s[i] == '{' || s[i] == '['):
			return nil, false
		default:
			for i < n && s[i] != ',' && s[i] != '}' {
				i++
			}
		}
		rh.mems = append(rh.mems, member{key: key, value: s[start:i]})
		switch {
		case i == n-1 && s[i] == '}':
			return rh.write(), true
		case i+1 < n && s[i] == ',' && s[i+1] == ' ':
			i += 2
		default:
			return nil, false
		}
	}
}

// hasLineSeparator reports whether s holds U+2028 or U+2029 (E2 80 A8/A9),
// which the canonical form escapes and PostgreSQL does not.
func hasLineSeparator(s []byte) bool {
	for {
		i := bytes.IndexByte(s, 0xE2)
		if i < 0 || i+2 >= len(s) {
			return false
		}
		if s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
			return true
		}
		s = s[i+1:]
	}
}

// stringEnd is the index of the quote that ends the string starting at s[i].
func stringEnd(s []byte, i int) (int, bool) {
	for j := i + 1; ; {
		k := bytes.IndexByte(s[j:], '"')
		if k < 0 {
			return 0, false
		}
		q := j + k
		// The quote ends the string unless an odd run of backslashes escapes it.
		b := q - 1
		for b > i && s[b] == '\\' {
			b--
		}
		if (q-1-b)%2 == 0 {
			return q, true
		}
		j = q + 1
	}
}

// sameKeys reports whether the row's keys are the last row's, in the same
// order (then its members sort by the same permutation); otherwise it
// remembers them.
func (rh *rowHasher) sameKeys() bool {
	if len(rh.mems) == len(rh.lastEnds) {
		start, same := 0, true
		for i, m := range rh.mems {
			if !bytes.Equal(m.key, rh.lastKeys[start:rh.lastEnds[i]]) {
				same = false
				break
			}
			start = rh.lastEnds[i]
		}
		if same {
			return true
		}
	}
	rh.lastKeys, rh.lastEnds = rh.lastKeys[:0], rh.lastEnds[:0]
	for _, m := range rh.mems {
		rh.lastKeys = append(rh.lastKeys, m.key...)
		rh.lastEnds = append(rh.lastEnds, len(rh.lastKeys))
	}
	rh.perm = rh.perm[:0]
	for i := range rh.mems {
		rh.perm = append(rh.perm, i)
	}
	slices.SortFunc(rh.perm, func(a, b int) int { return bytes.Compare(rh.mems[a].key, rh.mems[b].key) })
	return false
}

// write writes the members sorted by key, canonically.
func (rh *rowHasher) write() []byte {
	rh.sameKeys()
	rh.sorted = rh.sorted[:0]
	for _, i := range rh.perm {
		rh.sorted = append(rh.sorted, rh.mems[i])
	}
	b := append(rh.buf[:0], '{')
	for k, m := range rh.sorted {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, m.key...)
		b = append(b, '"', ':')
		b = append(b, m.value...)
	}
	b = append(b, '}')
	rh.buf = b
	return b
}
