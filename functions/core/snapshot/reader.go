package snapshot

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/retailcatalog/catalog/functions/core/catalog"
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
// Next returns the rows of the snapshot, then io.EOF when the snapshot is
// good, or a *Error listing its problems (up to MaxProblems) when it is not.
// A problem with a row (malformed, a bad product_id, invalid UTF-8, too
// large) does not stop the reader: the row is left out and the reader goes
// on with the next one, so that one rejection lists the first problems of
// the file; it stops at problem MaxProblems+1 (MaxListedProblems+1 with
// AllProblems) and at a problem with the
// whole file (a bad header, a file over the limit, a broken gzip stream).
// Rows keep coming after a problem: a caller that looks for duplicate
// product ids among them merges those into the rejection with Merge.
//
// An error reading the underlying io.Reader (not the snapshot's fault: a
// network failure, say) is returned wrapped as is, not as *Error. Every
// error is sticky: later calls return it again. A Reader is not safe for
// concurrent use.
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
	// AllProblems, when set before the first call to Next or Scan, is given
	// every problem the reader finds, in line order (a problem with the
	// whole file last), up to MaxListedProblems: the reader then stops at
	// problem MaxListedProblems+1 instead of MaxProblems+1, and the
	// rejection Next returns still lists the first MaxProblems (More set
	// when there were more). The whole-file limits stop it at the same
	// point as without (too_many_products, file_too_large: read no
	// further). The reader keeps none of the problems past MaxProblems in
	// memory: the sink spills or streams them. An error of the sink stops
	// the reader and is returned as is (not as *Error).
	AllProblems ProblemSink
	// CountAttributes, when set before the first call to Next or Scan,
	// counts per attribute the products that have it and those whose value
	// is other than "" or null (AttributeCounts), for the attribute_dropped
	// hold. It costs an increment per attribute of a row.
	CountAttributes bool

	format Format
	src    *sourceReader
	in     io.Reader // the decompressed stream
	gz     bool

	buf    []byte
	steady int // size up to which buf grows with the input (steadyBufSize)
	maxBuf int
	r, w   int   // unconsumed input is buf[r:w]
	base   int64 // stream offset of buf[0]
	nread  int64 // decompressed bytes read from in
	rerr   error // pending error from in (io.EOF at the end), reported once buf is drained
	line   int   // 1-based physical line of buf[r]
	err    error // sticky

	// a record returned truncated (over the row limit) whose rest is being
	// skipped: the state of its split
	skipping bool
	skip     splitState

	products int64     // records counted against Limits.MaxProducts
	probs    []Problem // problems found so far (at most MaxProblems)
	unlisted bool      // a problem past MaxProblems was found
	found    int       // problems found so far (given to AllProblems)
	cut      bool      // the reader stopped at the problem past its limit
	sinkErr  error     // the error of AllProblems that stopped the reader

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
	lim   Limits
	jsonl bool // the format is JSON Lines (else CSV)

	// CSV header, read once, shared read-only by the copies
	names    []string
	idCol    int
	order    []int    // attribute columns, sorted by name
	prefixes [][]byte // `"name":` (with a leading ',' after the first) in order's order
	// plainSegs: `{"name":"` first, then `","name":"`, in order's order
	plainSegs [][]byte
	// CSV per row
	fields  [][]byte
	scratch []byte
	offs    []int
	plain   bool // the record in fields is plain (splitPlain)

	// JSON Lines
	canon canonicalizer

	out []byte // canonical attributes being built

	// CountAttributes: CSV rows counted and, per attribute column in
	// order's order, those with a non-empty cell (JSON Lines: canon's)
	countAttrs bool
	csvRows    int64
	csvValued  []int64
}

// addCounts adds the attribute counts of the rows p parsed to into.
func (p *rowParser) addCounts(into catalog.AttributeCounts) {
	if p.jsonl {
		p.canon.flushRun()
		for name, c := range p.canon.counts {
			t := into[name]
			t.Present += c.Present
			t.Valued += c.Valued
			into[name] = t
		}
		return
	}
	if p.csvRows == 0 {
		return
	}
	for k, col := range p.order {
		t := into[p.names[col]]
		t.Present += p.csvRows
		if k < len(p.csvValued) {
			t.Valued += p.csvValued[k]
		}
		into[p.names[col]] = t
	}
}

// attrNames is a set of attribute names.
type attrNames map[string]struct{}

func (n *attrNames) add(name []byte) {
	if _, ok := (*n)[string(name)]; ok {
		return
	}
	if *n == nil {
		*n = attrNames{}
	}
	(*n)[string(name)] = struct{}{}
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
	return newReader(rd, format, limits, steadyBufSize)
}

// newReader is NewReader with the buffer's steady size (tests make it tiny,
// so that rows over it are truncated and skipped).
func newReader(rd io.Reader, format Format, limits Limits, steady int) (*Reader, error) {
	if _, err := ParseFormat(string(format)); err != nil {
		return nil, err
	}
	r := &Reader{format: format, line: 1, steady: steady}
	r.lim = limits.WithDefaults()
	r.maxBuf = max(r.lim.MaxRowBytes+2, steady) // a row plus CRLF always fits
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
	r.buf = make([]byte, min(initialBufSize, r.maxBuf))

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
	r.jsonl = r.format == FormatJSONL
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
	// AttributesLen is the length of the canonical attributes, with
	// SkipAttributes too (the diff sizes its chunks with it).
	AttributesLen int
	Hash          catalog.Hash
	Line          int
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
	r.countAttrs = r.CountAttributes
	v, err := r.nextRow()
	if err != nil {
		r.err = r.end(err)
		return RowView{}, r.err
	}
	v.AttributesLen = len(v.Attributes)
	if r.SkipAttributes {
		v.Attributes = nil
	}
	return v, nil
}

// nextRow reads records up to the next good row, noting the problems of
// the others.
func (r *Reader) nextRow() (RowView, error) {
	if r.empty {
		return RowView{}, io.EOF
	}
	for {
		if r.Lines != nil && !r.skipToWanted() {
			return RowView{}, io.EOF
		}
		raw, err := r.record(!r.jsonl)
		if err != nil {
			return RowView{}, err
		}
		if r.skipped(&raw) {
			continue
		}
		if r.products++; r.products > r.lim.MaxProducts {
			return RowView{}, r.tooManyProducts(raw.line)
		}
		id, e := r.parse(raw)
		if e != nil {
			if r.problem(e) {
				return RowView{}, errStop
			}
			continue
		}
		return r.view(id, raw.line), nil
	}
}

// blank reports whether a record is a blank line (only spaces, tabs and
// CRs), which is skipped. A record over the row limit is not blank.
func (r *Reader) blank(raw *rawRecord) bool {
	return !raw.quotes && !raw.truncated && len(raw.rec) <= r.lim.MaxRowBytes && isBlank(raw.rec)
}

// skipped reports whether a record is not to be parsed: blank, or not on a
// line of Lines.
func (r *Reader) skipped(raw *rawRecord) bool {
	return r.blank(raw) || r.Lines != nil && !r.wanted(raw.line)
}

// tooManyProducts is the rejection that stops the reader at the record
// starting on line, one past Limits.MaxProducts: every non-blank record
// counts (r.products), before it is parsed.
func (r *Reader) tooManyProducts(line int) error {
	if r.lim.Delta {
		return lineErr(CodeTooManyProducts, line, "more than %d rows, the limit of a delta: the file is read no further (send a full snapshot instead)", r.lim.MaxProducts)
	}
	return lineErr(CodeTooManyProducts, line, "more than %d products, the limit: the file is read no further", r.lim.MaxProducts)
}

// parse checks and canonicalizes one record into p.out; it returns the
// product_id.
func (p *rowParser) parse(raw rawRecord) ([]byte, *Error) {
	if p.jsonl {
		return p.jsonlParse(raw)
	}
	return p.csvParse(raw)
}

// problem notes a problem with a row; it returns true when the reader
// must stop: e is problem MaxProblems+1 (MaxListedProblems+1 with
// AllProblems), or AllProblems failed.
func (r *Reader) problem(e *Error) bool {
	limit := MaxProblems
	if r.AllProblems != nil {
		limit = MaxListedProblems
	}
	if r.found >= limit {
		r.unlisted, r.cut = true, true
		return true
	}
	for _, p := range e.List() {
		r.found++
		if len(r.probs) < MaxProblems {
			r.probs = append(r.probs, p)
		} else {
			r.unlisted = true
		}
		if r.AllProblems != nil {
			if err := r.AllProblems.Add(p); err != nil {
				r.sinkErr = fmt.Errorf("snapshot: keeping problem of line %d: %w", p.Line, err)
				return true
			}
		}
	}
	return false
}

// end turns what stops the reader into what Next returns: io.EOF, or the
// rejection when problems were found (a problem with the whole file being
// the last one), or an error of the input.
func (r *Reader) end(err error) error {
	var e *Error
	switch {
	case r.sinkErr != nil:
		return r.sinkErr
	case err == errStop:
	case err == io.EOF:
		if len(r.probs) == 0 {
			return io.EOF
		}
	case errors.As(err, &e):
		if r.problem(e) && r.sinkErr != nil {
			return r.sinkErr
		}
	default:
		return err
	}
	return r.reject()
}

// ProblemsCut reports, once Next or Scan returned a rejection, whether the
// reader stopped at the problem past its limit (MaxListedProblems+1 with
// AllProblems, MaxProblems+1 without): problems exist past those it gave.
func (r *Reader) ProblemsCut() bool { return r.cut }

// errStop is what the reader stops with when it found too many problems.
var errStop = errors.New("snapshot: too many problems")

func (r *Reader) reject() *Error {
	return Reject(r.probs, r.unlisted)
}

// AttributeNames returns the names of the snapshot's attributes: the union
// over its rows of every name but product_id, sorted by bytes, each once.
// For CSV they are the header's columns; for JSON Lines, the top-level keys
// of the rows read so far (with Lines, of the rows read), complete once
// Next or Scan returned io.EOF. Collecting them costs next to nothing,
// SkipAttributes or not: rows usually repeat the previous row's keys, and
// then nothing is done.
func (r *Reader) AttributeNames() []string {
	if r.format != FormatJSONL {
		names := make([]string, 0, len(r.order))
		for _, col := range r.order {
			names = append(names, r.names[col])
		}
		return names
	}
	var all attrNames
	if r.par != nil {
		r.par.mu.Lock()
		defer r.par.mu.Unlock()
		for n := range r.par.names {
			all.add([]byte(n))
		}
	}
	for n := range r.canon.names {
		all.add([]byte(n))
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// AttributeCounts returns, with CountAttributes, per attribute name the
// products that have it (a CSV column: every product; a JSON key: those
// that give it) and those whose value is other than "" or null, over the
// rows read (complete once Next or Scan returned io.EOF; with Lines, of the
// rows read). Rows with a problem may be counted: the counts are only
// meaningful for a snapshot read without one. nil without CountAttributes.
func (r *Reader) AttributeCounts() catalog.AttributeCounts {
	if !r.CountAttributes {
		return nil
	}
	all := catalog.AttributeCounts{}
	if r.par != nil {
		r.par.mu.Lock()
		defer r.par.mu.Unlock()
		for name, c := range r.par.counts {
			all[name] = c
		}
	}
	r.rowParser.addCounts(all)
	return all
}

// wanted reports whether the record starting on line is to be read (Lines),
// and drops the lines passed.
// skipToWanted, reading Lines, moves to the start of the next wanted line
// by counting line feeds, without splitting the records before it: Lines
// come from a first pass over the same bytes, so each starts a record (a
// record spanning lines counts its line feeds like any other). It returns
// false when no wanted line is left: the rest of the input is not read.
// At the end of the input or on a read error it stops, for record to
// report it.
func (r *Reader) skipToWanted() bool {
	if r.skipping {
		return true
	}
	r.wanted(r.line) // drops the lines already passed
	if len(r.lines) == 0 {
		return false
	}
	for target := int(r.lines[0]); r.line < target; {
		i := bytes.IndexByte(r.buf[r.r:r.w], '\n')
		if i < 0 {
			r.r = r.w
			if !r.more() {
				return true
			}
			continue
		}
		r.r += i + 1
		r.line++
	}
	return true
}

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
		return NewError(CodeBadGzip, 0, msg)
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
		case r.r > 0 && len(r.buf) >= r.steady:
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
	if room := r.lim.MaxFileBytes - r.nread; int64(len(p)) > room {
		p = p[:room+1] // one byte past the limit says it is passed
	}
	for tries := 0; ; tries++ {
		n, err := r.in.Read(p)
		r.nread += int64(n)
		if lim := r.lim.MaxFileBytes; r.nread > lim {
			n -= int(r.nread - lim)
			r.nread = lim
			msg := fmt.Sprintf("file is over the limit of %d bytes (decompressed)", lim)
			if r.lim.Delta {
				msg = fmt.Sprintf("file is over the limit of a delta, %d bytes (decompressed): send a full snapshot instead", lim)
			}
			err = NewError(CodeFileTooLarge, 0, msg)
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

// rawRecord is a record as split from the input.
type rawRecord struct {
	rec    []byte // without its line terminator; aliases the read buffer
	line   int    // the line it starts on
	quotes bool   // it holds a '"' (so it may span lines)
	// truncated: rec is only the start of a record over the buffer's
	// size; the rest is skipped by the next call to record.
	truncated bool
}

// record finds the next record at r.r: up to the first LF, or for CSV
// (quoteAware) the first LF outside a quoted field. It returns the record
// without its terminator (LF or CRLF; a lone CR at the end of the input is
// dropped too) and moves past it. A record that does not fit the buffer is
// returned truncated (its buffered start), and the next call skips its
// rest. At the end of the input it returns io.EOF; on a read error, that
// error.
func (r *Reader) record(quoteAware bool) (rawRecord, error) {
	if r.skipping {
		if err := r.skipRest(quoteAware); err != nil {
			return rawRecord{}, err
		}
	}
	// The common case first: a whole line in the buffer, without quotes.
	if i := bytes.IndexByte(r.buf[r.r:r.w], '\n'); i >= 0 {
		if rec := r.buf[r.r : r.r+i]; !quoteAware || bytes.IndexByte(rec, '"') < 0 {
			r.r += i + 1
			line := r.line
			r.line++
			if n := len(rec); n > 0 && rec[n-1] == '\r' {
				rec = rec[:n-1]
			}
			return rawRecord{rec: rec, line: line}, nil
		}
	}
	var s splitState
	for {
		rec := r.buf[r.r:r.w]
		if end := s.split(rec, quoteAware); end >= 0 {
			r.r += end + 1
			return r.finish(rec[:end], s.quotes), nil
		}
		if !r.more() {
			rec = r.buf[r.r:r.w]
			switch {
			case r.rerr == nil: // the buffer is full of this one record
				raw := rawRecord{rec: rec, line: r.line, quotes: s.quotes, truncated: true}
				r.line += bytes.Count(rec[:s.scan], lfBytes)
				r.skipping, r.skip = true, s
				r.drop()
				return raw, nil
			case r.rerr != io.EOF:
				return rawRecord{}, r.rerr
			case len(rec) == 0:
				return rawRecord{}, io.EOF
			}
			r.r = r.w
			return r.finish(rec, s.quotes), nil
		}
	}
}

// drop consumes the part of a skipped record examined so far, keeping its
// last byte: the split looks one byte back.
func (r *Reader) drop() {
	r.r += r.skip.scan - 1
	r.skip.scan = 1
}

// skipRest consumes the rest of the record that record returned truncated.
func (r *Reader) skipRest(quoteAware bool) error {
	s := &r.skip
	for {
		rec := r.buf[r.r:r.w]
		from := s.scan
		if end := s.split(rec, quoteAware); end >= 0 {
			r.line += bytes.Count(rec[from:end], lfBytes) + 1
			r.r += end + 1
			r.skipping = false
			return nil
		}
		r.line += bytes.Count(rec[from:s.scan], lfBytes)
		r.drop()
		if !r.more() {
			if r.rerr != nil && r.rerr != io.EOF {
				return r.rerr
			}
			// The end of the input (or, never, a full buffer after drop).
			r.r = r.w
			r.line++
			r.skipping = false
			return nil
		}
	}
}

// splitState is the state of the search for the end of a record.
type splitState struct {
	scan   int  // bytes of the record examined
	inQ    bool // rec[scan] is inside a quoted field
	quotes bool // a '"' was seen
}

// split examines rec[s.scan:], where rec starts at the start of a record
// (or, for a record being skipped, one byte before s.scan), and returns the
// offset of the LF that ends the record, or -1 when rec ends first.
//
// For CSV (quoteAware), only a '"' at the start of a field (at the start of
// the record or right after a ',') opens a quoted field, which ends at a '"'
// not followed by another (a doubled quote stands for one); a LF inside a
// quoted field does not end the record. Any other '"' is a literal
// character. This is the parse of parseQuoted: the record ends where the
// parse of its fields would end it, also after a malformed field.
func (s *splitState) split(rec []byte, quoteAware bool) int {
	for {
		if s.inQ {
			j := bytes.IndexByte(rec[s.scan:], '"')
			if j < 0 {
				s.scan = len(rec)
				return -1
			}
			q := s.scan + j
			if q+1 == len(rec) {
				s.scan = q // is it doubled? wait for the next byte
				return -1
			}
			if rec[q+1] == '"' {
				s.scan = q + 2
				continue
			}
			s.inQ = false
			s.scan = q + 1
		}
		seg := rec[s.scan:]
		i := bytes.IndexByte(seg, '\n')
		if i >= 0 {
			seg = seg[:i]
		}
		if quoteAware {
			for off := 0; ; {
				j := bytes.IndexByte(seg[off:], '"')
				if j < 0 {
					break
				}
				s.quotes = true
				q := s.scan + off + j
				if q == 0 || rec[q-1] == ',' {
					s.inQ = true
					s.scan = q + 1
					break
				}
				off += j + 1
			}
			if s.inQ {
				continue
			}
		}
		if i >= 0 {
			end := s.scan + i
			s.scan = end
			return end
		}
		s.scan = len(rec)
		return -1
	}
}

var lfBytes = []byte{'\n'}

func (r *Reader) finish(rec []byte, quotes bool) rawRecord {
	line := r.line
	r.line++
	if quotes {
		r.line += bytes.Count(rec, lfBytes)
	}
	if n := len(rec); n > 0 && rec[n-1] == '\r' {
		rec = rec[:n-1]
	}
	return rawRecord{rec: rec, line: line, quotes: quotes}
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

// checkSize checks the size of the canonical attributes in p.out.
func (p *rowParser) checkSize(line int) *Error {
	if len(p.out) > p.lim.MaxAttributesBytes {
		return lineErr(CodeAttributesTooLarge, line, "the product's attributes are %d bytes in canonical form (JSON), over the limit of %d",
			len(p.out), p.lim.MaxAttributesBytes)
	}
	return nil
}

// view makes a RowView of a product_id and the canonical attributes in p.out.
func (p *rowParser) view(id []byte, line int) RowView {
	return RowView{ID: id, Attributes: p.out, Hash: catalog.HashAttributes(p.out), Line: line}
}
