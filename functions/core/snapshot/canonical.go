package snapshot

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

const hexDigits = "0123456789abcdef"

// strEscape[b] != 0 for the bytes appendJSONString must look at: those that
// encoding/json escapes ('"', '\\', control characters) and 0xE2, the first
// byte of U+2028 and U+2029.
var strEscape = func() (t [256]byte) {
	for b := 0; b < 0x20; b++ {
		t[b] = 1
	}
	t['"'] = 1
	t['\\'] = 1
	t[0xE2] = 2
	return t
}()

const (
	lo7 = 0x0101010101010101
	hi7 = 0x8080808080808080
)

// mayNeedEscape reports whether one of the 8 bytes in w may be one that
// strEscape flags: below 0x20, '"', '\\' or 0xE2 (false positives are fine).
func mayNeedEscape(w uint64) bool {
	hasZero := func(v uint64) uint64 { return (v - lo7) &^ v & hi7 }
	less20 := (w - 0x20*lo7) &^ w & hi7
	return less20|hasZero(w^('"'*lo7))|hasZero(w^('\\'*lo7))|hasZero(w^(0xE2*lo7)) != 0
}

// AppendJSONString appends s, which must be valid UTF-8, as a JSON string
// encoded exactly as encoding/json.Marshal does with HTML escaping off: the
// storefront encodes ids with it as the canonical form encodes attributes.
func AppendJSONString(dst []byte, s string) []byte {
	// appendJSONString only reads s: no copy of the string is needed.
	return appendJSONString(dst, unsafe.Slice(unsafe.StringData(s), len(s)))
}

// appendJSONString is AppendJSONString on bytes.
func appendJSONString(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		// Skip 8 plain bytes at a time.
		for i+8 <= len(s) && !mayNeedEscape(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		b := s[i]
		if strEscape[b] == 0 {
			continue
		}
		if b == 0xE2 {
			// U+2028 is E2 80 A8, U+2029 is E2 80 A9.
			if i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9) {
				dst = append(dst, s[start:i]...)
				dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[s[i+2]&0xF])
				i += 2
				start = i + 1
			}
			continue
		}
		dst = append(dst, s[start:i]...)
		switch b {
		case '\\', '"':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Canonicalize returns the canonical form (see the package documentation) of
// one JSON object. Unlike a JSON Lines row, product_id is an ordinary key
// here. Errors are *Error with Line 0.
func Canonicalize(object []byte) ([]byte, error) {
	if !utf8.Valid(object) {
		return nil, NewError(CodeInvalidUTF8, 0, "invalid UTF-8")
	}
	c := canonicalizer{maxGrowth: canonicalizeMaxGrowth}
	out, jerr := c.object(nil, object, false)
	if jerr != nil {
		return nil, NewError(jerr.code, 0, jerr.message())
	}
	return out, nil
}

// A Canonicalizer canonicalizes JSON objects one after another, keeping its
// scratch space (and the key order of the last object) between calls:
// Canonicalize makes a new one for each object. Not for concurrent use.
type Canonicalizer struct{ c canonicalizer }

// Append appends the canonical form of one JSON object to dst, as
// Canonicalize returns it.
func (x *Canonicalizer) Append(dst, object []byte) ([]byte, error) {
	if !utf8.Valid(object) {
		return dst, &Error{Code: CodeInvalidUTF8, Message: "invalid UTF-8"}
	}
	x.c.maxGrowth = canonicalizeMaxGrowth
	out, jerr := x.c.object(dst, object, false)
	if jerr != nil {
		return dst, &Error{Code: jerr.code, Message: jerr.message()}
	}
	return out, nil
}

// canonicalizeMaxGrowth bounds, for Canonicalize and Canonicalizer, how
// much numbers written out in full (1e5 is 100000) may grow an object.
const canonicalizeMaxGrowth = 64 << 20

// jsonErr is a problem found in a JSON text, at byte offset pos.
type jsonErr struct {
	code string
	pos  int
	msg  string
}

func (e *jsonErr) message() string {
	if e.code == CodeMalformedJSON {
		return fmt.Sprintf("malformed JSON at column %d: %s", e.pos+1, e.msg)
	}
	return e.msg
}

// member is one object member: its decoded key and canonical value in the
// level's arena, and its index in input order.
type member struct{ k0, k1, v0, v1, idx int }

// keyOrder remembers the key order of the last top-level object: JSON Lines
// exports usually write every row's keys in the same order, and reusing the
// sorting permutation is cheaper than sorting.
type keyOrder struct {
	keys  []byte // keys in input order, concatenated
	ends  []int
	perm  []int // perm[j] = input index of the j-th key in sorted order
	valid bool  // keys are known to sort to perm with no duplicates
}

// level is the reusable scratch space of one object nesting level.
type level struct {
	arena []byte
	mems  []member
}

// canonicalizer parses one JSON object and writes its canonical form. It
// keeps its scratch space between calls.
type canonicalizer struct {
	src    []byte
	pos    int
	nest   int
	levels []level
	tmp    []byte
	sem    *jsonErr // first semantic (non-syntax) problem, reported after the parse

	// maxGrowth bounds growth, the bytes by which numbers written out in
	// full (1e5 is 100000) make the canonical form longer than their text:
	// past it the parse stops (attributes_too_large), so that a row of
	// short exponents never makes a huge canonical form. The reader sets
	// it to the attributes limit: the canonical form is at least as long
	// as the growth.
	maxGrowth int
	growth    int
	inKey     bool // decoding an object key
	inID      bool // decoding the row's product_id (its own checks apply)
	delta     bool // a delta upload's row: DeleteAttribute is a name (Limits.Delta)

	// product_id of a row (top level only, when extractID is set)
	extractID bool
	idSeen    bool
	idString  bool
	idKind    string
	id        []byte
	discard   []byte

	order  keyOrder
	sorted []member

	// names of the top-level members of the rows (extractID), for
	// Reader.AttributeNames
	names attrNames
	noted keyOrder // the sorted keys last added to names (keys and ends only)

	// per-attribute counts of the rows (Reader.CountAttributes): run counts
	// the rows since noted last changed, aligned with noted's keys; counts
	// the rows before
	counting bool
	run      []catalog.AttributeCount
	counts   catalog.AttributeCounts
}

// flushRun adds run, the counts of the rows with noted's keys, to counts.
func (c *canonicalizer) flushRun() {
	prev := 0
	for i, end := range c.noted.ends {
		if i >= len(c.run) {
			break
		}
		if r := c.run[i]; r.Present > 0 {
			if c.counts == nil {
				c.counts = catalog.AttributeCounts{}
			}
			name := string(c.noted.keys[prev:end])
			t := c.counts[name]
			t.Present += r.Present
			t.Valued += r.Valued
			c.counts[name] = t
		}
		prev = end
	}
	clear(c.run)
}

// count counts one row's top-level members, sorted (the keys noted).
func (c *canonicalizer) count(arena []byte, sorted []member) {
	if len(c.run) != len(sorted) {
		return // a row whose keys were refused (it rejects the snapshot)
	}
	run := c.run[:len(sorted)]
	for i, m := range sorted {
		// canonical: "" is two bytes, null the only value of four starting with n
		n := m.v1 - m.v0
		blank := (n == 2 && arena[m.v0] == '"') || (n == 4 && arena[m.v0] == 'n')
		run[i].Present++
		if !blank {
			run[i].Valued++
		}
	}
}

// object parses src as one JSON object (surrounded by optional whitespace)
// and appends its canonical form to dst. With extractID, a top-level
// "product_id" member is taken out into c.id instead.
func (c *canonicalizer) object(dst, src []byte, extractID bool) ([]byte, *jsonErr) {
	c.src, c.pos, c.nest, c.sem, c.growth = src, 0, 0, nil, 0
	c.extractID, c.idSeen, c.idString, c.idKind = extractID, false, false, ""
	c.id = c.id[:0]
	c.skipWS()
	if c.pos >= len(src) || src[c.pos] != '{' {
		what := "end of line"
		if c.pos < len(src) {
			what = describe(src[c.pos])
		}
		return dst, &jsonErr{CodeMalformedJSON, c.pos, "expected a JSON object, found " + what}
	}
	dst, err := c.parseObject(dst, 0)
	if err != nil {
		return dst, err
	}
	c.skipWS()
	if c.pos < len(src) {
		return dst, c.syntax("unexpected " + describe(src[c.pos]) + " after the object (one object per line)")
	}
	if c.sem != nil {
		return dst, c.sem
	}
	return dst, nil
}

func describe(b byte) string {
	if b >= 0x20 && b < 0x7f {
		return fmt.Sprintf("%q", rune(b))
	}
	return fmt.Sprintf("byte 0x%02x", b)
}

func (c *canonicalizer) syntax(msg string) *jsonErr {
	return &jsonErr{CodeMalformedJSON, c.pos, msg}
}

func (c *canonicalizer) semantic(code string, pos int, msg string) {
	if c.sem == nil {
		c.sem = &jsonErr{code, pos, msg}
	}
}

// enter counts one more level of nesting at c.pos (an array or object),
// refusing one past MaxNesting: the parse stops there, so that no deeper
// recursion happens.
func (c *canonicalizer) enter() *jsonErr {
	c.nest++
	if c.nest > MaxNesting {
		return &jsonErr{CodeUnsupportedValue, c.pos, fmt.Sprintf("arrays and objects nested deeper than %d levels at column %d: the catalog holds at most %d", MaxNesting, c.pos+1, MaxNesting)}
	}
	return nil
}

func (c *canonicalizer) skipWS() {
	for c.pos < len(c.src) {
		switch c.src[c.pos] {
		case ' ', '\t', '\r', '\n':
			c.pos++
		default:
			return
		}
	}
}

// parseObject parses the object at c.pos (which is '{') and appends its
// canonical form to dst. depth is the object nesting level (0 = the row).
func (c *canonicalizer) parseObject(dst []byte, depth int) ([]byte, *jsonErr) {
	if err := c.enter(); err != nil {
		return dst, err
	}
	start := c.pos
	c.pos++ // '{'
	if depth == len(c.levels) {
		c.levels = append(c.levels, level{})
	}
	arena, mems := c.levels[depth].arena[:0], c.levels[depth].mems[:0]
	top := depth == 0 && c.extractID
	c.skipWS()
	if c.pos < len(c.src) && c.src[c.pos] == '}' {
		c.pos++
	} else {
		for {
			c.skipWS()
			if c.pos >= len(c.src) || c.src[c.pos] != '"' {
				return dst, c.syntax("expected a string key")
			}
			keyPos := c.pos
			k0 := len(arena)
			var err *jsonErr
			c.inKey = true
			arena, err = c.decodeString(arena)
			c.inKey = false
			if err != nil {
				return dst, err
			}
			k1 := len(arena)
			c.skipWS()
			if c.pos >= len(c.src) || c.src[c.pos] != ':' {
				return dst, c.syntax("expected ':' after object key")
			}
			c.pos++
			if top && string(arena[k0:k1]) == "product_id" {
				arena = arena[:k0]
				if c.idSeen {
					c.semantic(CodeDuplicateColumn, keyPos, `key "product_id" appears twice`)
				}
				c.idSeen = true
				c.skipWS()
				if c.pos < len(c.src) && c.src[c.pos] == '"' {
					c.idString = true
					c.inID = true
					c.id, err = c.decodeString(c.id[:0])
					c.inID = false
					if err != nil {
						return dst, err
					}
				} else {
					c.idString = false
					c.idKind = "a JSON value"
					if c.pos < len(c.src) {
						c.idKind = kindOf(c.src[c.pos])
					}
					if c.discard, err = c.value(c.discard[:0], depth); err != nil {
						return dst, err
					}
				}
			} else {
				v0 := len(arena)
				if arena, err = c.value(arena, depth); err != nil {
					return dst, err
				}
				mems = append(mems, member{k0, k1, v0, len(arena), len(mems)})
			}
			c.skipWS()
			if c.pos >= len(c.src) {
				return dst, c.syntax("expected ',' or '}' after object member, found end of line")
			}
			if c.src[c.pos] == ',' {
				c.pos++
				continue
			}
			if c.src[c.pos] == '}' {
				c.pos++
				break
			}
			return dst, c.syntax("expected ',' or '}' after object member, found " + describe(c.src[c.pos]))
		}
	}
	sorted := mems
	if len(mems) > 1 {
		sorted = c.sortMembers(arena, mems, depth == 0, start)
	} else if len(mems) == 1 && top {
		c.noteNames(arena, mems, start)
		if c.counting {
			// noted moved off the keys of the order kept for the next
			// rows: a row reusing that order must note its keys again,
			// or count would find its counters misaligned.
			c.order.valid = false
		}
	}
	if top && c.counting && c.extractID {
		c.count(arena, sorted)
	}
	dst = append(dst, '{')
	for i, m := range sorted {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, arena[m.k0:m.k1])
		dst = append(dst, ':')
		dst = append(dst, arena[m.v0:m.v1]...)
	}
	dst = append(dst, '}')
	c.levels[depth].arena, c.levels[depth].mems = arena, mems
	c.nest--
	return dst, nil
}

// sortMembers returns mems sorted by key, noting a duplicate key. For the
// top-level object it reuses the previous row's order when the keys came in
// the same order.
func (c *canonicalizer) sortMembers(arena []byte, mems []member, top bool, pos int) []member {
	ko := &c.order
	if top {
		if ko.valid && ko.same(arena, mems) {
			s := c.sorted[:0]
			for _, p := range ko.perm {
				s = append(s, mems[p])
			}
			c.sorted = s
			return s
		}
		ko.valid = false
		ko.set(arena, mems)
	}
	slices.SortFunc(mems, func(a, b member) int {
		return bytes.Compare(arena[a.k0:a.k1], arena[b.k0:b.k1])
	})
	for i := 1; i < len(mems); i++ {
		if k := arena[mems[i].k0:mems[i].k1]; bytes.Equal(k, arena[mems[i-1].k0:mems[i-1].k1]) {
			c.semantic(CodeDuplicateColumn, pos, fmt.Sprintf("key %s appears twice in one object", quoteCut(k)))
			return mems
		}
	}
	if top {
		ko.perm = ko.perm[:0]
		for _, m := range mems {
			ko.perm = append(ko.perm, m.idx)
		}
		ko.valid = true
		if c.extractID && !c.noteNames(arena, mems, pos) {
			ko.valid = false // the next row with these keys is checked again
		}
	}
	return mems
}

// noteNames checks the sorted top-level keys of a row (the object at pos)
// as attribute names and adds them to c.names, unless they are the keys
// last noted (rows that only reorder their keys cost a comparison, not a
// check and a map lookup per key). It returns false, the problem noted,
// when a key is no valid attribute name (attributeNameProblem).
func (c *canonicalizer) noteNames(arena []byte, sorted []member, pos int) bool {
	if c.noted.same(arena, sorted) {
		return true
	}
	for _, m := range sorted {
		if code, reason := attributeNameProblem(arena[m.k0:m.k1], c.delta); code != "" {
			c.semantic(code, pos, reason)
			return false
		}
	}
	if c.counting {
		c.flushRun()
		c.run = slices.Grow(c.run[:0], len(sorted))[:len(sorted)]
		clear(c.run)
	}
	c.noted.set(arena, sorted)
	for _, m := range sorted {
		c.names.add(arena[m.k0:m.k1])
	}
	return true
}

// same reports whether the keys of mems are ko's keys, in the same order.
func (ko *keyOrder) same(arena []byte, mems []member) bool {
	if len(ko.ends) != len(mems) {
		return false
	}
	prev := 0
	for i, m := range mems {
		if !bytes.Equal(arena[m.k0:m.k1], ko.keys[prev:ko.ends[i]]) {
			return false
		}
		prev = ko.ends[i]
	}
	return true
}

// set makes the keys of mems ko's keys.
func (ko *keyOrder) set(arena []byte, mems []member) {
	ko.keys, ko.ends = ko.keys[:0], ko.ends[:0]
	for _, m := range mems {
		ko.keys = append(ko.keys, arena[m.k0:m.k1]...)
		ko.ends = append(ko.ends, len(ko.keys))
	}
}

func kindOf(b byte) string {
	switch b {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// value parses the value at c.pos and appends its canonical form to dst.
// depth is the nesting level of the enclosing object.
func (c *canonicalizer) value(dst []byte, depth int) ([]byte, *jsonErr) {
	c.skipWS()
	if c.pos >= len(c.src) {
		return dst, c.syntax("expected a value, found end of line")
	}
	switch b := c.src[c.pos]; {
	case b == '"':
		return c.stringValue(dst)
	case b == '{':
		return c.parseObject(dst, depth+1)
	case b == '[':
		if err := c.enter(); err != nil {
			return dst, err
		}
		c.pos++
		dst = append(dst, '[')
		c.skipWS()
		if c.pos < len(c.src) && c.src[c.pos] == ']' {
			c.pos++
			c.nest--
			return append(dst, ']'), nil
		}
		for {
			var err *jsonErr
			if dst, err = c.value(dst, depth); err != nil {
				return dst, err
			}
			c.skipWS()
			if c.pos >= len(c.src) {
				return dst, c.syntax("expected ',' or ']' in array, found end of line")
			}
			switch c.src[c.pos] {
			case ',':
				c.pos++
				dst = append(dst, ',')
				continue
			case ']':
				c.pos++
				c.nest--
				return append(dst, ']'), nil
			}
			return dst, c.syntax("expected ',' or ']' in array, found " + describe(c.src[c.pos]))
		}
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number(dst)
	case b == 't':
		return c.literal(dst, "true")
	case b == 'f':
		return c.literal(dst, "false")
	case b == 'n':
		return c.literal(dst, "null")
	default:
		return dst, c.syntax("expected a value, found " + describe(b))
	}
}

func (c *canonicalizer) literal(dst []byte, lit string) ([]byte, *jsonErr) {
	if !bytes.HasPrefix(c.src[c.pos:], []byte(lit)) {
		return dst, c.syntax("invalid literal (want " + lit + ")")
	}
	c.pos += len(lit)
	return append(dst, lit...), nil
}

// number validates the JSON number at c.pos and appends it as the catalog
// stores and prints it (appendNumeric). A plain number (no exponent, not
// a negative zero, short) is already in that form and is copied.
func (c *canonicalizer) number(dst []byte) ([]byte, *jsonErr) {
	s, i := c.src, c.pos
	digits := func() bool {
		j := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		return i > j
	}
	neg := s[i] == '-'
	if neg {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		digits()
	default:
		c.pos = i
		return dst, c.syntax("invalid number: expected a digit")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			c.pos = i
			return dst, c.syntax("invalid number: expected a digit after '.'")
		}
	}
	exp := false
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		exp = true
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if !digits() {
			c.pos = i
			return dst, c.syntax("invalid number: expected a digit in the exponent")
		}
	}
	lit := s[c.pos:i]
	start := c.pos
	c.pos = i
	if !exp && len(lit) <= numericMaxScale && !(neg && lit[1] == '0' && isZeroNumber(lit)) {
		return append(dst, lit...), nil
	}
	n := len(dst)
	out, reason := appendNumeric(dst, lit)
	if reason != "" {
		c.semantic(CodeUnsupportedValue, start, fmt.Sprintf("number %s at column %d cannot be stored exactly: %s; the catalog holds numbers of at most %d digits before the decimal point and %d after it",
			cutPlain(lit, 40), start+1, reason, numericMaxIntDigits, numericMaxScale))
		return append(dst, lit...), nil
	}
	if grown := len(out) - n - len(lit); grown > 0 {
		c.growth += grown
		limit := c.maxGrowth
		if limit <= 0 {
			limit = canonicalizeMaxGrowth
		}
		if c.growth > limit {
			return out[:n], &jsonErr{CodeAttributesTooLarge, start, fmt.Sprintf(
				"numbers written out in full (as the catalog stores them: 1e5 is 100000) make the product's attributes more than %d bytes in canonical form (JSON)", limit)}
		}
	}
	return out, nil
}

// The bounds of PostgreSQL's numeric, which jsonb stores numbers as
// (measured against PostgreSQL 15: numeric_in refuses more with "value
// overflows numeric format").
const (
	// numericMaxIntDigits: digits before the decimal point, leading zeros
	// not counted ((NUMERIC_WEIGHT_MAX+1) base-10000 digits).
	numericMaxIntDigits = 131072
	// numericMaxScale: digits after the decimal point, trailing zeros
	// counted (NUMERIC_DSCALE_MAX): 1.50 has two.
	numericMaxScale = 16383
	// numericMaxExponent: numeric_in refuses an exponent of this size or
	// more either way (INT_MAX/2), even on a zero.
	numericMaxExponent = 1<<30 - 1
)

// isZeroNumber reports whether the JSON number lit (no exponent) is zero.
func isZeroNumber(lit []byte) bool {
	for _, b := range lit {
		if b >= '1' && b <= '9' {
			return false
		}
	}
	return true
}

// appendNumeric appends the valid JSON number lit as PostgreSQL's
// numeric_out prints what numeric_in makes of it: the exact value in
// positional notation, no exponent, as many digits after the point as the
// text implies (its fraction digits minus its exponent, at least 0: 1.50
// stays 1.50, 1.0e1 is 10, 1E2 is 100, 100e-2 is 1.00, 2.5e-3 is 0.0025),
// no sign on a zero (-0 is 0, -0.0 is 0.0). A number numeric cannot hold
// appends nothing and returns why.
func appendNumeric(dst, lit []byte) ([]byte, string) {
	neg := lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	mant, expText := lit, []byte(nil)
	if k := bytes.IndexAny(lit, "eE"); k >= 0 {
		mant, expText = lit[:k], lit[k+1:]
	}
	intPart, frac := mant, []byte(nil)
	if k := bytes.IndexByte(mant, '.'); k >= 0 {
		intPart, frac = mant[:k], mant[k+1:]
	}
	var exp int64
	if len(expText) > 0 {
		negExp := expText[0] == '-'
		if expText[0] == '-' || expText[0] == '+' {
			expText = expText[1:]
		}
		expText = bytes.TrimLeft(expText, "0")
		if len(expText) > 10 {
			return dst, "its exponent is out of range"
		}
		for _, d := range expText {
			exp = exp*10 + int64(d-'0')
		}
		if exp >= numericMaxExponent {
			return dst, "its exponent is out of range"
		}
		if negExp {
			exp = -exp
		}
	}
	scale := max(0, int64(len(frac))-exp)
	if scale > numericMaxScale {
		return dst, fmt.Sprintf("it has %d digits after the decimal point", scale)
	}
	ni, nd := int64(len(intPart)), int64(len(intPart)+len(frac))
	digit := func(k int64) byte {
		switch {
		case k < 0 || k >= nd:
			return '0'
		case k < ni:
			return intPart[k]
		}
		return frac[k-ni]
	}
	lead := int64(-1) // the first digit that is not 0
	for k := int64(0); k < nd; k++ {
		if digit(k) != '0' {
			lead = k
			break
		}
	}
	point := ni + exp // the decimal point is before digit(point)
	if lead >= 0 && point-lead > numericMaxIntDigits {
		return dst, fmt.Sprintf("it has %d digits before the decimal point", point-lead)
	}
	if neg && lead >= 0 {
		dst = append(dst, '-')
	}
	if lead < 0 || point <= lead {
		dst = append(dst, '0')
	} else {
		for k := lead; k < point; k++ {
			dst = append(dst, digit(k))
		}
	}
	if scale > 0 {
		dst = append(dst, '.')
		for k := point; k < point+scale; k++ {
			dst = append(dst, digit(k))
		}
	}
	return dst, ""
}

// stringValue parses the string at c.pos and appends it canonically encoded.
func (c *canonicalizer) stringValue(dst []byte) ([]byte, *jsonErr) {
	s := c.src
	for i := c.pos + 1; i < len(s); i++ {
		for i+8 <= len(s) && !mayNeedEscape(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		b := s[i]
		if strEscape[b] == 0 {
			continue
		}
		if b == '"' {
			// Nothing to decode or escape: the raw text is canonical.
			dst = append(dst, s[c.pos:i+1]...)
			c.pos = i + 1
			return dst, nil
		}
		if b == 0xE2 && !(i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xA8 || s[i+2] == 0xA9)) {
			continue
		}
		break // an escape, a control character or U+2028/U+2029
	}
	var err *jsonErr
	if c.tmp, err = c.decodeString(c.tmp[:0]); err != nil {
		return dst, err
	}
	return appendJSONString(dst, c.tmp), nil
}

// decodeString decodes the string at c.pos (which is '"') and appends its
// content to dst.
func (c *canonicalizer) decodeString(dst []byte) ([]byte, *jsonErr) {
	s := c.src
	i := c.pos + 1
	start := i
	for {
		for i+8 <= len(s) && !mayNeedEscape(binary.LittleEndian.Uint64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			c.pos = i
			return dst, c.syntax("unterminated string")
		}
		b := s[i]
		switch {
		case b == '"':
			dst = append(dst, s[start:i]...)
			c.pos = i + 1
			return dst, nil
		case b < 0x20:
			c.pos = i
			return dst, c.syntax(fmt.Sprintf("control character 0x%02x in string (must be escaped)", b))
		case b != '\\':
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		if i+1 >= len(s) {
			c.pos = i
			return dst, c.syntax("unterminated string")
		}
		switch e := s[i+1]; e {
		case '"', '\\', '/':
			dst = append(dst, e)
			i += 2
		case 'b':
			dst = append(dst, '\b')
			i += 2
		case 'f':
			dst = append(dst, '\f')
			i += 2
		case 'n':
			dst = append(dst, '\n')
			i += 2
		case 'r':
			dst = append(dst, '\r')
			i += 2
		case 't':
			dst = append(dst, '\t')
			i += 2
		case 'u':
			r, ok := hex4(s, i+2)
			if !ok {
				c.pos = i
				return dst, c.syntax(`invalid \u escape`)
			}
			n := 6
			if utf16.IsSurrogate(r) {
				r2, ok2 := rune(0), false
				if r < 0xDC00 && i+11 < len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
					r2, ok2 = hex4(s, i+8)
				}
				if ok2 && r2 >= 0xDC00 && r2 <= 0xDFFF {
					r = utf16.DecodeRune(r, r2)
					n = 12
				} else {
					c.semantic(CodeUnsupportedValue, i, fmt.Sprintf(`lone UTF-16 surrogate \u%04x in %s at column %d: the catalog stores only whole characters (a surrogate escape comes in pairs, like \ud83d\ude00)`,
						r, c.stringKind(), i+1))
					r = utf8.RuneError
				}
			} else if r == 0 && !c.inID {
				c.semantic(CodeUnsupportedValue, i, fmt.Sprintf(`\u0000 (U+0000) in %s at column %d: the catalog cannot store it`, c.stringKind(), i+1))
			}
			dst = utf8.AppendRune(dst, r)
			i += n
		default:
			c.pos = i
			return dst, c.syntax(fmt.Sprintf("invalid escape %q in string", "\\"+string(rune(e))))
		}
		start = i
	}
}

// stringKind says what the string being decoded is, for messages.
func (c *canonicalizer) stringKind() string {
	if c.inKey {
		return "a key"
	}
	return "a string"
}

func hex4(s []byte, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, b := range s[i : i+4] {
		switch {
		case b >= '0' && b <= '9':
			b -= '0'
		case b >= 'a' && b <= 'f':
			b = b - 'a' + 10
		case b >= 'A' && b <= 'F':
			b = b - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(b)
	}
	return r, true
}
