package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// The defects found by an attack on the running system: files that passed
// every check of the reader and could then never be applied (jsonb refused
// the chunk), and problems that copied the file into the status. Each test
// fails on the reader as it was before (see the commit message).

// requireRejected reads data (serially and in parallel, plain and
// gzipped) and requires the rejection's problems to be exactly probs
// ("code@line").
func requireRejected(t *testing.T, data string, f Format, lim Limits, probs ...string) *Error {
	t.Helper()
	var first *Error
	for _, in := range [][]byte{[]byte(data), gz(t, []byte(data))} {
		for name, set := range map[string]func(*Reader){"serial": nil, "parallel": parallel} {
			_, err := readAllWith(in, f, lim, set)
			var e *Error
			require.ErrorAs(t, err, &e, name)
			require.Equal(t, probs, problemsOf(err), "%s: %v", name, err)
			if first == nil {
				first = e
			}
		}
	}
	return first
}

func TestNULInCSVCellRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, "product_id,title,brand\np1,ok,Acme\np2,Mon\x00itor,Acme\n\"p3\",\"two\nlines \x00\",x\np4,fine,x\n", FormatCSV, Limits{},
		"unsupported_value@3", "unsupported_value@4")
	require.Equal(t, `line 3: column "title" holds a NUL byte (U+0000), which the catalog cannot store`, e.Message)
}

func TestNULInJSONValueRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, `{"product_id":"p1","title":"ok"}`+"\n"+`{"product_id":"p2","title":"Mon\u0000itor"}`+"\n"+`{"product_id":"p3","tags":["a","\u0000"]}`, FormatJSONL, Limits{},
		"unsupported_value@2", "unsupported_value@3")
	require.Equal(t, `line 2: \u0000 (U+0000) in a string at column 32: the catalog cannot store it`, e.Message)
}

func TestNULInJSONKeyRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, `{"product_id":"p1","ti\u0000tle":"x"}`+"\n"+`{"product_id":"p2","a":{"\u0000":1}}`, FormatJSONL, Limits{},
		"unsupported_value@1", "unsupported_value@2")
	require.Equal(t, `line 1: \u0000 (U+0000) in a key at column 23: the catalog cannot store it`, e.Message)
}

func TestHugeExponentRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, `{"product_id":"p1","weight":1e200000}`+"\n"+`{"product_id":"p2","weight":1e5}`+"\n"+`{"product_id":"p3","w":[1e-20000]}`, FormatJSONL, Limits{},
		"unsupported_value@1", "unsupported_value@3")
	require.Equal(t, "line 1: number 1e200000 at column 29 cannot be stored exactly: it has 200001 digits before the decimal point; the catalog holds numbers of at most 131072 digits before the decimal point and 16383 after it", e.Message)
	require.Contains(t, e.Problems[1].Message, "it has 20000 digits after the decimal point")
}

func TestLoneSurrogateRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, `{"product_id":"p1","title":"\ud800"}`+"\n"+`{"product_id":"p2","title":"\ud83d\ude00"}`, FormatJSONL, Limits{},
		"unsupported_value@1")
	require.Contains(t, e.Message, `lone UTF-16 surrogate \ud800 in a string at column 29`)
}

func TestAttributeName1025BytesRejected(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", 1025)
	e := requireRejected(t, "product_id,"+long+"\np1,x\n", FormatCSV, Limits{}, "invalid_attribute_name@1")
	require.Equal(t, `line 1: column 2: attribute name "`+strings.Repeat("n", 155)+`…" is 1025 bytes, over the limit of 1024`, e.Message)
	requireRejected(t, `{"product_id":"p1","`+long+`":1}`+"\n"+`{"product_id":"p2","`+long[1:]+`":1}`, FormatJSONL, Limits{}, "invalid_attribute_name@1")
}

func TestControlCharacterInHeaderRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, "product_id,title,\"col\tour\"\np1,x,y\n", FormatCSV, Limits{}, "invalid_attribute_name@1")
	require.Equal(t, `line 1: column 3: attribute name "col\tour" holds control character U+0009 at byte 4`, e.Message)
	requireRejected(t, "product_id,a\u009fb\np1,x\n", FormatCSV, Limits{}, "invalid_attribute_name@1")
	requireRejected(t, `{"product_id":"p1","a\nb":1}`, FormatJSONL, Limits{}, "invalid_attribute_name@1")
}

func TestDeleteInFullSnapshotRejected(t *testing.T) {
	t.Parallel()
	e := requireRejected(t, "product_id,title,_delete\np1,x,true\n", FormatCSV, Limits{}, "invalid_attribute_name@1")
	require.Contains(t, e.Message, `"_delete" is reserved`)
	requireRejected(t, `{"product_id":"p1","title":"x"}`+"\n"+`{"product_id":"p2","_delete":true}`, FormatJSONL, Limits{}, "invalid_attribute_name@2")
}

// endlessCSV is a CSV file that never ends (a header, then rows), counting
// the bytes read from it; it ends at max bytes so that a reader that does
// not stop fails the test rather than hanging it.
type endlessCSV struct {
	read, max int64
	n         int
	pending   []byte
}

func (e *endlessCSV) Read(p []byte) (int, error) {
	if e.read >= e.max {
		return 0, io.EOF
	}
	if e.read == 0 && len(e.pending) == 0 {
		e.pending = []byte("product_id,title\n")
	}
	n := 0
	for n < len(p) {
		if len(e.pending) == 0 {
			e.n++
			e.pending = fmt.Appendf(e.pending[:0], "p%09d,product number %d\n", e.n, e.n)
		}
		c := copy(p[n:], e.pending)
		e.pending = e.pending[c:]
		n += c
	}
	e.read += int64(n)
	return n, nil
}

// Past the product limit the reader stops at once: it reads a few buffers
// more, not the rest of a file that does not end.
func TestTooManyProductsStopsReading(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]func(*Reader){"serial": nil, "parallel": func(r *Reader) { r.Workers = 3 }} {
		src := &endlessCSV{max: 1 << 30}
		r, err := NewReader(src, FormatCSV, Limits{MaxProducts: 1000})
		require.NoError(t, err)
		if set != nil {
			set(r)
		}
		rows := 0
		for {
			_, err = r.Next()
			if err != nil {
				break
			}
			rows++
		}
		r.Close()
		var e *Error
		require.ErrorAs(t, err, &e, name)
		require.Equal(t, []string{"too_many_products@1002"}, problemsOf(err), name)
		require.Equal(t, "line 1002: more than 1000 products, the limit: the file is read no further", e.Message)
		require.Equal(t, 1000, rows, name)
		require.Less(t, src.read, int64(8<<20), "%s: read %d bytes of a file without end", name, src.read)
		t.Logf("%s: %d bytes read to find product 1001", name, src.read)
	}
	require.EqualValues(t, DefaultMaxProducts, Limits{}.WithDefaults().MaxProducts)
	require.EqualValues(t, 50_000_000, DefaultMaxProducts)
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// A gzip file that inflates past the decompressed limit is rejected
// file_too_large as soon as it passes the limit: 256 MiB of rows in
// ~250 KiB of gzip, a limit of 4 MiB.
func TestInflateLimit(t *testing.T) {
	t.Parallel()
	var bomb bytes.Buffer
	zw, err := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write([]byte("product_id\n"))
	require.NoError(t, err)
	row := bytes.Repeat([]byte("a\n"), 1<<20)
	for range 128 {
		_, err = zw.Write(row)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	const limit = 4 << 20
	for name, set := range map[string]func(*Reader){"serial": nil, "parallel": func(r *Reader) { r.Workers = 3 }} {
		src := &countingReader{r: bytes.NewReader(bomb.Bytes())}
		r, err := NewReader(src, FormatCSV, Limits{MaxFileBytes: limit, MaxProducts: -1})
		require.NoError(t, err)
		if set != nil {
			set(r)
		}
		rows := 0
		for {
			if _, err = r.Scan(); err != nil {
				break
			}
			rows++
		}
		r.Close()
		var e *Error
		require.ErrorAs(t, err, &e, name)
		require.Equal(t, []string{"file_too_large@0"}, problemsOf(err), name)
		require.Equal(t, "file is over the limit of 4194304 bytes (decompressed)", e.Message)
		require.Equal(t, (limit-len("product_id\n"))/2, rows, name)
		require.Less(t, src.n, int64(bomb.Len())/4, "%s: read %d of %d compressed bytes", name, src.n, bomb.Len())
	}
	require.EqualValues(t, int64(50)<<30, Limits{}.WithDefaults().MaxFileBytes)
}

// requireBounded checks every message of e: at most MaxMessageBytes, also
// JSON-encoded as the API encodes it, valid UTF-8.
func requireBounded(t *testing.T, e *Error) {
	t.Helper()
	list := e.List()
	if len(e.Problems) > 0 {
		list = append(list, Problem{Message: e.Message})
	}
	for _, p := range list {
		require.True(t, utf8.ValidString(p.Message), "%q", p.Message)
		require.LessOrEqual(t, len(p.Message), MaxMessageBytes, p.Message)
		enc, err := json.Marshal(p.Message)
		require.NoError(t, err)
		require.LessOrEqual(t, len(enc)-2, MaxMessageBytes, "encoded: %s", enc)
	}
}

// Every problem's message is at most 512 bytes: what the file puts into it
// (a column name, a key, a product_id, a number) is cut, with "…".
func TestProblemMessageBound(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat(`é<"\&`, 20_000) // 140,000 bytes, escaped in %q and in JSON
	hugeKey, err := json.Marshal(huge)
	require.NoError(t, err)
	name := strings.Repeat(`é<"\&`, 146) + "x"
	for _, tc := range []struct {
		name, in string
		f        Format
		code     string
	}{
		{"duplicate column", "product_id," + name + "," + name + "\n", FormatCSV, CodeDuplicateColumn},
		{"long column name", "product_id,a," + huge[:20_000] + "\n", FormatCSV, CodeInvalidAttributeName},
		{"product_id column hint", " Product_ID" + strings.Repeat(" ", 2000) + ",x\n", FormatCSV, CodeMissingProductIDColumn},
		{"invalid UTF-8 in a column", "product_id," + name + "\np1,\xff\n", FormatCSV, CodeInvalidUTF8},
		{"NUL in a column", "product_id," + name + "\np1,\x00\n", FormatCSV, CodeUnsupportedValue},
		{"duplicate key", `{"product_id":"p1","a":{` + string(hugeKey) + `:1,` + string(hugeKey) + `:2}}`, FormatJSONL, CodeDuplicateColumn},
		{"long key", `{"product_id":"p1",` + string(hugeKey) + `:1}`, FormatJSONL, CodeInvalidAttributeName},
		{"key with a control character", `{"product_id":"p1","\t` + string(hugeKey[1:]) + `:1}`, FormatJSONL, CodeInvalidAttributeName},
		{"long number", `{"product_id":"p1","n":1` + strings.Repeat("0", 200_000) + `}`, FormatJSONL, CodeUnsupportedValue},
		{"long number with exponent", `{"product_id":"p1","n":1.` + strings.Repeat("0", 20_000) + `e-1}`, FormatJSONL, CodeUnsupportedValue},
	} {
		_, _, err := readAll([]byte(tc.in), tc.f, Limits{})
		var e *Error
		require.ErrorAs(t, err, &e, tc.name)
		require.Equal(t, tc.code, e.Code, "%s: %s", tc.name, e.Message)
		require.Contains(t, e.Message, "…", tc.name)
		requireBounded(t, e)
	}
	// A duplicate product_id of 256 bytes that JSON escapes six times over.
	e := DuplicateError(strings.Repeat("<", 256), 1, 2)
	require.Contains(t, e.Message, `first on line 1`)
	requireBounded(t, e)
	// A message built by hand is bounded by List, and one that is long
	// for any reason by Reject.
	hand := &Error{Code: CodeFileTooLarge, Message: strings.Repeat("<", 10_000)}
	requireBounded(t, hand)
	requireBounded(t, Reject([]Problem{{Code: CodeMalformedCSV, Line: 1, Message: strings.Repeat("ü", 10_000)}}, false))
	require.Equal(t, "short", boundMessage("short"))
	cut := boundMessage(strings.Repeat("a", 600))
	require.Equal(t, strings.Repeat("a", MaxMessageBytes-len("…"))+"…", cut)
}

// The worst files for the status: a 1 MB header of long column names, every
// character one that JSON escapes, and rows whose problems quote them;
// JSON Lines rows whose problems quote huge keys. The rejection (the first
// 100 problems and the error) stays far enough under 64 KiB that the
// status that carries it does too.
func TestStatusBound(t *testing.T) {
	t.Parallel()
	var csvFile bytes.Buffer
	csvFile.WriteString("product_id")
	for i := range 999 {
		fmt.Fprintf(&csvFile, ",%04d%s", i, strings.Repeat(`<"&\`, 255)) // 1,024 bytes a name
	}
	csvFile.WriteString("\n")
	require.Greater(t, csvFile.Len(), 1_000_000)
	for i := range 300 {
		fmt.Fprintf(&csvFile, "%s-%d%s\xff\n", strings.Repeat("<", 200), i, strings.Repeat(",", 999))
	}
	var jsonFile bytes.Buffer
	for i := range 300 {
		k, err := json.Marshal(fmt.Sprintf("%d%s", i, strings.Repeat(`<"&\`, 2000)))
		require.NoError(t, err)
		key := string(k[1 : len(k)-1])
		switch i % 3 {
		case 0:
			fmt.Fprintf(&jsonFile, `{"product_id":"p%d","%s":1,"%s":2}`+"\n", i, key, key)
		case 1:
			fmt.Fprintf(&jsonFile, `{"product_id":"p%d","%s":1}`+"\n", i, key)
		default:
			fmt.Fprintf(&jsonFile, `{"product_id":"p%d","n":%s1e99999999}`+"\n", i, strings.Repeat("9", 3000))
		}
	}
	for name, in := range map[string][]byte{"csv": csvFile.Bytes(), "jsonl": jsonFile.Bytes()} {
		_, _, err := readAll(in, FormatAuto, Limits{})
		var e *Error
		require.ErrorAs(t, err, &e, name)
		require.Len(t, e.Problems, MaxProblems, name)
		require.True(t, e.More, name)
		for _, p := range e.Problems {
			require.NotEqual(t, CodeMalformedCSV, p.Code, "%s: %s", name, p.Message)
		}
		requireBounded(t, e)
		// As the status carries it (events.StatusError, encoded by
		// encoding/json).
		line := e.Line
		status, err := json.Marshal(struct {
			Code     string    `json:"code"`
			Message  string    `json:"message"`
			Line     *int      `json:"line"`
			Problems []Problem `json:"problems"`
			More     bool      `json:"more_problems"`
		}{e.Code, e.Message, &line, e.Problems, e.More})
		require.NoError(t, err)
		require.Less(t, len(status), 60<<10, "%s: %d bytes", name, len(status))
		t.Logf("%s: %d bytes of file, a rejection of %d bytes encoded", name, len(in), len(status))
	}
}

// The product_id of a row stays invalid_product_id with U+0000 in it (it
// is checked as an id, control characters refused), as before.
func TestProductIDWithNULStaysInvalidProductID(t *testing.T) {
	t.Parallel()
	requireRejected(t, "product_id,a\np\x00,x\n", FormatCSV, Limits{}, "invalid_product_id@2")
	requireRejected(t, `{"product_id":"p\u0000","a":"x"}`, FormatJSONL, Limits{}, "invalid_product_id@1")
}

// appendNumeric writes what PostgreSQL's numeric_out prints (the
// differential test checks it against the database; this pins examples).
func TestAppendNumeric(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"0": "0", "-0": "0", "-0.0": "0.0", "0.000": "0.000", "1E2": "100", "1e+2": "100", "1.50": "1.50",
		"1e-2": "0.01", "1.0e1": "10", "1.00e1": "10.0", "100e-2": "1.00", "-1.5e-3": "-0.0015",
		"123456789012345678901234567890e-30": "0.123456789012345678901234567890", "0e200000": "0",
		"0.0e-3": "0.0000", "-0e5": "0", "12.34e1": "123.4", "12.34e5": "1234000", "0.0001e4": "1",
		"-9e0": "-9", "5e-0": "5", "1E-000002": "0.01",
	} {
		got, reason := appendNumeric(nil, []byte(in))
		require.Empty(t, reason, in)
		require.Equal(t, want, string(got), in)
		ref, ok := refNumeric(in)
		require.True(t, ok, in)
		require.Equal(t, want, ref, in)
	}
	for _, in := range []string{"1e131072", "0e-16384", "1e-16384", "1.5e-16383", "0e1073741823", "0e-1073741823",
		"1e99999999999999999999", "0.0001e131076", "1" + strings.Repeat("0", 131072), "0." + strings.Repeat("0", 16384)} {
		got, reason := appendNumeric([]byte("x"), []byte(in))
		require.NotEmpty(t, reason, in)
		require.Equal(t, "x", string(got), in)
		_, ok := refNumeric(in)
		require.False(t, ok, in)
	}
}

func TestErrorsAreErrors(t *testing.T) {
	t.Parallel()
	_, _, err := readAll([]byte(`{"product_id":"p","a":1e999999}`), FormatJSONL, Limits{})
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, CodeUnsupportedValue, e.Code)
}
