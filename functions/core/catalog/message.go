package catalog

import (
	"strings"
	"unicode/utf8"
)

// MaxMessageBytes bounds every message a status, problem or event carries
// (I12): 100 problems then fit a status of at most 64 KiB.
const MaxMessageBytes = 512

// BoundMessage makes s fit a text column and the message bound: invalid
// UTF-8 and NUL (which PostgreSQL's text and jsonb refuse) become U+FFFD,
// and a message over MaxMessageBytes is cut at a character boundary and
// ends with "…".
func BoundMessage(s string) string {
	if len(s) <= MaxMessageBytes && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	if len(s) <= MaxMessageBytes {
		return s
	}
	const ellipsis = "…"
	cut := MaxMessageBytes - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
