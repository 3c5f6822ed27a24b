package snapshot

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func runCases(t *testing.T, cases []tcase, explicit Format) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			formats := []Format{tc.format}
			if tc.format == FormatAuto {
				formats = append(formats, explicit)
			}
			for _, f := range formats {
				tc := tc
				tc.format = f
				t.Run("plain/"+string(f), func(t *testing.T) { runCase(t, tc, []byte(tc.in)) })
				t.Run("gzip/"+string(f), func(t *testing.T) { runCase(t, tc, gz(t, []byte(tc.in))) })
			}
			t.Run("one byte reads", func(t *testing.T) {
				want, _, wantErr := readAll([]byte(tc.in), tc.format, tc.lim)
				got, _, gotErr := readAllFrom(iotest.OneByteReader(strings.NewReader(tc.in)), tc.format, tc.lim)
				require.Equal(t, wantErr, gotErr)
				require.Equal(t, want, got)
			})
		})
	}
}

func TestCSV(t *testing.T)   { runCases(t, csvCases, FormatCSV) }
func TestJSONL(t *testing.T) { runCases(t, jsonlCases, FormatJSONL) }

func TestRowsAreValid(t *testing.T) {
	for _, tc := range append(slices.Clone(csvCases), jsonlCases...) {
		rows, _, err := readAll([]byte(tc.in), tc.format, tc.lim)
		checkErr(t, err)
		for _, row := range rows {
			checkRow(t, row)
		}
	}
}

func TestSniff(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
	}{
		{"", FormatCSV},
		{bom, FormatCSV},
		{"\n \r\n\t", FormatCSV},
		{"product_id\n1\n", FormatCSV},
		{`{"product_id":"1"}`, FormatJSONL},
		{bom + "\r\n  \n\t{\"product_id\":\"1\"}", FormatJSONL},
		{"[1]", FormatCSV},
		{"\"{\"", FormatCSV},
	} {
		for _, data := range [][]byte{[]byte(tc.in), gz(t, []byte(tc.in))} {
			r, err := NewReader(bytes.NewReader(data), FormatAuto, Limits{})
			if err != nil {
				var e *Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, FormatCSV, tc.want, "%q: %v", tc.in, err) // header errors only
				continue
			}
			require.Equal(t, tc.want, r.Format(), "%q", tc.in)
		}
	}
	// An explicit format is not second-guessed.
	r, err := NewReader(strings.NewReader(`{"product_id":"1"}`), FormatJSONL, Limits{})
	require.NoError(t, err)
	require.Equal(t, FormatJSONL, r.Format())
	_, err = NewReader(strings.NewReader(`{"product_id":"1"}`), FormatCSV, Limits{})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeMissingProductIDColumn, e.Code)
	require.Equal(t, 1, e.Line)
	require.Contains(t, e.Message, "looks like JSON Lines")

	_, err = NewReader(strings.NewReader(""), Format("xml"), Limits{})
	require.Error(t, err)
}

func TestParseFormat(t *testing.T) {
	for s, want := range map[string]Format{"": FormatAuto, "csv": FormatCSV, "jsonl": FormatJSONL} {
		f, err := ParseFormat(s)
		require.NoError(t, err)
		require.Equal(t, want, f)
	}
	for _, s := range []string{"CSV", "json", "ndjson", " csv", "xml"} {
		_, err := ParseFormat(s)
		require.Error(t, err, s)
	}
}

func TestGzipDetectedByMagic(t *testing.T) {
	csvData := genCSV(500)
	jsonData := genJSONL(500)
	for _, data := range [][]byte{csvData, jsonData} {
		want, wantFormat, err := readAll(data, FormatAuto, Limits{})
		require.NoError(t, err)
		require.Len(t, want, 500)
		got, gotFormat, err := readAll(gz(t, data), FormatAuto, Limits{})
		require.NoError(t, err)
		require.Equal(t, wantFormat, gotFormat)
		require.Equal(t, want, got)
		// With a BOM inside the gzip stream, and as two gzip members.
		withBOM := append([]byte(bom), data...)
		got, _, err = readAll(gz(t, withBOM), FormatAuto, Limits{})
		require.NoError(t, err)
		require.Equal(t, want, got)
		half := len(data) / 2
		half = bytes.IndexByte(data[half:], '\n') + half + 1
		two := append(gz(t, data[:half]), gz(t, data[half:])...)
		got, _, err = readAll(two, FormatAuto, Limits{})
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
	// A plain file whose first byte is 0x1f is not gzip.
	_, _, err := readAll([]byte("\x1fproduct_id\n"), FormatCSV, Limits{})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeMissingProductIDColumn, e.Code)
}

func TestCorruptGzip(t *testing.T) {
	// Corrupt deflate data may inflate to garbage before the checksum at
	// the end is checked: the file is rejected, but possibly as garbage.
	data := gz(t, genCSV(2000))
	for i := len(data) / 2; i < len(data)/2+64; i++ {
		data[i] ^= 0x55
	}
	_, _, err := readAll(data, FormatAuto, Limits{})
	checkErr(t, err)
	require.Error(t, err)
}

func TestBadGzip(t *testing.T) {
	data := gz(t, genCSV(2000))
	badCRC := slices.Clone(data)
	badCRC[len(badCRC)-6] ^= 0xff
	for name, in := range map[string][]byte{
		"magic only":         {0x1f, 0x8b},
		"truncated header":   data[:8],
		"truncated early":    data[:40],
		"truncated late":     data[:len(data)-20],
		"missing trailer":    data[:len(data)-4],
		"bad checksum":       badCRC,
		"trailing garbage":   append(slices.Clone(data), "garbage"...),
		"small truncated":    gz(t, []byte("product_id\n1\n"))[:20],
		"jsonl truncated":    gz(t, genJSONL(2000))[:5000],
		"not deflate":        append([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, bytes.Repeat([]byte{0xff}, 100)...),
		"unknown compressor": append([]byte{0x1f, 0x8b, 9, 0, 0, 0, 0, 0, 0, 0xff}, bytes.Repeat([]byte{0}, 100)...),
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := readAll(in, FormatAuto, Limits{})
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, CodeBadGzip, e.Code, e.Message)
			require.Equal(t, 0, e.Line)
		})
	}
}

// The gzip bomb guard counts decompressed bytes.
func TestMaxFileBytesGzip(t *testing.T) {
	data := append([]byte("product_id\n"), bytes.Repeat([]byte("\n"), 8<<20)...)
	z := gz(t, data)
	require.Less(t, len(z), 64<<10)
	_, _, err := readAll(z, FormatAuto, Limits{MaxFileBytes: 1 << 20})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeFileTooLarge, e.Code)
	require.Equal(t, 0, e.Line)

	rows, _, err := readAll(z, FormatAuto, Limits{MaxFileBytes: int64(len(data))})
	require.NoError(t, err)
	require.Empty(t, rows)
}

type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data[:min(len(f.data), 1000)])
	f.data = f.data[n:]
	return n, nil
}

// A failing input is not the snapshot's fault: not a *Error.
func TestReadErrorIsNotSnapshotError(t *testing.T) {
	boom := errors.New("connection reset")
	csvData := genCSV(1000)
	for name, data := range map[string][]byte{
		"plain": csvData, "gzip": gz(t, csvData), "jsonl": genJSONL(1000), "empty": nil,
	} {
		t.Run(name, func(t *testing.T) {
			rows, _, err := readAllFrom(&failingReader{data: data[:len(data)/2], err: boom}, FormatAuto, Limits{})
			require.ErrorIs(t, err, boom)
			var e *Error
			require.False(t, errors.As(err, &e), "%v", err)
			if len(data) > 0 {
				require.NotEmpty(t, rows)
			}
		})
	}
}

func TestBytesRead(t *testing.T) {
	data := append([]byte(bom), genCSV(3000)...)
	for _, in := range [][]byte{data, gz(t, data)} {
		r, err := NewReader(bytes.NewReader(in), FormatAuto, Limits{})
		require.NoError(t, err)
		headerEnd := int64(bytes.IndexByte(data, '\n') + 1)
		require.Equal(t, headerEnd, r.BytesRead())
		last := r.BytesRead()
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			require.Greater(t, r.BytesRead(), last)
			last = r.BytesRead()
		}
		require.Equal(t, int64(len(data)), r.BytesRead())
	}
}

// Reordering columns or keys changes nothing.
func TestReorderChangesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	csvData := genCSV(300)
	want, _, err := readAll(csvData, FormatCSV, Limits{})
	require.NoError(t, err)

	recs, err := csv.NewReader(bytes.NewReader(csvData)).ReadAll()
	require.NoError(t, err)
	perm := rng.Perm(len(recs[0]))
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.UseCRLF = true
	for _, rec := range recs {
		out := make([]string, len(rec))
		for i, p := range perm {
			out[i] = rec[p]
		}
		require.NoError(t, w.Write(out))
	}
	w.Flush()
	got, _, err := readAll(b.Bytes(), FormatCSV, Limits{})
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].ProductID, got[i].ProductID)
		require.Equal(t, string(want[i].Attributes), string(got[i].Attributes))
		require.Equal(t, want[i].Hash, got[i].Hash)
	}

	// JSON: keys shuffled at every level.
	a := `{"product_id":"p1","title":"T","dims":{"w":1,"h":2.50,"unit":{"name":"cm","si":true}},"tags":["b","a"],"price":10}`
	bb := `{"tags":["b","a"],"dims":{"unit":{"si":true,"name":"cm"},"h":2.50,"w":1},"price":10,"title":"T","product_id":"p1"}`
	c := `{ "price" : 10 , "product_id":"p\u0031", "dims":{"h":2.50,"unit":{"si":true,"name":"c\u006d"},"w":1},"title":"\u0054","tags":["b","a"]}`
	ra, _, err := readAll([]byte(a), FormatAuto, Limits{})
	require.NoError(t, err)
	for _, other := range []string{bb, c} {
		ro, _, err := readAll([]byte(other), FormatAuto, Limits{})
		require.NoError(t, err)
		require.Equal(t, ra[0].ProductID, ro[0].ProductID)
		require.Equal(t, string(ra[0].Attributes), string(ro[0].Attributes))
		require.Equal(t, ra[0].Hash, ro[0].Hash)
	}
	require.Equal(t, `{"dims":{"h":2.50,"unit":{"name":"cm","si":true},"w":1},"price":10,"tags":["b","a"],"title":"T"}`, string(ra[0].Attributes))
	// Array order does matter, and so does a number's scale (2.50 is
	// numeric 2.50, printed so, not 2.5).
	for _, other := range []string{
		`{"product_id":"p1","title":"T","dims":{"w":1,"h":2.50,"unit":{"name":"cm","si":true}},"tags":["a","b"],"price":10}`,
		`{"product_id":"p1","title":"T","dims":{"w":1,"h":2.5,"unit":{"name":"cm","si":true}},"tags":["b","a"],"price":10}`,
	} {
		ro, _, err := readAll([]byte(other), FormatAuto, Limits{})
		require.NoError(t, err)
		require.NotEqual(t, ra[0].Hash, ro[0].Hash)
	}
}

// The same products as CSV and as JSON Lines with string values hash the same.
func TestCSVAndJSONLAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var cb, jb bytes.Buffer
	w := csv.NewWriter(&cb)
	cols := []string{"product_id", "title", "brand", "desc", "weird \"name\"", "é"}
	require.NoError(t, w.Write(cols))
	for i := range 200 {
		rec := []string{fmt.Sprintf("id-%d", i)}
		obj := map[string]string{"product_id": rec[0]}
		for _, c := range cols[1:] {
			v := randString(rng, 20)
			rec = append(rec, v)
			obj[c] = v
		}
		require.NoError(t, w.Write(rec))
		line, err := marshalCanonical(obj)
		require.NoError(t, err)
		jb.Write(line)
		jb.WriteByte('\n')
	}
	w.Flush()
	cr, _, err := readAll(cb.Bytes(), FormatAuto, Limits{})
	require.NoError(t, err)
	jr, _, err := readAll(jb.Bytes(), FormatAuto, Limits{})
	require.NoError(t, err)
	require.Len(t, cr, 200)
	require.Len(t, jr, 200)
	for i := range cr {
		require.Equal(t, jr[i].ProductID, cr[i].ProductID)
		require.Equal(t, string(jr[i].Attributes), string(cr[i].Attributes))
		require.Equal(t, jr[i].Hash, cr[i].Hash)
	}

	// The simplest case, spelled out.
	c1, _, err := readAll([]byte("title,product_id,brand\nShirt,42,Acme\n"), FormatAuto, Limits{})
	require.NoError(t, err)
	j1, _, err := readAll([]byte(`{"brand":"Acme","product_id":"42","title":"Shirt"}`), FormatAuto, Limits{})
	require.NoError(t, err)
	require.Equal(t, c1[0].Attributes, j1[0].Attributes)
	require.Equal(t, c1[0].Hash, j1[0].Hash)
}

// randString returns tricky text: CSV and JSON specials, controls (not
// NUL, which the catalog cannot store), unicode.
func randString(rng *rand.Rand, n int) string {
	alphabet := []string{"a", "b", "Z", " ", ",", "\"", "\n", "\r", "\t", "\\", "/", "<", "&", "é", "😀", "\u2028", "\u0085", "\x01", "\x1f", "\x7f", "{", "'"}
	var b strings.Builder
	for range rng.IntN(n) {
		s := alphabet[rng.IntN(len(alphabet))]
		if s == "\r" && rng.IntN(2) == 0 {
			s = "\r\n" // normalized to \n by the reader; avoided below
		}
		b.WriteString(s)
	}
	// A CR right before an LF is a line ending to the reader.
	s := b.String()
	for strings.Contains(s, "\r\n") {
		s = strings.ReplaceAll(s, "\r\n", "\n")
	}
	return s
}

// Large generated files with tricky values, written by encoding/csv and read
// back through buffer refills, growth and compaction.
func TestCSVAgainstEncodingCSV(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	cols := []string{"product_id", "a", "b", "c"}
	var recs [][]string
	for i := range 3000 {
		rec := []string{fmt.Sprintf("p%d", i), randString(rng, 30), randString(rng, 5), ""}
		if i%97 == 0 {
			rec[3] = strings.Repeat(randString(rng, 20)+"\n", 2000) // a big multi-line cell
			for strings.Contains(rec[3], "\r\n") {
				rec[3] = strings.ReplaceAll(rec[3], "\r\n", "\n")
			}
		}
		recs = append(recs, rec)
	}
	for _, crlf := range []bool{false, true} {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.UseCRLF = crlf
		require.NoError(t, w.Write(cols))
		require.NoError(t, w.WriteAll(recs))
		for _, rd := range []io.Reader{bytes.NewReader(b.Bytes()), iotest.HalfReader(bytes.NewReader(b.Bytes())), bytes.NewReader(gz(t, b.Bytes()))} {
			rows, _, err := readAllFrom(rd, FormatCSV, Limits{})
			require.NoError(t, err)
			require.Len(t, rows, len(recs))
			for i, row := range rows {
				require.Equal(t, recs[i][0], row.ProductID)
				m := map[string]string{}
				for j, c := range cols[1:] {
					m[c] = recs[i][j+1]
					if crlf {
						// csv.Writer with UseCRLF drops lone CRs and
						// writes every LF as CRLF, which the reader keeps.
						m[c] = strings.ReplaceAll(strings.ReplaceAll(m[c], "\r", ""), "\n", "\r\n")
					}
				}
				ref, err := marshalCanonical(m)
				require.NoError(t, err)
				require.Equal(t, string(ref), string(row.Attributes))
			}
		}
	}
}

func TestLongRows(t *testing.T) {
	wide := Limits{MaxAttributesBytes: 4 << 20} // rows, not attributes, are tested here
	big := strings.Repeat("x", DefaultMaxRowBytes-20)
	in := "product_id,a\n1," + big + "\n2,\"" + strings.Repeat("y\n", 1000) + "\"\n3,z\n"
	rows, _, err := readAll([]byte(in), FormatCSV, wide)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.Equal(t, 3, rows[1].Line)
	require.Equal(t, 1004, rows[2].Line)

	exact := "1," + strings.Repeat("x", DefaultMaxRowBytes-2)
	rows, _, err = readAll([]byte("product_id,a\r\n"+exact+"\r\n"+exact), FormatCSV, wide)
	require.NoError(t, err)
	require.Len(t, rows, 2)

	// A row too large is skipped to its end, and the rows after it are read,
	// on their lines, however the input comes.
	for _, tc := range []struct {
		in   string
		next int // line of the row after the one too large
	}{
		{"product_id,a\n" + exact + "x\n2,z\n", 3},
		{"product_id,a\n" + exact + "x\r\n2,z\n", 3},
		{"product_id,a\n" + exact + "x", 0},
		{"product_id,a\n" + exact + strings.Repeat("x", 3*DefaultMaxRowBytes) + "\n2,z\n", 3},
		{"product_id,a\n1,\"" + strings.Repeat("\n", DefaultMaxRowBytes) + "\"\n2,z\n", DefaultMaxRowBytes + 3},
		{"product_id,a\n1,\"" + strings.Repeat("\"\"\n", DefaultMaxRowBytes) + "\"\n2,z\n", DefaultMaxRowBytes + 3},
		{"product_id,a\n1,\"" + strings.Repeat("ab\r\n", DefaultMaxRowBytes) + "\"\r\n2,z\r\n", DefaultMaxRowBytes + 3},
		{"product_id,a\n1,\"" + strings.Repeat("\n", DefaultMaxRowBytes) + "\"x\n2,z\n", DefaultMaxRowBytes + 3},
	} {
		data := []byte(tc.in)
		for _, rd := range []io.Reader{bytes.NewReader(data), iotest.HalfReader(bytes.NewReader(data)), bytes.NewReader(gz(t, data))} {
			rows, _, err = readAllFrom(rd, FormatCSV, wide)
			var e *Error
			require.ErrorAs(t, err, &e)
			require.Equal(t, []string{"row_too_large@2"}, problemsOf(err), "%v", err)
			if tc.next == 0 {
				require.Empty(t, rows)
				continue
			}
			require.Len(t, rows, 1)
			require.Equal(t, "2", rows[0].ProductID)
			require.Equal(t, tc.next, rows[0].Line)
		}
		rows2, err2 := readAllWith(data, FormatCSV, wide, parallel)
		require.Equal(t, err.Error(), err2.Error())
		require.Equal(t, rows, rows2)
	}

	// A quote that would swallow the rest of a big file is named as such.
	in = "product_id,size\n1,M\n2,\"27 monitor\n" + strings.Repeat("3,x\n", DefaultMaxRowBytes/4+10)
	rows, _, err = readAll([]byte(in), FormatCSV, Limits{})
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, []string{"row_too_large@3"}, problemsOf(err))
	require.Contains(t, e.Message, "missing closing quote")
	require.Len(t, rows, 1)
	// A quote inside a field is a literal character, in a big file too.
	in = "product_id,size\n1,M\n2,27\" monitor\n" + strings.Repeat("3,x\n", DefaultMaxRowBytes/4+10)
	rows, _, err = readAll([]byte(in), FormatCSV, Limits{})
	require.NoError(t, err)
	require.Len(t, rows, 2+DefaultMaxRowBytes/4+10)
	require.Equal(t, `{"size":"27\" monitor"}`, string(rows[1].Attributes))

	// Attributes over 256 KiB in canonical form, whatever the row's size.
	for _, tc := range []struct {
		in   string
		code string
	}{
		{"product_id,a\n1," + strings.Repeat("x", DefaultMaxAttributesBytes-8) + "\n", ""},
		{"product_id,a\n1," + strings.Repeat("x", DefaultMaxAttributesBytes-7) + "\n", CodeAttributesTooLarge},
		{"product_id,a\n1," + strings.Repeat("\x01", DefaultMaxAttributesBytes/6) + "\n", CodeAttributesTooLarge},
		{`{"product_id":"1","a":"` + strings.Repeat("x", DefaultMaxAttributesBytes-8) + `"}`, ""},
		{`{"product_id":"1","a":"` + strings.Repeat("\\u0041", DefaultMaxAttributesBytes/6) + `"}`, ""},
		{`{"product_id":"1","a":"` + strings.Repeat("x", DefaultMaxAttributesBytes-7) + `"}`, CodeAttributesTooLarge},
		{`{"product_id":"1","a":"` + strings.Repeat("\x01", DefaultMaxAttributesBytes/6) + `"}`, CodeMalformedJSON},
		{`{"product_id":"1","a":"` + strings.Repeat("\\u0001", DefaultMaxAttributesBytes/6) + `"}`, CodeAttributesTooLarge},
	} {
		rows, _, err := readAll([]byte(tc.in), FormatAuto, Limits{})
		if tc.code == "" {
			require.NoError(t, err)
			require.Len(t, rows, 1)
			continue
		}
		require.Equal(t, []string{tc.code + "@" + map[bool]string{true: "2", false: "1"}[tc.in[0] == 'p']}, problemsOf(err))
	}

	// JSON line at and over the default limit.
	pad := strings.Repeat("x", DefaultMaxRowBytes-len(`{"product_id":"1","a":""}`))
	line := `{"product_id":"1","a":"` + pad + `"}`
	rows, _, err = readAll([]byte(line+"\r\n"+line), FormatAuto, wide)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	_, _, err = readAll([]byte("\n"+line+" \n"), FormatAuto, wide)
	require.ErrorAs(t, err, &e)
	require.Equal(t, CodeRowTooLarge, e.Code)
	require.Equal(t, 2, e.Line)
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	var all []byte
	for r := rune(0); r < 0x3000; r++ {
		all = fmt.Appendf(all, "%c", r)
	}
	rng := rand.New(rand.NewPCG(9, 10))
	inputs := []string{"", string(all), "\u2028\u2029\u202a\u2027", "\xe2\x80", "a\xe2", "<script>&amp;</script>"}
	for range 1000 {
		inputs = append(inputs, randString(rng, 40))
	}
	for _, s := range inputs {
		if !utf8.ValidString(s) {
			continue // the reader never encodes invalid UTF-8
		}
		ref, err := marshalCanonical(s)
		require.NoError(t, err)
		require.Equal(t, string(ref), string(appendJSONString(nil, []byte(s))), "%q", s)
	}
}

func TestCanonicalize(t *testing.T) {
	for in, want := range map[string]string{
		`{}`: `{}`,
		` { "b" : [ 1 , { "d":1, "c":2 } ] , "a":"\u00e9" } `: `{"a":"é","b":[1,{"c":2,"d":1}]}`,
		`{"product_id":"x","a":1}`:                            `{"a":1,"product_id":"x"}`,
	} {
		got, err := Canonicalize([]byte(in))
		require.NoError(t, err)
		require.Equal(t, want, string(got))
	}
	for in, code := range map[string]string{
		``:                 CodeMalformedJSON,
		`[]`:               CodeMalformedJSON,
		`{"a":1,"a":2}`:    CodeDuplicateColumn,
		"{\"a\":\"\xff\"}": CodeInvalidUTF8,
		`{"a":"\udfff"}`:   CodeUnsupportedValue,
		`{"a":1}x`:         CodeMalformedJSON,
	} {
		_, err := Canonicalize([]byte(in))
		var e *Error
		require.ErrorAs(t, err, &e, in)
		require.Equal(t, code, e.Code, in)
		require.Equal(t, 0, e.Line)
	}
	deep := strings.Repeat("[", MaxNesting) + strings.Repeat("]", MaxNesting)
	_, err := Canonicalize([]byte(`{"a":` + deep + `}`))
	require.Error(t, err)
	_, err = Canonicalize([]byte(`{"a":` + deep[1:len(deep)-1] + `}`))
	require.NoError(t, err)
}

func TestDuplicateError(t *testing.T) {
	e := DuplicateError("sku-1", 7, 20)
	require.Equal(t, CodeDuplicateProductID, e.Code)
	require.Equal(t, 20, e.Line)
	require.Contains(t, e.Message, "line 20")
	require.Contains(t, e.Message, "line 7")
	require.Contains(t, e.Message, `"sku-1"`)
	require.Contains(t, e.Error(), CodeDuplicateProductID)
	var err error = e
	var got *Error
	require.ErrorAs(t, err, &got)
}

func TestValidProductID(t *testing.T) {
	for id, ok := range map[string]bool{
		"a": true, "SKU 123/é": true, strings.Repeat("é", 128): true, "😀": true, "a b": true, "\u00a0": true,
		"": false, strings.Repeat("é", 128) + "x": false, "a\x00": false, "\t": false, "\x7f": false,
		"\u0080": false, "\u009f": false, "\xff": false,
	} {
		require.Equal(t, ok, ValidProductID(id), "%q", id)
	}
}

func TestErrorCodesCovered(t *testing.T) {
	seen := map[string]bool{CodeDuplicateProductID: true, CodeBadGzip: true}
	for _, tc := range append(slices.Clone(csvCases), jsonlCases...) {
		seen[tc.code] = true
	}
	for _, c := range Codes {
		require.True(t, seen[c], "no table case for %s", c)
	}
}

func TestReuseAttributes(t *testing.T) {
	data := genJSONL(300)
	want, _, err := readAll(data, FormatAuto, Limits{})
	require.NoError(t, err)
	r, err := NewReader(bytes.NewReader(data), FormatAuto, Limits{})
	require.NoError(t, err)
	r.ReuseAttributes = true
	for i := 0; ; i++ {
		row, err := r.Next()
		if err == io.EOF {
			require.Equal(t, len(want), i)
			break
		}
		require.NoError(t, err)
		require.Equal(t, string(want[i].Attributes), string(row.Attributes))
		require.Equal(t, want[i].Hash, row.Hash)
	}
}
