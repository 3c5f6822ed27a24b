package snapshot

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retailcatalog/catalog/functions/core/catalog"

	"github.com/stretchr/testify/require"
)

// want is an expected row.
type want struct {
	id    string
	attrs string
	line  int
}

// tcase is one table case: either rows or an error code and line.
type tcase struct {
	name   string
	format Format // as passed to NewReader
	in     string
	lim    Limits
	rows   []want
	code   string // expected *Error code ("" = no error)
	line   int    // expected Error.Line
	// probs lists every expected problem as "code@line" when there is more
	// than the one of code and line
	probs []string
}

// problemsOf lists the problems of a *Error as "code@line".
func problemsOf(err error) []string {
	var e *Error
	if !errors.As(err, &e) {
		return nil
	}
	var out []string
	for _, p := range e.List() {
		out = append(out, fmt.Sprintf("%s@%d", p.Code, p.Line))
	}
	return out
}

// readAll reads every row; err is nil at a clean EOF.
func readAll(data []byte, format Format, lim Limits) (rows []Row, used Format, err error) {
	return readAllFrom(bytes.NewReader(data), format, lim)
}

func readAllFrom(rd io.Reader, format Format, lim Limits) (rows []Row, used Format, err error) {
	r, err := NewReader(rd, format, lim)
	if err != nil {
		return nil, "", err
	}
	for {
		row, err := r.Next()
		if err == io.EOF {
			if _, err2 := r.Next(); err2 != io.EOF {
				return rows, r.Format(), fmt.Errorf("Next after EOF: %v", err2)
			}
			return rows, r.Format(), nil
		}
		if err != nil {
			if _, err2 := r.Next(); err2 != err {
				return rows, r.Format(), fmt.Errorf("error not sticky: %v then %v", err, err2)
			}
			return rows, r.Format(), err
		}
		rows = append(rows, row)
	}
}

func runCase(t *testing.T, tc tcase, data []byte) {
	t.Helper()
	rows, _, err := readAll(data, tc.format, tc.lim)
	checkParallel(t, data, tc.format, tc.lim, rows, err)
	if tc.code != "" {
		var e *Error
		require.ErrorAs(t, err, &e, "want %s", tc.code)
		require.Equal(t, tc.code, e.Code, "message: %s", e.Message)
		require.Equal(t, tc.line, e.Line, "message: %s", e.Message)
		probs := tc.probs
		if probs == nil {
			probs = []string{fmt.Sprintf("%s@%d", tc.code, tc.line)}
		}
		require.Equal(t, probs, problemsOf(err), "%v", err)
		require.Equal(t, e.Problems[0], Problem{Code: e.Code, Line: e.Line, Message: e.Message})
		for _, p := range e.Problems {
			if p.Line > 0 {
				require.True(t, strings.HasPrefix(p.Message, fmt.Sprintf("line %d: ", p.Line)), p.Message)
			}
		}
		require.Len(t, rows, len(tc.rows), "rows returned")
	} else {
		require.NoError(t, err)
		require.Len(t, rows, len(tc.rows))
	}
	for i, w := range tc.rows {
		require.Equal(t, w.id, rows[i].ProductID, "row %d", i)
		require.Equal(t, w.attrs, string(rows[i].Attributes), "row %d", i)
		require.Equal(t, w.line, rows[i].Line, "row %d", i)
		require.Equal(t, catalog.HashAttributes(rows[i].Attributes), rows[i].Hash, "row %d", i)
	}
}

func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, err := w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

// marshalCanonical is the reference canonical form: encoding/json with
// sorted map keys, json.Number (normalized by refNumeric) and HTML
// escaping off.
func marshalCanonical(v any) ([]byte, error) {
	v, err := normalizeNumbers(v)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// normalizeNumbers returns v (as decoded with UseNumber) with every
// json.Number as refNumeric writes it, or the error of a number the
// catalog cannot hold.
func normalizeNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		n, ok := refNumeric(string(x))
		if !ok {
			return nil, fmt.Errorf("number %.40s...: out of numeric's range", x)
		}
		return json.Number(n), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = normalizeNumbers(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			var err error
			if out[k], err = normalizeNumbers(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// refNumeric is the reference of appendNumeric, computed otherwise: the
// value M×10^k of the JSON number text (M its digits, k its exponent less
// its fraction digits), refused past PostgreSQL numeric's bounds (an
// exponent of 2^30-1 or more either way, a scale over 16383, more than
// 131072 digits before the point), else the exact value written with
// math/big at the text's scale.
func refNumeric(text string) (string, bool) {
	mant, expText, _ := strings.Cut(strings.ToLower(text), "e")
	exp := new(big.Int)
	if expText != "" {
		if _, ok := exp.SetString(strings.TrimPrefix(expText, "+"), 10); !ok {
			panic("bad exponent " + expText)
		}
	}
	if new(big.Int).Abs(exp).Cmp(big.NewInt(1<<30-1)) >= 0 {
		return "", false
	}
	intPart, frac, _ := strings.Cut(strings.TrimPrefix(mant, "-"), ".")
	k := exp.Int64() - int64(len(frac))
	scale := max(0, -k)
	if scale > 16383 {
		return "", false
	}
	m := strings.TrimLeft(intPart+frac, "0")
	if m == "" {
		if scale == 0 {
			return "0", true
		}
		return "0." + strings.Repeat("0", int(scale)), true
	}
	if int64(len(m))+k > 131072 {
		return "", false
	}
	v, ok := new(big.Rat).SetString(text)
	if !ok {
		panic("bad number " + text)
	}
	return v.FloatString(int(scale)), true
}

func decodeNumber(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

// checkRow asserts the invariants every row must hold.
func checkRow(t testing.TB, row Row) {
	t.Helper()
	id := row.ProductID
	if len(id) < 1 || len(id) > MaxProductIDBytes || !utf8.ValidString(id) || !ValidProductID(id) {
		t.Fatalf("invalid product id %q", id)
	}
	for _, c := range id {
		if c < 0x20 || (c >= 0x7f && c <= 0x9f) {
			t.Fatalf("control character in product id %q", id)
		}
	}
	if row.Line < 1 {
		t.Fatalf("line %d", row.Line)
	}
	if !json.Valid(row.Attributes) || row.Attributes[0] != '{' {
		t.Fatalf("attributes not a JSON object: %q", row.Attributes)
	}
	again, err := Canonicalize(row.Attributes)
	if err != nil {
		t.Fatalf("canonicalize %q: %v", row.Attributes, err)
	}
	if !bytes.Equal(again, row.Attributes) {
		t.Fatalf("not canonical:\n%q\n%q", row.Attributes, again)
	}
	v, err := decodeNumber(row.Attributes)
	if err != nil {
		t.Fatalf("decode %q: %v", row.Attributes, err)
	}
	ref, err := marshalCanonical(v)
	if err != nil {
		t.Fatalf("marshal %q: %v", row.Attributes, err)
	}
	if !bytes.Equal(ref, row.Attributes) {
		t.Fatalf("differs from encoding/json:\n got %q\nwant %q", row.Attributes, ref)
	}
	if row.Hash != catalog.HashAttributes(row.Attributes) {
		t.Fatalf("hash mismatch")
	}
}

// checkErr asserts err is a *Error with a known code (or nil/EOF).
func checkErr(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error is not *Error: %T %v", err, err)
	}
	known := false
	for _, c := range Codes {
		known = known || c == e.Code
	}
	if !known || e.Line < 0 || e.Message == "" {
		t.Fatalf("bad error %+v", e)
	}
}

// Generated catalog data for benchmarks and stress tests.

var (
	brands     = []string{"Acme", "Globex", "Initech", "Umbrella", "Stark", "Wayne & Co", "Soylent"}
	categories = []string{"Apparel > Shirts", "Apparel > Shoes", "Home > Kitchen", "Electronics > Audio", "Toys"}
	colors     = []string{"red", "blue", "black", "white", "green", "navy", "grey"}
	sizes      = []string{"XS", "S", "M", "L", "XL", "42", "10.5"}
	words      = strings.Fields("soft cotton durable lightweight premium classic modern slim fit waterproof breathable stylish everyday comfort design quality natural organic")
)

var columns = []string{"product_id", "title", "brand", "price", "currency", "availability", "category", "gtin", "color", "size", "image_url", "description", "updated"}

func genProduct(rng *rand.Rand, i int) map[string]string {
	var desc strings.Builder
	for desc.Len() < 100 {
		desc.WriteString(words[rng.IntN(len(words))])
		desc.WriteByte(' ')
	}
	d := desc.String()
	if i%10 == 0 {
		d = `The "` + d + `", with a comma`
	}
	return map[string]string{
		"product_id":   fmt.Sprintf("SKU-%08d", i),
		"title":        fmt.Sprintf("%s %s %s", brands[i%len(brands)], words[rng.IntN(len(words))], words[rng.IntN(len(words))]),
		"brand":        brands[rng.IntN(len(brands))],
		"price":        fmt.Sprintf("%d.%02d", rng.IntN(500), rng.IntN(100)),
		"currency":     "USD",
		"availability": []string{"in stock", "out of stock", "preorder"}[rng.IntN(3)],
		"category":     categories[rng.IntN(len(categories))],
		"gtin":         fmt.Sprintf("%013d", rng.Int64N(1e13)),
		"color":        colors[rng.IntN(len(colors))],
		"size":         sizes[rng.IntN(len(sizes))],
		"image_url":    fmt.Sprintf("https://cdn.example.com/images/%08d/main.jpg", i),
		"description":  d,
		"updated":      fmt.Sprintf("2025-%02d-%02dT10:%02d:00Z", 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(60)),
	}
}

func genCSV(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString(strings.Join(columns, ",") + "\n")
	for i := range n {
		p := genProduct(rng, i)
		for j, c := range columns {
			if j > 0 {
				b.WriteByte(',')
			}
			v := p[c]
			if strings.ContainsAny(v, "\",\r\n") {
				v = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
			}
			b.WriteString(v)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func genJSONL(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for i := range n {
		p := genProduct(rng, i)
		b.WriteByte('{')
		for j, c := range columns {
			if j > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(c)
			b.Write(k)
			b.WriteByte(':')
			switch c {
			case "price":
				b.WriteString(p[c]) // a number
			default:
				v, _ := json.Marshal(p[c])
				b.Write(v)
			}
		}
		b.WriteString("}\n")
	}
	return b.Bytes()
}

// readAllWith reads every row with a configured reader; err is nil at a clean EOF.
func readAllWith(data []byte, format Format, lim Limits, set func(*Reader)) ([]Row, error) {
	return readAllSized(data, format, lim, steadyBufSize, set)
}

// readAllTiny is readAllWith with a buffer of at most the row limit plus 2
// bytes: longer records are cut and skipped.
func readAllTiny(data []byte, format Format, lim Limits, set func(*Reader)) ([]Row, error) {
	return readAllSized(data, format, lim, 1, set)
}

func readAllSized(data []byte, format Format, lim Limits, steady int, set func(*Reader)) ([]Row, error) {
	r, err := newReader(bytes.NewReader(data), format, lim, steady)
	if err != nil {
		return nil, err
	}
	if set != nil {
		set(r)
	}
	defer r.Close()
	var rows []Row
	for {
		row, err := r.Next()
		if err == io.EOF {
			if _, err2 := r.Next(); err2 != io.EOF {
				return rows, fmt.Errorf("Next after EOF: %v", err2)
			}
			return rows, nil
		}
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
	}
}

// parallel makes a reader parallel with tiny batches, so that every batch
// boundary is exercised.
func parallel(r *Reader) { r.Workers, r.batchBytes, r.batchRecords = 3, 7, 3 }

// checkParallel checks that the parallel reader, and the reader restricted
// to some lines (serial and parallel), agree with the serial reader.
func checkParallel(t *testing.T, data []byte, f Format, lim Limits, rows []Row, err error) {
	t.Helper()
	same := func(what string, got []Row, gotErr error, want []Row, wantErr error) {
		t.Helper()
		if (gotErr == nil) != (wantErr == nil) || (wantErr != nil && gotErr.Error() != wantErr.Error()) {
			t.Fatalf("%s: error %v, serial %v", what, gotErr, wantErr)
		}
		var ge, we *Error
		if errors.As(gotErr, &ge) && errors.As(wantErr, &we) && (!slices.Equal(ge.Problems, we.Problems) || ge.More != we.More) {
			t.Fatalf("%s: problems %+v, serial %+v", what, ge, we)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, serial %d", what, len(got), len(want))
		}
		for i := range want {
			if got[i].ProductID != want[i].ProductID || !bytes.Equal(got[i].Attributes, want[i].Attributes) ||
				got[i].Line != want[i].Line || got[i].Hash != want[i].Hash {
				t.Fatalf("%s: row %d differs: %+v vs %+v", what, i, got[i], want[i])
			}
		}
	}
	prows, perr := readAllWith(data, f, lim, parallel)
	same("parallel", prows, perr, rows, err)
	var e *Error
	if errors.As(err, &e) && slices.ContainsFunc(e.List(), func(p Problem) bool { return p.Line == 0 }) {
		return // a problem with the whole file comes with Lines too
	} else if err != nil && e == nil {
		return
	}
	if _, nerr := NewReader(bytes.NewReader(data), f, lim); nerr != nil {
		return // the header is bad
	}
	// Reading only some of the rows that were read finds no problem: the
	// other records are skipped unparsed.
	lines := []int32{} // not nil: no row at all is wanted
	var want []Row
	for i, row := range rows {
		if i%2 == 1 {
			lines = append(lines, int32(row.Line))
			want = append(want, row)
		}
	}
	srows, serr := readAllWith(data, f, lim, func(r *Reader) { r.Lines = lines })
	same("lines", srows, serr, want, nil)
	lrows, lerr := readAllWith(data, f, lim, func(r *Reader) { parallel(r); r.Lines = lines })
	same("parallel lines", lrows, lerr, want, nil)
}
