package catalog

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"short", "fine", "fine"},
		{"nul", "a\x00b", "a\uFFFDb"},
		{"invalid utf-8", "a\xffb", "a\uFFFDb"},
		{"exactly the bound", strings.Repeat("x", MaxMessageBytes), strings.Repeat("x", MaxMessageBytes)},
		{"over the bound", strings.Repeat("x", MaxMessageBytes+1), strings.Repeat("x", MaxMessageBytes-3) + "…"},
		// a 4-byte character across the cut is dropped whole
		{"cut inside a character", strings.Repeat("x", MaxMessageBytes-5) + "😀😀", strings.Repeat("x", MaxMessageBytes-5) + "…"},
	} {
		got := BoundMessage(tc.in)
		if got != tc.want {
			t.Errorf("%s: BoundMessage = %q, want %q", tc.name, got, tc.want)
		}
		if len(got) > MaxMessageBytes || !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Errorf("%s: %q breaks the bound", tc.name, got)
		}
	}
}
