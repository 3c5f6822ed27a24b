package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A rejection lists the first MaxProblems problems, and says when there
// are more; the reader stops at the first problem it cannot list.
func TestMaxProblems(t *testing.T) {
	for _, tc := range []struct {
		bad      int
		wantMore bool
	}{{1, false}, {MaxProblems - 1, false}, {MaxProblems, false}, {MaxProblems + 1, true}, {3 * MaxProblems, true}} {
		for _, format := range []Format{FormatCSV, FormatJSONL} {
			t.Run(fmt.Sprintf("%d %s", tc.bad, format), func(t *testing.T) {
				var b strings.Builder
				if format == FormatCSV {
					b.WriteString("product_id,a\n")
				}
				line := map[Format]int{FormatCSV: 1, FormatJSONL: 0}[format]
				var badLines []string
				row := func(id string, good bool) {
					line++
					switch {
					case format == FormatCSV && good:
						fmt.Fprintf(&b, "%s,x\n", id)
					case format == FormatCSV:
						fmt.Fprintf(&b, "%s,x,y\n", id)
					case good:
						fmt.Fprintf(&b, `{"product_id":%q}`+"\n", id)
					default:
						fmt.Fprintf(&b, `{"product_id":%q,}`+"\n", id)
					}
					if !good {
						badLines = append(badLines, fmt.Sprint(line))
					}
				}
				for i := range tc.bad {
					row(fmt.Sprintf("good-%d", i), true)
					row(fmt.Sprintf("bad-%d", i), false)
				}
				row("last", true)
				data := []byte(b.String())
				for name, set := range map[string]func(*Reader){"serial": func(*Reader) {}, "parallel": parallel} {
					rows, err := readAllWith(data, format, Limits{}, set)
					var e *Error
					require.ErrorAs(t, err, &e, name)
					listed := min(tc.bad, MaxProblems)
					require.Len(t, e.Problems, listed, name)
					require.Equal(t, tc.wantMore, e.More, name)
					for i, p := range e.Problems {
						require.Equal(t, badLines[i], fmt.Sprint(p.Line), name)
					}
					if tc.wantMore {
						// Stopped at problem MaxProblems+1: every row before it was read.
						require.Len(t, rows, MaxProblems+1, name)
						require.Contains(t, err.Error(), "more not listed")
					} else {
						require.Len(t, rows, tc.bad+1, name)
					}
				}
			})
		}
	}
}

func TestReject(t *testing.T) {
	require.Nil(t, Reject(nil, false))
	require.Nil(t, Merge(nil))

	e := Reject([]Problem{
		{CodeFileTooLarge, 0, "file is over the limit"},
		{CodeMalformedCSV, 7, "line 7: x"},
		{CodeInvalidUTF8, 3, "line 3: y"},
	}, false)
	require.Equal(t, CodeInvalidUTF8, e.Code)
	require.Equal(t, 3, e.Line)
	require.Equal(t, "line 3: y", e.Message)
	require.Equal(t, []string{"invalid_utf8@3", "malformed_csv@7", "file_too_large@0"}, problemsOf(e))
	require.Equal(t, "snapshot invalid_utf8: line 3: y (and 2 more problems)", e.Error())

	// An Error built by hand has one problem.
	hand := &Error{Code: "upload_missing", Message: "gone"}
	require.Equal(t, []Problem{{Code: "upload_missing", Message: "gone"}}, hand.List())

	// Cut to MaxProblems.
	var many []Problem
	for i := range MaxProblems + 5 {
		many = append(many, Problem{CodeMalformedCSV, MaxProblems + 5 - i, "m"})
	}
	e = Reject(many, false)
	require.Len(t, e.Problems, MaxProblems)
	require.True(t, e.More)
	require.Equal(t, 1, e.Line)
	require.Equal(t, MaxProblems, e.Problems[MaxProblems-1].Line)
}

// The duplicates the caller finds merge into the reader's rejection in
// line order.
func TestMergeDuplicates(t *testing.T) {
	in := "product_id,a\na,1\nb,2,3\na,4\nc\nb,5\n"
	rows, _, err := readAll([]byte(in), FormatCSV, Limits{})
	require.Len(t, rows, 3)
	var e *Error
	require.ErrorAs(t, err, &e)
	seen := map[string]int{}
	var dups []Problem
	for _, row := range rows {
		if first, ok := seen[row.ProductID]; ok {
			dups = append(dups, DuplicateProblem(row.ProductID, first, row.Line))
		}
		seen[row.ProductID] = row.Line
	}
	m := Merge(e, dups...)
	require.Equal(t, []string{"malformed_csv@3", "duplicate_product_id@4", "malformed_csv@5"}, problemsOf(m))
	require.Equal(t, `line 4: duplicate product_id "a", first on line 2`, m.Problems[1].Message)
	require.Equal(t, CodeMalformedCSV, m.Code)
	require.Len(t, e.Problems, 2, "Merge leaves its argument alone")

	// Duplicates alone.
	m = Merge(nil, dups...)
	require.Equal(t, CodeDuplicateProductID, m.Code)
	require.Equal(t, 4, m.Line)
	require.Equal(t, m.Problems[0].Message, m.Message)

	// A full list stays the first MaxProblems, More kept.
	var full []Problem
	for i := range MaxProblems {
		full = append(full, Problem{CodeMalformedCSV, 10 + i, "m"})
	}
	m = Merge(Reject(full, true), DuplicateProblem("x", 1, 5), DuplicateProblem("y", 2, 1000))
	require.Len(t, m.Problems, MaxProblems)
	require.True(t, m.More)
	require.Equal(t, 5, m.Line)
	require.Equal(t, CodeDuplicateProductID, m.Code)
}

func TestAttributeNames(t *testing.T) {
	jsonl := strings.Join([]string{
		`{"product_id":"1","b":1,"a":{"nested":1}}`,
		`{"product_id":"2","b":1,"a":2}`,
		`{"a":2,"b":1,"product_id":"3"}`,
		`{"product_id":"4"}`,
		`{"product_id":"5","z":null}`,
		``,
		`{"product_id":"6","é":1,"b":2,"a":3,"":4}`,
		`{"product_id":"7","é":1,"b":2,"a":3,"":4}`,
	}, "\n")
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"title,product_id,brand,B,\n1,2,3,4,5\n", []string{"", "B", "brand", "title"}},
		{"product_id\n1\n", []string{}},
		{"", []string{}},
		{jsonl, []string{"", "a", "b", "z", "é"}},
		{`{"product_id":"1"}`, []string{}},
	} {
		for name, set := range map[string]func(*Reader){
			"serial":         func(*Reader) {},
			"parallel":       parallel,
			"skip":           func(r *Reader) { r.SkipAttributes = true },
			"parallel skip":  func(r *Reader) { parallel(r); r.SkipAttributes = true },
			"parallel batch": func(r *Reader) { r.Workers = 2 },
		} {
			r, err := NewReader(strings.NewReader(tc.in), FormatAuto, Limits{})
			require.NoError(t, err)
			set(r)
			for {
				_, err := r.Scan()
				if err == io.EOF {
					break
				}
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, r.AttributeNames(), "%s: %q", name, tc.in)
		}
	}
}

// BenchmarkReadJSONLShuffledKeys reads JSON Lines whose rows
// come with their keys in a different order each: the worst case for
// AttributeNames (with one order, it costs nothing).
func BenchmarkReadJSONLShuffledKeys(b *testing.B) {
	var buf bytes.Buffer
	for i, line := range bytes.Split(bytes.TrimSpace(genJSONL(benchRows)), []byte("\n")) {
		// Rotate the keys: a different order on every row of a cycle of 5.
		fields := bytes.Split(bytes.Trim(line, "{}"), []byte(`,"`))
		k := i % 5
		rot := append(fields[k:], fields[:k]...)
		buf.WriteByte('{')
		for j, f := range rot {
			if j > 0 {
				buf.WriteByte(',')
			}
			if f[0] != '"' {
				buf.WriteByte('"')
			}
			buf.Write(f)
		}
		buf.WriteString("}\n")
	}
	benchRead(b, buf.Bytes())
}
