package snapshot

import (
	"strconv"
	"unicode/utf8"
)

// Problem messages are bounded (I12): a status lists up to MaxProblems of
// them and must stay within 64 KiB however bad the file, so a message is
// at most MaxMessageBytes even once encoded as a JSON string the way the
// API writes it (encoding/json, HTML escaping on: '<' is six bytes there).
// What a file puts into a message (a column name, a key, a product_id, a
// number's text) is quoted with quoteCut, which cuts it with "…"; every
// message then passes boundMessage, the last guard.

// quoteBudget is the most bytes a quoted piece of the file takes in a
// message, JSON-encoded: two of them and the fixed text fit MaxMessageBytes.
const quoteBudget = 160

// ellipsis marks a cut.
const ellipsis = "…"

// quoteCut quotes s as %q does, cut (at a character) to what fits
// quoteBudget bytes once JSON-encoded, "…" inside the quotes marking the
// cut.
func quoteCut(s []byte) string {
	full := strconv.Quote(string(s))
	if jsonLen(full) <= quoteBudget {
		return full
	}
	budget := quoteBudget - 2 - len(ellipsis) // the quotes and the ellipsis
	out := make([]byte, 0, quoteBudget)
	out = append(out, '"')
	for len(s) > 0 {
		r, size := utf8.DecodeRune(s)
		var piece string
		if r == utf8.RuneError && size == 1 {
			piece = `\x` + string(hexDigits[s[0]>>4]) + string(hexDigits[s[0]&0xF])
		} else {
			q := strconv.Quote(string(s[:size]))
			piece = q[1 : len(q)-1]
		}
		cost := jsonLen(piece)
		if cost > budget {
			break
		}
		budget -= cost
		out = append(out, piece...)
		s = s[size:]
	}
	out = append(out, ellipsis...)
	return string(append(out, '"'))
}

// cutPlain returns s, plain ASCII that JSON does not escape (a number's
// text), cut to n bytes with "…".
func cutPlain(s []byte, n int) string {
	if len(s) <= n {
		return string(s)
	}
	return string(s[:n]) + ellipsis
}

// quoteCutString is quoteCut of a string.
func quoteCutString(s string) string { return quoteCut([]byte(s)) }

// boundMessage cuts m, at a character, so that its JSON encoding is at
// most MaxMessageBytes, with "…" at the end when cut.
func boundMessage(m string) string {
	if len(m) <= MaxMessageBytes/6 || jsonLen(m) <= MaxMessageBytes {
		return m
	}
	budget := MaxMessageBytes - len(ellipsis)
	end := 0
	for end < len(m) {
		r, size := utf8.DecodeRuneInString(m[end:])
		cost := jsonRuneLen(r, size)
		if cost > budget {
			break
		}
		budget -= cost
		end += size
	}
	return m[:end] + ellipsis
}

// jsonLen is the length of s's content once encoded as a JSON string by
// encoding/json.Marshal (HTML escaping on; invalid UTF-8 becomes \ufffd).
func jsonLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		n += jsonRuneLen(r, size)
		i += size
	}
	return n
}

// jsonRuneLen is the encoded length of one character of a JSON string (see
// jsonLen); size is its length in the text (1 for a byte that is not UTF-8).
func jsonRuneLen(r rune, size int) int {
	switch {
	case r == utf8.RuneError && size == 1:
		return 6 // \ufffd
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029':
		return 6
	}
	return size
}
