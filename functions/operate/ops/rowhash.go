package ops

import (
	"bytes"
	"slices"

	"github.com/retailcatalog/catalog/functions/core/catalog"

	"github.com/retailcatalog/catalog/functions/core/snapshot"
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
// the spaces dropped: the fast path. The rows of one catalog mostly share
// their keys, so a row is first matched against the last row's shape (its
// keys compared where they are printed, no key searched for or sorted):
// a 12-member row of a CSV upload costs ~0.3 µs besides its SHA-256.
// Anything else goes through snapshot.Canonicalizer, the reference (and the
// catalog of a CSV upload, all strings, never does).
type rowHasher struct {
	canon snapshot.Canonicalizer
	buf   []byte
	keys  [][]byte // the keys of a row parsed member by member
	// The shape of the last flat row: its keys as the database printed
	// them ("key": ), in its order, and the canonical prefix (,"key":) of
	// each member in key order with the database position it takes. The
	// rows of one catalog mostly share their keys: a row of the same shape
	// is matched against it, with no key to find or sort.
	shape [][]byte      // "key":<space>, in the database's order
	order []shapeMember // in canonical order
	arena []byte        // the bytes of shape and order
	vals  [][2]int      // the values' bounds in the row, in the database's order
}

// shapeMember is a member of the last row's shape, in canonical order.
type shapeMember struct {
	prefix []byte // ,"key": (no comma on the first)
	at     int    // its index in the database's order
	end    int    // where prefix ends in the arena
}

// hash is the content hash of attributes (a JSON object as the database
// prints it); the zero hash when it is not one (never a real row's).
func (rh *rowHasher) hash(attributes []byte) catalog.Hash {
	if out, ok := rh.fast(attributes); ok {
		return catalog.HashAttributes(out)
	}
	out, err := rh.canon.Append(rh.buf[:0], attributes)
	if err != nil {
		return catalog.Hash{}
	}
	rh.buf = out
	return catalog.HashAttributes(out)
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
	if n == 2 {
		return append(rh.buf[:0], "{}"...), true
	}
	if len(rh.shape) > 0 && rh.matchShape(s) {
		return rh.writeShape(s), true
	}
	rh.keys, rh.vals = rh.keys[:0], rh.vals[:0]
	i := 1
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
		start := i
		if i, ok = valueEnd(s, i); !ok {
			return nil, false
		}
		rh.keys = append(rh.keys, key)
		rh.vals = append(rh.vals, [2]int{start, i})
		switch {
		case i == n-1 && s[i] == '}':
			rh.setShape()
			return rh.writeShape(s), true
		case i+1 < n && s[i] == ',' && s[i+1] == ' ':
			i += 2
		default:
			return nil, false
		}
	}
}

// valueEnd is the end of the value (a string or a scalar) that starts at
// s[i], or false for a nested object or array, or a string left open.
func valueEnd(s []byte, i int) (int, bool) {
	if i >= len(s) {
		return 0, false
	}
	switch s[i] {
	case '"':
		end, ok := stringEnd(s, i)
		return end + 1, ok
	case '{', '[':
		return 0, false
	}
	for i < len(s) && s[i] != ',' && s[i] != '}' {
		i++
	}
	return i, true
}

// matchShape reports whether s (a flat object's text, "{...}") has the
// keys of the last row's shape in the same order, and notes where its
// values are. The keys are compared as printed, quotes and ": " included:
// a shape's key holds no backslash, so the quote after it ends the key.
func (rh *rowHasher) matchShape(s []byte) bool {
	n := len(s)
	rh.vals = rh.vals[:0]
	i := 1
	for k, printed := range rh.shape {
		if k > 0 {
			if i+1 >= n || s[i] != ',' || s[i+1] != ' ' {
				return false
			}
			i += 2
		}
		if !bytes.HasPrefix(s[i:], printed) {
			return false
		}
		i += len(printed)
		start := i
		var ok bool
		if i, ok = valueEnd(s, i); !ok {
			return false
		}
		rh.vals = append(rh.vals, [2]int{start, i})
	}
	return i == n-1
}

// setShape makes the keys just parsed (rh.keys) the shape rows are
// matched with. Its bytes live in one arena, reused from shape to shape.
func (rh *rowHasher) setShape() {
	arena := rh.arena[:0]
	for _, key := range rh.keys {
		arena = append(append(append(arena, '"'), key...), '"', ':', ' ')
	}
	// The canonical order, then its prefixes after the printed keys.
	rh.order = rh.order[:0]
	for i := range rh.keys {
		rh.order = append(rh.order, shapeMember{at: i})
	}
	slices.SortFunc(rh.order, func(a, b shapeMember) int { return bytes.Compare(rh.keys[a.at], rh.keys[b.at]) })
	printedEnd := len(arena)
	for k, m := range rh.order {
		if k > 0 {
			arena = append(arena, ',')
		}
		arena = append(append(append(arena, '"'), rh.keys[m.at]...), '"', ':')
		rh.order[k].end = len(arena)
	}
	rh.arena = arena
	// Slices into the arena, now that it stops growing.
	rh.shape = rh.shape[:0]
	start := 0
	for _, key := range rh.keys {
		end := start + len(key) + 4
		rh.shape = append(rh.shape, arena[start:end:end])
		start = end
	}
	start = printedEnd
	for k := range rh.order {
		rh.order[k].prefix = arena[start:rh.order[k].end:rh.order[k].end]
		start = rh.order[k].end
	}
}

// writeShape writes the members of s (a row of the shape, its values
// where rh.vals says) sorted by key, canonically.
func (rh *rowHasher) writeShape(s []byte) []byte {
	b := append(rh.buf[:0], '{')
	for _, m := range rh.order {
		b = append(b, m.prefix...)
		v := rh.vals[m.at]
		b = append(b, s[v[0]:v[1]]...)
	}
	b = append(b, '}')
	rh.buf = b
	return b
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
