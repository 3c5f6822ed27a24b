package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingSink keeps only how many problems it was given, their lines and
// the heap's peak while it was given them.
type countingSink struct {
	n        int
	lastLine int
	ordered  bool
	peakHeap uint64
	codes    map[string]int
}

func (s *countingSink) Add(p Problem) error {
	if s.n == 0 {
		s.ordered = true
	}
	if p.Line != 0 && p.Line <= s.lastLine {
		s.ordered = false
	}
	s.lastLine = max(s.lastLine, p.Line)
	s.n++
	if s.codes == nil {
		s.codes = map[string]int{}
	}
	s.codes[p.Code]++
	if s.n%10_000 == 0 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s.peakHeap = max(s.peakHeap, m.HeapAlloc)
	}
	return nil
}

// badFile is a CSV or JSON Lines file of bad rows, each with a long
// message (a product_id over the limit, quoted in the message), one good
// row every ten.
func badFile(format Format, bad int) []byte {
	var b bytes.Buffer
	if format == FormatCSV {
		b.WriteString("product_id,a\n")
	}
	long := strings.Repeat("x", MaxProductIDBytes+1)
	for i := range bad {
		if i%10 == 0 {
			if format == FormatCSV {
				fmt.Fprintf(&b, "good-%d,v\n", i)
			} else {
				fmt.Fprintf(&b, `{"product_id":"good-%d","a":"v"}`+"\n", i)
			}
		}
		if format == FormatCSV {
			fmt.Fprintf(&b, "%s%d,v\n", long, i)
		} else {
			fmt.Fprintf(&b, `{"product_id":"%s%d","a":"v"}`+"\n", long, i)
		}
	}
	return b.Bytes()
}

// With AllProblems the reader goes on to problem 100,000 and stops at the
// next one, in line order, keeping only the first MaxProblems in memory:
// 150,000 bad rows cost a few MB of heap, not the ~30 MB their problems
// take. Not parallel: the heap measured is this test's alone.
func TestReaderAllProblems(t *testing.T) {
	for _, format := range []Format{FormatCSV, FormatJSONL} {
		data := badFile(format, 150_000)
		for name, workers := range map[string]int{"serial": 1, "parallel": 3} {
			t.Run(fmt.Sprintf("%s %s", format, name), func(t *testing.T) {
				rd, err := NewReader(bytes.NewReader(data), format, Limits{})
				require.NoError(t, err)
				defer rd.Close()
				sink := &countingSink{}
				rd.AllProblems, rd.Workers, rd.SkipAttributes = sink, workers, true
				runtime.GC()
				var before runtime.MemStats
				runtime.ReadMemStats(&before)
				rows := 0
				for {
					_, err = rd.Scan()
					if err != nil {
						break
					}
					rows++
				}
				var e *Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, MaxListedProblems, sink.n)
				require.True(t, rd.ProblemsCut())
				require.True(t, sink.ordered, "problems in line order")
				require.Len(t, e.Problems, MaxProblems)
				require.True(t, e.More)
				require.Equal(t, CodeInvalidProductID, e.Code)
				// It stopped at the 100,001st problem: the good rows before it
				// came out, none after.
				require.Equal(t, MaxListedProblems/10+1, rows) // good-0 .. good-100000
				grown := int64(sink.peakHeap) - int64(before.HeapAlloc)
				t.Logf("heap grew by %d KiB over 100,000 problems", grown>>10)
				require.Less(t, grown, int64(16<<20), "problems kept in memory")
			})
		}
	}
}

// Without AllProblems the reader stops at problem 101, as it always did.
func TestReaderStopsAt101WithoutSink(t *testing.T) {
	t.Parallel()
	rows, err := readAllWith(badFile(FormatCSV, 1000), FormatCSV, Limits{}, nil)
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Len(t, e.Problems, MaxProblems)
	require.True(t, e.More)
	require.Len(t, rows, 11) // good-0 .. good-100
}

// A whole-file limit stops the reader at the same point with AllProblems as
// without it (too_many_products: read no further), and is the last
// problem given.
func TestReaderAllProblemsStopsAtProductLimit(t *testing.T) {
	t.Parallel()
	data := badFile(FormatCSV, 1000)
	rd, err := NewReader(bytes.NewReader(data), FormatCSV, Limits{MaxProducts: 500})
	require.NoError(t, err)
	var got []Problem
	rd.AllProblems = sinkFunc(func(p Problem) error { got = append(got, p); return nil })
	for err == nil {
		_, err = rd.Next()
	}
	var e *Error
	require.ErrorAs(t, err, &e)
	require.True(t, e.More)
	last := got[len(got)-1]
	require.Equal(t, CodeTooManyProducts, last.Code)
	require.Equal(t, 502, last.Line) // header + 500 products, then the 501st
	for _, p := range got[:len(got)-1] {
		require.Less(t, p.Line, 502, "read no further than the limit")
	}
	require.Equal(t, 454, len(got)-1) // the bad rows among the first 500 records (46 good)
}

type sinkFunc func(Problem) error

func (f sinkFunc) Add(p Problem) error { return f(p) }

// An error of the sink stops the reader and comes back as is.
func TestReaderAllProblemsSinkError(t *testing.T) {
	t.Parallel()
	rd, err := NewReader(bytes.NewReader(badFile(FormatCSV, 100)), FormatCSV, Limits{})
	require.NoError(t, err)
	full := io.ErrShortWrite
	rd.AllProblems = sinkFunc(func(Problem) error { return full })
	for err == nil {
		_, err = rd.Next()
	}
	require.ErrorIs(t, err, full)
	var e *Error
	require.NotErrorAs(t, err, &e)
}

// The problems file merges the reader's problems and the duplicates in
// line order (line 0 last), cuts at MaxListedProblems and marks the cut.
func TestWriteProblemFile(t *testing.T) {
	t.Parallel()
	var spill bytes.Buffer
	enc := NewProblemEncoder(&spill)
	for _, l := range []int{2, 5, 9} {
		require.NoError(t, enc.Add(Problem{Code: CodeMalformedCSV, Line: l, Message: fmt.Sprintf("line %d: bad", l)}))
	}
	require.NoError(t, enc.Add(Problem{Code: CodeBadGzip, Message: "truncated gzip stream"}))
	require.NoError(t, enc.Flush())
	dups := []Problem{DuplicateProblem("a", 1, 3), DuplicateProblem("b", 4, 9)}
	var out bytes.Buffer
	n, err := WriteProblemFile(&out, NewProblemDecoder(&spill), dups, false)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	var lines []string
	dec := NewProblemDecoder(bytes.NewReader(out.Bytes()))
	for {
		p, err := dec.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		lines = append(lines, fmt.Sprintf("%s@%d", p.Code, p.Line))
	}
	require.Equal(t, []string{"malformed_csv@2", "duplicate_product_id@3", "malformed_csv@5", "malformed_csv@9",
		"duplicate_product_id@9", "bad_gzip@0"}, lines)
	require.NotContains(t, out.String(), TruncatedLine)

	// Over the cut: the first MaxListedProblems, then the marker.
	many := make([]Problem, MaxListedProblems+1)
	for i := range many {
		many[i] = DuplicateProblem(fmt.Sprint(i), 1, i+2)
	}
	out.Reset()
	n, err = WriteProblemFile(&out, nil, many, false)
	require.NoError(t, err)
	require.Equal(t, MaxListedProblems, n)
	require.True(t, strings.HasSuffix(out.String(), "\n"+TruncatedLine+"\n"))
	require.Equal(t, MaxListedProblems+1, bytes.Count(out.Bytes(), []byte("\n")))

	// Nothing: an empty file.
	out.Reset()
	n, err = WriteProblemFile(&out, nil, nil, false)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, out.Len())
}
