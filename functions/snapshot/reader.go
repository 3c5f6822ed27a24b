package snapshot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

const (
	// The read buffer starts small (small files stay cheap) and doubles up
	// to steadyBufSize as the input goes on; it grows further only to hold a
	// single row longer than that, up to the row limit.
	initialBufSize = 4 << 10
	steadyBufSize  = 64 << 10
	// gzipBufSize is the buffer between the raw input and the inflater.
	gzipBufSize = 32 << 10
)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Reader streams rows from a snapshot file. It holds at most one row (and a
// read buffer) in memory, never the file.
//
// Next returns io.EOF after the last row and a *Error for bad input; an error
// reading the underlying io.Reader (not the snapshot's fault: a network
// failure, say) is returned wrapped as is, not as *Error. Every error is
// sticky: later calls return it again. A Reader is not safe for concurrent
// use.
type Reader struct {
	// ReuseAttributes, when set, lets Next return Row.Attributes in a buffer
	// that the following call to Next overwrites, saving an allocation per
	// row for callers that only need the hash (or copy the attributes they
	// keep). Off by default: each Row owns its Attributes.
	ReuseAttributes bool

	// Workers, when above 1 and set before the first call to Next or Scan,
	// parses rows on that many goroutines while one more reads and splits
	// the input (see parallel.go). Rows, errors and their order are exactly
	// those of the serial reader. Call Close when stopping before io.EOF or
	// an error.
	Workers int
	// Lines, when set before the first call to Next or Scan, restricts the
	// reader to the rows that start on these lines (ascending): every other
	// record is skipped without being parsed or checked. For a second pass
	// over a file already read whole.
	Lines []int32
	// SkipAttributes, when set, makes Next and Scan return rows without
	// Attributes (the hash is still computed), for callers that keep only
	// ids and hashes.
	SkipAttributes bool

	format Format
	src    *sourceReader
	in     io.Reader // the decompressed stream
	gz     bool

	buf    []byte
	maxBuf int
	r, w   int   // unconsumed input is buf[r:w]
	base   int64 // stream offset of buf[0]
	nread  int64 // decompressed bytes read from in
	rerr   error // pending error from in (io.EOF at the end), reported once buf is drained
	line   int   // 1-based physical line of buf[r]
	err    error // sticky

	// CSV
	empty bool // no header: the file is empty or blank

	rowParser // the serial path's; each parallel worker has its own copy

	lines []int32 // Lines not yet reached
	par   *pipeline
	// batch sizes of the parallel reader; tests make them tiny
	batchBytes, batchRecords int
}

// rowParser turns one record into a row: the per-row state of CSV and JSON
// Lines parsing, apart from reading and splitting the input.
type rowParser struct {
	lim Limits

	// CSV header, read once, shared read-only by the copies
	names    []string
	idCol    int
	order    []int    // attribute columns, sorted by name
	prefixes [][]byte // `"name":` (with a leading ',' after the first) in order's order
	// CSV per row
	fields  [][]byte
	scratch []byte
	offs    []int

	// JSON Lines
	canon canonicalizer

	out []byte // canonical attributes being built
}

// sourceReader remembers the first error of the underlying reader so that an
// I/O failure under gzip is not mistaken for a corrupt gzip stream.
type sourceReader struct {
	r   io.Reader
	err error
}

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

// NewReader returns a Reader for the snapshot file in rd. It unwraps gzip
// when the data starts with the gzip magic bytes 1f 8b (whatever the file is
// called), skips a UTF-8 BOM, sniffs the format when format is FormatAuto
// and, for CSV, reads and checks the header. Errors about the file are
// *Error; an unknown format or a failure of rd is a plain error.
//
// A file that is empty, or holds only a BOM and blank lines, is valid: it has
// no rows.
func NewReader(rd io.Reader, format Format, limits Limits) (*Reader, error) {
	if _, err := ParseFormat(string(format)); err != nil {
		return nil, err
	}
	r := &Reader{format: format, line: 1}
	r.lim = limits.withDefaults()
	r.maxBuf = max(r.lim.MaxRowBytes+2, steadyBufSize) // a row plus CRLF always fits
	r.src = &sourceReader{r: rd}
	var head [2]byte
	n, err := io.ReadFull(r.src, head[:])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, r.readErr(err)
	}
	r.in = io.MultiReader(bytes.NewReader(head[:n]), r.src)
	if n == 2 && head[0] == 0x1f && head[1] == 0x8b {
		r.gz = true
		zr, err := gzip.NewReader(bufio.NewReaderSize(r.in, gzipBufSize))
		if err != nil {
			return nil, r.readErr(err)
		}
		r.in = zr
	}
	r.buf = make([]byte, initialBufSize)

	// Skip a BOM.
	for r.w-r.r < len(utf8BOM) && r.more() {
	}
	if bytes.HasPrefix(r.buf[r.r:r.w], utf8BOM) {
		r.r += len(utf8BOM)
	}
	if r.format == FormatAuto {
		f, err := r.sniff()
		if err != nil {
			return nil, err
		}
		r.format = f
	}
	if r.format == FormatCSV {
		if err := r.readHeader(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Format returns the format in use (after sniffing).
func (r *Reader) Format() Format { return r.format }

// BytesRead returns the decompressed bytes consumed so far: the input up to
// the end of the last row returned (or header read), BOM included.
// With Workers, it is the input split so far (ahead of the rows returned).
func (r *Reader) BytesRead() int64 {
	if r.par != nil {
		return r.par.bytes.Load()
	}
	return r.base + int64(r.r)
}

// Next returns the next row, io.EOF after the last one.
func (r *Reader) Next() (Row, error) {
	if r.err != nil {
		return Row{}, r.err
	}
	if r.par != nil || r.Workers > 1 {
		v, err := r.scanParallel()
		if err != nil {
			return Row{}, err
		}
		row := Row{ProductID: string(v.ID), Hash: v.Hash, Line: v.Line}
		if !r.SkipAttributes {
			row.Attributes = v.Attributes
			if !r.ReuseAttributes {
				row.Attributes = append([]byte(nil), v.Attributes...)
			}
		}
		return row, nil
	}
	v, err := r.scanSerial()
	if err != nil {
		return Row{}, err
	}
	row := Row{ProductID: string(v.ID), Hash: v.Hash, Line: v.Line}
	if !r.SkipAttributes {
		row.Attributes = v.Attributes[:len(v.Attributes):len(v.Attributes)]
		if !r.ReuseAttributes {
			row.Attributes = append([]byte(nil), v.Attributes...)
		}
	}
	return row, nil
}

// RowView is a row whose ID and Attributes are only valid until the next
// call to Scan: they alias the reader's buffers.
type RowView struct {
	ID         []byte
	Attributes []byte // nil with SkipAttributes
	Hash       Hash
	Line       int
}

// Scan is Next without the allocations: the row's ID and Attributes alias
// the reader's buffers until the next call.
func (r *Reader) Scan() (RowView, error) {
	if r.err != nil {
		return RowView{}, r.err
	}
	if r.par != nil || r.Workers > 1 {
		return r.scanParallel()
	}
	return r.scanSerial()
}

func (r *Reader) scanSerial() (RowView, error) {
	var v RowView
	var err error
	if r.format == FormatJSONL {
		v, err = r.nextJSONL()
	} else {
		v, err = r.nextCSV()
	}
	if err != nil {
		r.err = err
		return RowView{}, err
	}
	if r.SkipAttributes {
		v.Attributes = nil
	}
	return v, nil
}

// wanted reports whether the record starting on line is to be read (Lines),
// and drops the lines passed.
func (r *Reader) wanted(line int) bool {
	if r.Lines == nil {
		return true
	}
	if r.lines == nil {
		r.lines = r.Lines
		if len(r.lines) == 0 {
			r.lines = []int32{}
		}
	}
	for len(r.lines) > 0 && int(r.lines[0]) < line {
		r.lines = r.lines[1:]
	}
	return len(r.lines) > 0 && int(r.lines[0]) == line
}

// Close stops the goroutines of a parallel reader (see Workers); later calls
// to Next return an error. It is a no-op for a serial reader.
func (r *Reader) Close() error {
	if r.par != nil {
		r.par.close()
		if r.err == nil {
			r.err = errClosed
		}
	}
	return nil
}

var errClosed = errors.New("snapshot: reader closed")

// readErr turns an error of r.in into what Next reports.
func (r *Reader) readErr(err error) error {
	var e *Error
	switch {
	case err == io.EOF:
		return io.EOF
	case errors.As(err, &e):
		return e
	case r.src.err != nil:
		return fmt.Errorf("snapshot: reading input: %w", r.src.err)
	case r.gz:
		msg := "corrupt gzip stream: " + err.Error()
		if err == io.ErrUnexpectedEOF {
			msg = "truncated gzip stream (unexpected end of data)"
		}
		return &Error{Code: CodeBadGzip, Message: msg}
	default:
		return fmt.Errorf("snapshot: reading input: %w", err)
	}
}

// more reads more input into buf, keeping buf[r:w] (r may move: callers keep
// offsets relative to r). It returns false when nothing more can be had:
// at the end of the input or after a read error (r.rerr is set), or when
// buf[r:w] fills a buffer of the maximum size (r.rerr is nil).
func (r *Reader) more() bool {
	if r.rerr != nil {
		return false
	}
	if r.w == len(r.buf) {
		dst := r.buf
		switch {
		case r.r > 0 && len(r.buf) >= steadyBufSize:
		case len(r.buf) < r.maxBuf:
			dst = make([]byte, min(2*len(r.buf), r.maxBuf))
		case r.r == 0:
			return false // full of one row
		}
		n := copy(dst, r.buf[r.r:r.w])
		r.buf = dst
		r.base += int64(r.r)
		r.r, r.w = 0, n
	}
	p := r.buf[r.w:]
	if lim := r.lim.MaxFileBytes; lim > 0 && int64(len(p)) > lim-r.nread+1 {
		p = p[:lim-r.nread+1]
	}
	for tries := 0; ; tries++ {
		n, err := r.in.Read(p)
		r.nread += int64(n)
		if lim := r.lim.MaxFileBytes; lim > 0 && r.nread > lim {
			n -= int(r.nread - lim)
			r.nread = lim
			err = &Error{Code: CodeFileTooLarge, Message: fmt.Sprintf("file is over the limit of %d bytes (decompressed)", lim)}
		}
		r.w += n
		if err != nil {
			r.rerr = r.readErr(err)
			return n > 0
		}
		if n > 0 {
			return true
		}
		if tries >= 100 {
			r.rerr = fmt.Errorf("snapshot: reading input: %w", io.ErrNoProgress)
			return false
		}
	}
}

// sniff consumes leading blank lines and picks the format from the first
// non-blank byte: '{' is JSON Lines, anything else (or nothing) CSV.
func (r *Reader) sniff() (Format, error) {
	for {
		for i := r.r; i < r.w; i++ {
			switch r.buf[i] {
			case ' ', '\t', '\r':
			case '\n':
				r.r = i + 1
				r.line++
			case '{':
				return FormatJSONL, nil
			default:
				return FormatCSV, nil
			}
		}
		if !r.more() {
			if r.rerr != nil && r.rerr != io.EOF {
				return "", r.rerr
			}
			// Empty or blank (or a blank line too long to buffer, which the
			// CSV reader rejects as too large).
			return FormatCSV, nil
		}
	}
}

// record finds the next record at r.r: up to the first LF, or for CSV
// (quoteAware) the first LF outside double quotes. It returns the record
// without its terminator (LF or CRLF; a lone CR at the end of the input is
// dropped too), the line it starts on and whether it holds a '"', and moves
// past it. When the record does not fit the buffer, it returns the buffered
// prefix with truncated set and consumes nothing. At the end of the input it
// returns io.EOF; on a read error, that error.
func (r *Reader) record(quoteAware bool) (rec []byte, line int, quotes, truncated bool, err error) {
	scan := 0 // bytes of buf[r:] searched already
	odd := false
	for {
		seg := r.buf[r.r+scan : r.w]
		i := bytes.IndexByte(seg, '\n')
		if i >= 0 {
			seg = seg[:i]
		}
		if quoteAware {
			if n := bytes.Count(seg, quoteBytes); n > 0 {
				quotes = true
				if n&1 == 1 {
					odd = !odd
				}
			}
		}
		if i >= 0 && !odd {
			end := r.r + scan + i
			rec = r.buf[r.r:end]
			r.r = end + 1
			return r.finish(rec, quotes)
		}
		if i >= 0 {
			scan += i + 1
			continue
		}
		scan = r.w - r.r
		if !r.more() {
			switch {
			case r.rerr == nil: // buffer full
				return r.buf[r.r:r.w], r.line, quotes, true, nil
			case r.rerr != io.EOF:
				return nil, 0, false, false, r.rerr
			case r.r == r.w:
				return nil, 0, false, false, io.EOF
			}
			rec = r.buf[r.r:r.w]
			r.r = r.w
			return r.finish(rec, quotes)
		}
	}
}

var (
	quoteBytes = []byte{'"'}
	lfBytes    = []byte{'\n'}
)

func (r *Reader) finish(rec []byte, quotes bool) ([]byte, int, bool, bool, error) {
	line := r.line
	r.line++
	if quotes {
		r.line += bytes.Count(rec, lfBytes)
	}
	if n := len(rec); n > 0 && rec[n-1] == '\r' {
		rec = rec[:n-1]
	}
	return rec, line, quotes, false, nil
}

// isBlank reports whether a line holds only spaces, tabs and CRs.
func isBlank(line []byte) bool {
	for _, b := range line {
		if b != ' ' && b != '\t' && b != '\r' {
			return false
		}
	}
	return true
}

func (p *rowParser) tooLarge(line int) *Error {
	return lineErr(CodeRowTooLarge, line, "row is longer than the limit of %d bytes", p.lim.MaxRowBytes)
}

// view makes a RowView of a product_id and the canonical attributes in p.out.
func (p *rowParser) view(id []byte, line int) RowView {
	return RowView{ID: id, Attributes: p.out, Hash: HashAttributes(p.out), Line: line}
}
