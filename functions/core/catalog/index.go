package catalog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// IndexEntry is one product of a generation's index.
type IndexEntry struct {
	ProductID string
	Hash      Hash
	Line      int32 // where the row starts in its snapshot; 0 when read from an index
}

// IndexMagic starts every index object; the digit is the format version.
// A writer of the format other than IndexWriter (the diff's sorter copying
// its front-coded runs) starts with it and appends AppendIndexEntry's
// entries.
const IndexMagic = "CIX1"

// Ref is an index entry whose ID is only valid until the next call to the
// iterator that returned it: iterators reuse their buffers, so that walking
// an index allocates nothing.
type Ref struct {
	ID   []byte
	Hash Hash
	Line int32 // where the row starts in its snapshot; 0 when read from an index
}

// RefIterator yields entries in increasing product_id order without
// allocating; NextRef returns io.EOF after the last one.
type RefIterator interface {
	NextRef() (Ref, error)
}

// IndexWriter writes a compact, sorted index of (product_id, hash): ids are
// front-coded against the previous id, so a typical entry costs a few bytes of
// id plus the 16-byte hash. Entries must be added in strictly increasing
// product_id byte order.
type IndexWriter struct {
	w      io.Writer
	buf    []byte
	prev   []byte
	count  int64
	header bool
	err    error
}

// NewIndexWriter starts an index on w.
func NewIndexWriter(w io.Writer) *IndexWriter {
	return &IndexWriter{w: w, buf: make([]byte, 0, 64<<10)}
}

// Add appends one entry.
func (iw *IndexWriter) Add(e IndexEntry) error { return iw.AddRef([]byte(e.ProductID), e.Hash) }

// AddRef appends one entry; id is copied.
func (iw *IndexWriter) AddRef(id []byte, hash Hash) error {
	if iw.err != nil {
		return iw.err
	}
	if !iw.header {
		iw.buf = append(iw.buf, IndexMagic...)
		iw.header = true
	}
	if iw.count > 0 && bytes.Compare(id, iw.prev) <= 0 {
		return fmt.Errorf("index entry %q after %q: not strictly increasing", id, iw.prev)
	}
	iw.buf = AppendIndexEntry(iw.buf, iw.prev, id, hash)
	iw.prev = append(iw.prev[:0], id...)
	iw.count++
	if len(iw.buf) >= 64<<10 {
		return iw.flush()
	}
	return nil
}

// AppendIndexEntry appends to b the front-coded index entry (id, hash)
// that follows prev: the entry format of IndexWriter.
func AppendIndexEntry(b, prev, id []byte, hash Hash) []byte {
	shared := commonPrefix(prev, id)
	b = binary.AppendUvarint(b, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(id)-shared))
	b = append(b, id[shared:]...)
	return append(b, hash[:]...)
}

func (iw *IndexWriter) flush() error {
	if len(iw.buf) == 0 {
		return nil
	}
	if _, err := iw.w.Write(iw.buf); err != nil {
		iw.err = fmt.Errorf("write index: %w", err)
		return iw.err
	}
	iw.buf = iw.buf[:0]
	return nil
}

// Count is the number of entries added.
func (iw *IndexWriter) Count() int64 { return iw.count }

// Close flushes the index. An empty index is just the header.
func (iw *IndexWriter) Close() error {
	if !iw.header {
		iw.buf = append(iw.buf, IndexMagic...)
		iw.header = true
	}
	if err := iw.flush(); err != nil {
		return fmt.Errorf("flush index: %w", err)
	}
	return nil
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+8 <= n && binary.LittleEndian.Uint64(a[i:]) == binary.LittleEndian.Uint64(b[i:]) {
		i += 8
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// IndexReader reads an index written by IndexWriter.
type IndexReader struct {
	r     io.Reader
	buf   []byte // buf[pos:end] is unread input
	pos   int
	end   int
	eof   bool
	rerr  error
	prev  []byte
	start bool
	read  int64 // entries read
}

func (ir *IndexReader) strictlyIncreasing() {}

// NewIndexReader reads an index from r.
func NewIndexReader(r io.Reader) *IndexReader {
	return &IndexReader{r: r, buf: make([]byte, 256<<10)}
}

// fill makes at least n bytes available unless the input ends first.
func (ir *IndexReader) fill(n int) {
	for ir.end-ir.pos < n && !ir.eof {
		if ir.pos > 0 {
			ir.end = copy(ir.buf, ir.buf[ir.pos:ir.end])
			ir.pos = 0
		}
		if len(ir.buf)-ir.end < n {
			nb := make([]byte, max(2*len(ir.buf), n))
			copy(nb, ir.buf[:ir.end])
			ir.buf = nb
		}
		m, err := ir.r.Read(ir.buf[ir.end:])
		ir.end += m
		if err != nil {
			ir.eof = true
			if err != io.EOF {
				ir.rerr = err
			}
		}
	}
}

// Next returns the next entry, or io.EOF.
func (ir *IndexReader) Next() (IndexEntry, error) {
	r, err := ir.NextRef()
	if err != nil {
		return IndexEntry{}, err
	}
	return IndexEntry{ProductID: string(r.ID), Hash: r.Hash}, nil
}

// NextRef returns the next entry, or io.EOF; its ID is valid until the next call.
func (ir *IndexReader) NextRef() (Ref, error) {
	if !ir.start {
		ir.fill(len(IndexMagic))
		if ir.end-ir.pos < len(IndexMagic) {
			return Ref{}, fmt.Errorf("read index header: %w", ir.noEOF(io.ErrUnexpectedEOF))
		}
		if magic := ir.buf[ir.pos : ir.pos+len(IndexMagic)]; string(magic) != IndexMagic {
			return Ref{}, fmt.Errorf("not an index (header %q)", magic)
		}
		ir.pos += len(IndexMagic)
		ir.start = true
	}
	if ir.end-ir.pos < 2*binary.MaxVarintLen64+64 {
		ir.fill(2*binary.MaxVarintLen64 + 64)
	}
	if ir.pos == ir.end {
		if ir.rerr != nil {
			return Ref{}, fmt.Errorf("read index entry: %w", ir.rerr)
		}
		return Ref{}, io.EOF
	}
	b := ir.buf[ir.pos:ir.end]
	shared, n1 := binary.Uvarint(b)
	if n1 <= 0 {
		return Ref{}, fmt.Errorf("read index entry: %w", ir.noEOF(nil))
	}
	suffix, n2 := binary.Uvarint(b[n1:])
	if n2 <= 0 || shared > uint64(len(ir.prev)) || suffix > 1<<16 {
		return Ref{}, fmt.Errorf("corrupt index entry after %q: %w", ir.prev, ir.noEOF(nil))
	}
	need := n1 + n2 + int(suffix) + len(Hash{})
	if len(b) < need {
		ir.fill(need)
		b = ir.buf[ir.pos:ir.end]
		if len(b) < need {
			return Ref{}, fmt.Errorf("read index entry after %q: %w", ir.prev, ir.noEOF(io.ErrUnexpectedEOF))
		}
	}
	p := n1 + n2
	// Strictly increasing: the ids share prev[:shared], so the new one
	// is greater exactly when its suffix is greater than the rest of prev.
	if ir.read > 0 && bytes.Compare(b[p:p+int(suffix)], ir.prev[shared:]) <= 0 {
		return Ref{}, fmt.Errorf("index out of order: %q after %q", append(ir.prev[:shared:shared], b[p:p+int(suffix)]...), ir.prev)
	}
	ir.read++
	ir.prev = append(ir.prev[:shared], b[p:p+int(suffix)]...)
	p += int(suffix)
	var r Ref
	copy(r.Hash[:], b[p:p+len(r.Hash)])
	ir.pos += need
	r.ID = ir.prev
	return r, nil
}

func (ir *IndexReader) noEOF(err error) error {
	if ir.rerr != nil {
		return ir.rerr
	}
	if err == nil {
		if ir.eof {
			return io.ErrUnexpectedEOF
		}
		return errors.New("bad varint")
	}
	return err
}

// SliceIterator iterates over sorted entries in memory.
type SliceIterator struct {
	Entries []IndexEntry
	pos     int
	buf     []byte
}

// NextRef returns the next entry, or io.EOF.
func (s *SliceIterator) NextRef() (Ref, error) {
	if s.pos >= len(s.Entries) {
		return Ref{}, io.EOF
	}
	s.pos++
	e := s.Entries[s.pos-1]
	s.buf = append(s.buf[:0], e.ProductID...)
	return Ref{ID: s.buf, Hash: e.Hash, Line: e.Line}, nil
}

// Next returns the next entry, or io.EOF.
func (s *SliceIterator) Next() (IndexEntry, error) {
	if s.pos >= len(s.Entries) {
		return IndexEntry{}, io.EOF
	}
	s.pos++
	return s.Entries[s.pos-1], nil
}
