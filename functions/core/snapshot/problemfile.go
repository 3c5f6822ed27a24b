package snapshot

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// MaxListedProblems is the most problems a generation's problems file lists
// (DESIGN 13, "Every problem"): the reader stops at the one after it (with
// Reader.AllProblems), and the file then ends with a truncated marker.
const MaxListedProblems = 100_000

// ProblemSink receives problems one at a time, in the order the reader
// finds them (line order, a problem with the whole file last). Each
// message is already bounded (MaxMessageBytes). An error stops the reader.
type ProblemSink interface {
	Add(p Problem) error
}

// maxProblemLine bounds one encoded problem: a message of MaxMessageBytes
// (JSON-encoded), a code and a line, with room to spare.
const maxProblemLine = 4 << 10

// ProblemEncoder writes problems as JSON Lines, one {"code","line","message"}
// object a line: a ProblemSink over an io.Writer (a spill file). Flush
// before reading what it wrote.
type ProblemEncoder struct {
	w *bufio.Writer
	n int
}

// NewProblemEncoder returns a ProblemEncoder writing to w.
func NewProblemEncoder(w io.Writer) *ProblemEncoder {
	return &ProblemEncoder{w: bufio.NewWriterSize(w, 64<<10)}
}

// Add writes one problem.
func (e *ProblemEncoder) Add(p Problem) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode problem: %w", err)
	}
	b = append(b, '\n')
	if _, err := e.w.Write(b); err != nil {
		return fmt.Errorf("write problem: %w", err)
	}
	e.n++
	return nil
}

// Len is how many problems were written.
func (e *ProblemEncoder) Len() int { return e.n }

// Flush writes out what is buffered.
func (e *ProblemEncoder) Flush() error { return e.w.Flush() }

// ProblemDecoder reads back what a ProblemEncoder wrote.
type ProblemDecoder struct {
	s *bufio.Scanner
}

// NewProblemDecoder returns a ProblemDecoder reading r.
func NewProblemDecoder(r io.Reader) *ProblemDecoder {
	s := bufio.NewScanner(r)
	s.Buffer(make([]byte, 0, maxProblemLine), maxProblemLine)
	return &ProblemDecoder{s: s}
}

// Next returns the next problem, io.EOF after the last.
func (d *ProblemDecoder) Next() (Problem, error) {
	if !d.s.Scan() {
		if err := d.s.Err(); err != nil {
			return Problem{}, fmt.Errorf("read problems: %w", err)
		}
		return Problem{}, io.EOF
	}
	var p Problem
	if err := json.Unmarshal(d.s.Bytes(), &p); err != nil {
		return Problem{}, fmt.Errorf("decode problem: %w", err)
	}
	return p, nil
}

// TruncatedLine is the last line of a problems file that lists
// MaxListedProblems problems when the file had more.
const TruncatedLine = `{"truncated":true}`

// WriteProblemFile writes the problems file of a generation to w: the
// problems of found (what Reader.AllProblems was given, in line order, at
// most MaxListedProblems) and dups (the duplicate product_ids the caller
// found after the read, DuplicateProblem, by line) merged in line order
// (problems with the whole file, line 0, last; on one line the reader's
// first), cut to MaxListedProblems, each a JSON line
// {"code","line","message"}; then TruncatedLine when more problems exist
// than written: more says the reader or the caller found more than they
// gave. It returns how many problems it wrote. found may be nil.
func WriteProblemFile(w io.Writer, found *ProblemDecoder, dups []Problem, more bool) (int, error) {
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := &ProblemEncoder{w: bw}
	next := func() (Problem, bool, error) {
		if found == nil {
			return Problem{}, false, nil
		}
		p, err := found.Next()
		if errors.Is(err, io.EOF) {
			found = nil
			return Problem{}, false, nil
		}
		return p, err == nil, err
	}
	cur, have, err := next()
	if err != nil {
		return 0, err
	}
	order := func(a, b Problem) int { return cmp.Compare(uint(a.Line-1), uint(b.Line-1)) }
	for have || len(dups) > 0 {
		if enc.n == MaxListedProblems {
			more = true
			break
		}
		var p Problem
		if have && (len(dups) == 0 || order(cur, dups[0]) <= 0) {
			p = cur
			if cur, have, err = next(); err != nil {
				return enc.n, err
			}
		} else {
			p, dups = dups[0], dups[1:]
			p.Message = boundMessage(p.Message)
		}
		if err := enc.Add(p); err != nil {
			return enc.n, err
		}
	}
	if more {
		if _, err := bw.WriteString(TruncatedLine + "\n"); err != nil {
			return enc.n, fmt.Errorf("write problems: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return enc.n, fmt.Errorf("write problems: %w", err)
	}
	return enc.n, nil
}
