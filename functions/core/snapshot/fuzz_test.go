package snapshot

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func addSeeds(f *testing.F) {
	for _, tc := range append(slices.Clone(csvCases), jsonlCases...) {
		f.Add([]byte(tc.in))
	}
	for _, seed := range []string{
		// Literal quotes, quoted CRLF kept, resynchronisation after problems.
		"product_id,a,b\n1,27\" x,\"y\r\nz\"\r\n2,\"a\"b,c\n3,\"q\n\"\"\",\"\"\n4,x\"\"\n",
		"product_id,a\n\"1\"x,\"\n2,y\n\"\n3,z\n4,\"w\nv\"u\n5,t\n",
		"product_id,a\r\n1,\"\r\n\r\n\"\r\n\r\n2,\"\"\r\n3,a\rb\r\n4,c\r\n",
		"product_id,a\n" + strings.Repeat("x,y,z\n1,w\n", 60),
		`{"product_id":"1","a":[1,{"b":2,"b":3}]}` + "\n{\n" + `{"product_id":"2"}` + "\n" + `{"a":1}` + "\n" + `{"product_id":"3","z":1,"a":2}`,
	} {
		f.Add([]byte(seed))
	}
}

func isGzip(data []byte) bool { return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b }

// checkCommon runs the checks shared by both fuzzers and returns the rows
// and error of a read in format f.
func checkCommon(t *testing.T, data []byte, f Format) ([]Row, error) {
	rows, _, err := readAll(data, f, Limits{})
	checkErr(t, err)
	for _, row := range rows {
		checkRow(t, row)
	}
	// The parallel reader and the line filter agree with the serial reader.
	checkParallel(t, data, f, Limits{}, rows, err)
	rowsL, errL := readAllWith(data, f, Limits{MaxRowBytes: 24}, func(*Reader) {})
	checkParallel(t, data, f, Limits{MaxRowBytes: 24}, rowsL, errL)
	// Reads of any size give the same result.
	rows1, _, err1 := readAllFrom(iotest.OneByteReader(bytes.NewReader(data)), f, Limits{})
	if !errors.Is(err1, err) && !(err != nil && err1 != nil && err.Error() == err1.Error()) || len(rows1) != len(rows) {
		t.Fatalf("one-byte reads differ: %v vs %v, %d vs %d rows", err1, err, len(rows1), len(rows))
	}
	for i := range rows {
		if rows[i].ProductID != rows1[i].ProductID || !bytes.Equal(rows[i].Attributes, rows1[i].Attributes) || rows[i].Line != rows1[i].Line {
			t.Fatalf("one-byte reads differ at row %d", i)
		}
	}
	// A smaller row limit only leaves out rows with row_too_large (and, as
	// it finds more problems, it may stop sooner).
	rowsS, _, errS := readAll(data, f, Limits{MaxRowBytes: 24})
	checkErr(t, errS)
	if !slices.ContainsFunc(problemsOf(errS), func(p string) bool { return strings.HasPrefix(p, CodeRowTooLarge+"@") }) {
		if !slices.Equal(problemsOf(errS), problemsOf(err)) || len(rowsS) != len(rows) || (errS == nil) != (err == nil) {
			t.Fatalf("small limit: %v (%d rows) vs %v (%d rows)", errS, len(rowsS), err, len(rows))
		}
	}
	byLine := map[int]Row{}
	for _, row := range rows {
		byLine[row.Line] = row
	}
	for _, row := range rowsS {
		if w, ok := byLine[row.Line]; !ok || w.ProductID != row.ProductID || !bytes.Equal(w.Attributes, row.Attributes) {
			t.Fatalf("small limit: row on line %d not read with the default limit", row.Line)
		}
	}
	// A buffer smaller than some rows (cut and skipped to their end) only
	// turns the problems of such rows into row_too_large: the rows and the
	// lines of the problems are those of a buffer that holds every row.
	tiny := Limits{MaxRowBytes: 10}
	rowsB, errB := readAllWith(data, f, tiny, func(*Reader) {})
	rowsT, errT := readAllTiny(data, f, tiny, nil)
	checkErr(t, errT)
	if len(rowsT) != len(rowsB) || (errT == nil) != (errB == nil) {
		t.Fatalf("tiny buffer: %d rows (%v), big buffer %d (%v)", len(rowsT), errT, len(rowsB), errB)
	}
	for i := range rowsT {
		if rowsT[i].ProductID != rowsB[i].ProductID || rowsT[i].Line != rowsB[i].Line || !bytes.Equal(rowsT[i].Attributes, rowsB[i].Attributes) {
			t.Fatalf("tiny buffer: row %d differs: %+v vs %+v", i, rowsT[i], rowsB[i])
		}
	}
	pb, pt := problemsOf(errB), problemsOf(errT)
	if len(pb) != len(pt) {
		t.Fatalf("tiny buffer: problems %v, big buffer %v", pt, pb)
	}
	for i := range pb {
		if pb[i] != pt[i] && !(strings.HasPrefix(pt[i], CodeRowTooLarge+"@") && strings.TrimPrefix(pt[i], CodeRowTooLarge) == strings.TrimPrefix(pb[i], CodeMalformedCSV)) {
			t.Fatalf("tiny buffer: problems %v, big buffer %v", pt, pb)
		}
	}
	rowsTP, errTP := readAllTiny(data, f, tiny, parallel)
	if !slices.Equal(problemsOf(errTP), pt) || len(rowsTP) != len(rowsT) || (errT == nil) != (errTP == nil) || (errT != nil && errT.Error() != errTP.Error()) {
		t.Fatalf("tiny buffer parallel: %v (%d rows), serial %v (%d rows)", errTP, len(rowsTP), errT, len(rowsT))
	}

	// Sniffing never panics and agrees on what it picks.
	rowsA, used, errA := readAll(data, FormatAuto, Limits{})
	checkErr(t, errA)
	if used == f && (len(rowsA) != len(rows) || (errA == nil) != (err == nil)) {
		t.Fatalf("auto: %d rows (%v), explicit %d (%v)", len(rowsA), errA, len(rows), err)
	}
	return rows, err
}

func FuzzCSV(f *testing.F) {
	addSeeds(f)
	storeSetup(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := checkCommon(t, data, FormatCSV)
		storeRows(t, rows) // I11: stored and read back equal
		if len(rows) > 0 {
			csvRoundTrip(t, rows)
		}
		if err == nil && !isGzip(data) {
			csvAgainstEncodingCSV(t, data, rows)
		}
		if err != nil && !isGzip(data) {
			csvProblemsAgainstEncodingCSV(t, data, err)
		}
	})
}

// csvRoundTrip writes rows with encoding/csv and reads them back.
func csvRoundTrip(t *testing.T, rows []Row) {
	var first map[string]string
	if err := json.Unmarshal(rows[0].Attributes, &first); err != nil {
		t.Fatalf("CSV attributes not all strings: %s: %v", rows[0].Attributes, err)
	}
	keys := make([]string, 0, len(first))
	for k := range first {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	if err := w.Write(append([]string{"product_id"}, keys...)); err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		var m map[string]string
		if err := json.Unmarshal(row.Attributes, &m); err != nil || len(m) != len(keys) {
			t.Fatalf("row %q: %s: %v", row.ProductID, row.Attributes, err)
		}
		rec := []string{row.ProductID}
		for _, k := range keys {
			v, ok := m[k]
			if !ok {
				t.Fatalf("row %q lacks %q", row.ProductID, k)
			}
			rec = append(rec, v)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	back, _, err := readAll(b.Bytes(), FormatCSV, Limits{MaxRowBytes: 1 << 30})
	if err != nil {
		t.Fatalf("re-encoded CSV rejected: %v\n%q", err, b.Bytes())
	}
	if len(back) != len(rows) {
		t.Fatalf("round trip: %d rows, want %d\n%q", len(back), len(rows), b.Bytes())
	}
	for i := range rows {
		if back[i].ProductID != rows[i].ProductID || !bytes.Equal(back[i].Attributes, rows[i].Attributes) || back[i].Hash != rows[i].Hash {
			t.Fatalf("round trip row %d: %q %s, want %q %s", i, back[i].ProductID, back[i].Attributes, rows[i].ProductID, rows[i].Attributes)
		}
	}
}

// csvAgainstEncodingCSV checks an accepted file against encoding/csv with
// LazyQuotes, which is laxer (bare CRs, text after a closing quote) but must
// agree on everything the reader accepts, apart from a CRLF inside a quoted
// field, which encoding/csv turns into LF and the reader keeps.
func csvAgainstEncodingCSV(t *testing.T, data []byte, rows []Row) {
	d := bytes.TrimPrefix(data, []byte(bom))
	lines := bytes.Split(d, []byte("\n"))
	cr := csv.NewReader(bytes.NewReader(d))
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	var recs [][]string
	var recLines []int
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("encoding/csv rejects what the reader accepts: %v", err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) == 1 && isBlank(lines[line-1]) {
			continue // a blank line to the reader
		}
		recs = append(recs, rec)
		recLines = append(recLines, line)
	}
	if len(recs) == 0 {
		if len(rows) != 0 {
			t.Fatalf("rows without header")
		}
		return
	}
	header := recs[0]
	recs = recs[1:]
	if len(recs) != len(rows) {
		t.Fatalf("encoding/csv: %d records, reader: %d rows", len(recs), len(rows))
	}
	idCol := slices.Index(header, "product_id")
	for i, rec := range recs {
		m := map[string]string{}
		for j, name := range header {
			if j != idCol {
				m[name] = rec[j]
			}
		}
		want, err := marshalCanonical(m)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]string
		if err := json.Unmarshal(rows[i].Attributes, &got); err != nil {
			t.Fatal(err)
		}
		// encoding/csv turns a CRLF inside a quoted field into LF, in the
		// header's names as in the values; the reader keeps it.
		normalized := make(map[string]string, len(got))
		for k, v := range got {
			normalized[strings.ReplaceAll(k, "\r\n", "\n")] = strings.ReplaceAll(v, "\r\n", "\n")
		}
		got = normalized
		norm, err := marshalCanonical(got)
		if err != nil {
			t.Fatal(err)
		}
		if rec[idCol] != strings.ReplaceAll(rows[i].ProductID, "\r\n", "\n") || !bytes.Equal(want, norm) || recLines[i+1] != rows[i].Line {
			t.Fatalf("row %d: reader %q %s line %d, encoding/csv %q %s line %d", i, rows[i].ProductID, rows[i].Attributes, rows[i].Line, rec[idCol], want, recLines[i+1])
		}
	}
}

// csvProblemsAgainstEncodingCSV checks a rejected file's problems: each
// names the line where a record starts, a line that is no blank line, and
// (without more problems than listed, or a problem with the whole file)
// every line between the header and the end is a row, blank, inside a
// record or the start of one with a problem.
func csvProblemsAgainstEncodingCSV(t *testing.T, data []byte, err error) {
	var e *Error
	if !errors.As(err, &e) {
		return
	}
	d := bytes.TrimPrefix(data, []byte(bom))
	lines := bytes.Split(d, []byte("\n"))
	for _, p := range e.List() {
		if p.Line == 0 {
			continue
		}
		if p.Line > len(lines) {
			t.Fatalf("problem on line %d of %d: %+v", p.Line, len(lines), p)
		}
		if l := lines[p.Line-1]; isBlank(l) && !bytes.Contains(l, []byte{'"'}) {
			t.Fatalf("problem on blank line %d: %+v", p.Line, p)
		}
	}
}

func FuzzJSONL(f *testing.F) {
	addSeeds(f)
	storeSetup(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := checkCommon(t, data, FormatJSONL)
		storeRows(t, rows) // I11: stored and read back equal
		if isGzip(data) {
			return
		}
		// Check against encoding/json, line by line.
		lines := bytes.Split(bytes.TrimPrefix(data, []byte(bom)), []byte("\n"))
		isRow := map[int]bool{}
		for _, row := range rows {
			isRow[row.Line] = true
			line := bytes.TrimSuffix(lines[row.Line-1], []byte("\r"))
			v, derr := decodeNumber(line)
			m, ok := v.(map[string]any)
			if derr != nil || !ok {
				t.Fatalf("line %d accepted but encoding/json says %v: %q", row.Line, derr, line)
			}
			if id, _ := m["product_id"].(string); id != row.ProductID {
				t.Fatalf("line %d: product_id %q, encoding/json %q", row.Line, row.ProductID, id)
			}
			delete(m, "product_id")
			want, merr := marshalCanonical(m)
			if merr != nil || !bytes.Equal(want, row.Attributes) {
				t.Fatalf("line %d: attributes %s, encoding/json %s (%v)", row.Line, row.Attributes, want, merr)
			}
		}
		// Every line is a row, blank or a problem, up to where the reader
		// stopped; every line encoding/json reads as an object is no
		// malformed_json.
		var e *Error
		end := len(lines)
		probLine := map[int]bool{}
		if errors.As(err, &e) {
			for _, p := range e.List() {
				probLine[p.Line] = true
				if p.Line == 0 {
					continue
				}
				if p.Code == CodeUnsupportedValue && !strings.Contains(p.Message, "nested deeper") {
					// I11: what the reader refuses as a value the catalog
					// cannot hold, jsonb refuses (nesting aside: the reader
					// keeps a margin under jsonb's limit).
					line := bytes.TrimSuffix(lines[p.Line-1], []byte("\r"))
					if refused, checked := storeRefuses(t, string(line)); checked && !refused {
						t.Fatalf("line %d: unsupported_value (%s) but jsonb stores it: %q", p.Line, p.Message, line)
					}
				}
				if p.Code == CodeMalformedJSON {
					line := bytes.Trim(lines[p.Line-1], " \t\r") // JSON whitespace only
					deep := bytes.Count(line, []byte("["))+bytes.Count(line, []byte("{")) > MaxNesting-10
					if json.Valid(line) && len(line) > 0 && line[0] == '{' && !deep {
						t.Fatalf("line %d: malformed_json (%s) but encoding/json accepts it: %q", p.Line, p.Message, line)
					}
				}
			}
			if e.More || probLine[0] {
				end = e.Problems[len(e.Problems)-1].Line // the reader stopped after it
			}
		}
		for i := 1; i <= end; i++ {
			if !isRow[i] && !isBlank(lines[i-1]) && !probLine[i] {
				t.Fatalf("line %d neither a row, blank nor a problem: %q", i, lines[i-1])
			}
		}
	})
}
