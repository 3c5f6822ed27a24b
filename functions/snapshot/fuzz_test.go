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
	// A smaller row limit only cuts the file short with row_too_large.
	rowsS, _, errS := readAll(data, f, Limits{MaxRowBytes: 24})
	checkErr(t, errS)
	var e *Error
	if len(rowsS) > len(rows) {
		t.Fatalf("small limit: more rows")
	}
	if !(errors.As(errS, &e) && e.Code == CodeRowTooLarge) {
		if len(rowsS) != len(rows) || (errS == nil) != (err == nil) || (err != nil && err.Error() != errS.Error()) {
			t.Fatalf("small limit: %v (%d rows) vs %v (%d rows)", errS, len(rowsS), err, len(rows))
		}
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
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := checkCommon(t, data, FormatCSV)
		if len(rows) > 0 {
			csvRoundTrip(t, rows)
		}
		if err == nil && !isGzip(data) {
			csvAgainstEncodingCSV(t, data, rows)
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

// csvAgainstEncodingCSV checks an accepted file against encoding/csv, which
// is laxer (bare CRs) but must agree on everything the reader accepts.
func csvAgainstEncodingCSV(t *testing.T, data []byte, rows []Row) {
	d := bytes.TrimPrefix(data, []byte(bom))
	lines := bytes.Split(d, []byte("\n"))
	cr := csv.NewReader(bytes.NewReader(d))
	cr.FieldsPerRecord = -1
	var recs [][]string
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
		for i, v := range rec {
			for strings.Contains(v, "\r\n") {
				v = strings.ReplaceAll(v, "\r\n", "\n")
			}
			rec[i] = v
		}
		recs = append(recs, rec)
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
		if rec[idCol] != rows[i].ProductID || !bytes.Equal(want, rows[i].Attributes) {
			t.Fatalf("row %d: reader %q %s, encoding/csv %q %s", i, rows[i].ProductID, rows[i].Attributes, rec[idCol], want)
		}
	}
}

func FuzzJSONL(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := checkCommon(t, data, FormatJSONL)
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
		end := len(lines) // lines before end are rows or blank
		var e *Error
		if errors.As(err, &e) {
			end = e.Line - 1
			if e.Code == CodeMalformedJSON {
				line := bytes.Trim(lines[e.Line-1], " \t\r") // JSON whitespace only
				deep := bytes.Count(line, []byte("["))+bytes.Count(line, []byte("{")) > maxNesting-10
				if json.Valid(line) && len(line) > 0 && line[0] == '{' && !deep {
					t.Fatalf("line %d: malformed_json (%s) but encoding/json accepts it: %q", e.Line, e.Message, line)
				}
			}
		}
		for i := 1; i <= end; i++ {
			if !isRow[i] && !isBlank(lines[i-1]) {
				t.Fatalf("line %d neither a row nor blank: %q", i, lines[i-1])
			}
		}
	})
}
