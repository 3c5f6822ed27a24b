package catalog

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// appendJSONString writes what json.Marshal writes, on its short way
// (printable ASCII) and off it.
func TestAppendJSONStringIsMarshal(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "SKU-0123456789", "p/1 x", `a"b`, `a\b`, "<&>", "tab\there", "nl\n", "del\x7f",
		"é", "\u2028", "日本", "bad\xffutf8", "~!@#$%^*()_+{}|:?[];',./`"} {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString([]byte("x"), s))[1:], "%q", s)
	}
}

// skipValue ends a string at its closing quote whatever backslashes come
// before the quotes inside it, as a byte-by-byte scan does.
func TestSkipValueStrings(t *testing.T) {
	t.Parallel()
	slow := func(b []byte, p int) int { // the byte-by-byte scan of a string value at p
		i := p + 1
		for ; i < len(b) && b[i] != '"'; i++ {
			if b[i] == '\\' {
				i++
			}
		}
		return i + 1
	}
	for _, v := range []string{`""`, `"a"`, `"a\"b"`, `"a\\"`, `"a\\\"b"`, `"\\\\"`, `"\"\""`, `"x\\\\\"y\\"`, `"\u0022"`} {
		b := []byte(v + `,"k":1`)
		got, err := skipValue(b, 0)
		require.NoError(t, err, v)
		require.Equal(t, slow(b, 0), got, v)
		require.Equal(t, len(v), got, v)
	}
}

// BenchmarkPlanLineInsert is the applied plan's line of an inserted row of
// the diff bench's shape (13 attributes).
func BenchmarkPlanLineInsert(b *testing.B) {
	to := []byte(`{"brand":"Acme","category":"Home \u0026 Garden","color":"red","currency":"EUR","description":"A fine product, in \"quotes\"","ean":"4006381333931","name":"Widget 12","price":"19.99","product_id":"SKU-0000001234","size":"M","stock":"12","updated":"2026-12-01","weight":"0.25"}`)
	var dst []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, _, err = PlanLine(dst[:0], "SKU-0000001234", nil, to); err != nil {
			b.Fatal(err)
		}
	}
}
