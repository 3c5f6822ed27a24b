package catalog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/retailcatalog/catalog/functions/snapshot"
)

// IndexEntry is one product of a generation's index.
type IndexEntry struct {
	ProductID string
	Hash      snapshot.Hash
	Line      int32 // where the row starts in its snapshot; 0 when read from an index
}

// indexMagic starts every index object; the digit is the format version.
const indexMagic = "CIX1"

// IndexWriter writes a compact, sorted index of (product_id, hash): ids are
// front-coded against the previous id, so a typical entry costs a few bytes of
// id plus the 16-byte hash. Entries must be added in strictly increasing
// product_id byte order.
type IndexWriter struct {
	w      *bufio.Writer
	prev   string
	count  int64
	header bool
	tmp    [2 * binary.MaxVarintLen64]byte
}

// NewIndexWriter starts an index on w.
func NewIndexWriter(w io.Writer) *IndexWriter {
	return &IndexWriter{w: bufio.NewWriterSize(w, 256<<10)}
}

// Add appends one entry.
func (iw *IndexWriter) Add(e IndexEntry) error {
	if !iw.header {
		if _, err := iw.w.WriteString(indexMagic); err != nil {
			return fmt.Errorf("write index header: %w", err)
		}
		iw.header = true
	}
	if iw.count > 0 && e.ProductID <= iw.prev {
		return fmt.Errorf("index entry %q after %q: not strictly increasing", e.ProductID, iw.prev)
	}
	shared := commonPrefix(iw.prev, e.ProductID)
	n := binary.PutUvarint(iw.tmp[:], uint64(shared))
	n += binary.PutUvarint(iw.tmp[n:], uint64(len(e.ProductID)-shared))
	iw.w.Write(iw.tmp[:n])
	iw.w.WriteString(e.ProductID[shared:])
	if _, err := iw.w.Write(e.Hash[:]); err != nil {
		return fmt.Errorf("write index entry: %w", err)
	}
	iw.prev = e.ProductID
	iw.count++
	return nil
}

// Count is the number of entries added.
func (iw *IndexWriter) Count() int64 { return iw.count }

// Close flushes the index. An empty index is just the header.
func (iw *IndexWriter) Close() error {
	if !iw.header {
		if _, err := iw.w.WriteString(indexMagic); err != nil {
			return fmt.Errorf("write index header: %w", err)
		}
		iw.header = true
	}
	if err := iw.w.Flush(); err != nil {
		return fmt.Errorf("flush index: %w", err)
	}
	return nil
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// IndexIterator yields index entries in increasing product_id order; Next
// returns io.EOF after the last one.
type IndexIterator interface {
	Next() (IndexEntry, error)
}

// IndexReader reads an index written by IndexWriter.
type IndexReader struct {
	r     *bufio.Reader
	prev  []byte
	start bool
}

// NewIndexReader reads an index from r.
func NewIndexReader(r io.Reader) *IndexReader {
	return &IndexReader{r: bufio.NewReaderSize(r, 256<<10)}
}

// Next returns the next entry, or io.EOF.
func (ir *IndexReader) Next() (IndexEntry, error) {
	if !ir.start {
		var magic [len(indexMagic)]byte
		if _, err := io.ReadFull(ir.r, magic[:]); err != nil {
			return IndexEntry{}, fmt.Errorf("read index header: %w", noEOF(err))
		}
		if string(magic[:]) != indexMagic {
			return IndexEntry{}, fmt.Errorf("not an index (header %q)", magic[:])
		}
		ir.start = true
	}
	shared, err := binary.ReadUvarint(ir.r)
	if err == io.EOF {
		return IndexEntry{}, io.EOF
	}
	if err != nil {
		return IndexEntry{}, fmt.Errorf("read index entry: %w", noEOF(err))
	}
	suffix, err := binary.ReadUvarint(ir.r)
	if err != nil || shared > uint64(len(ir.prev)) || suffix > 1<<16 {
		return IndexEntry{}, fmt.Errorf("corrupt index entry after %q: %w", ir.prev, noEOF(err))
	}
	id := append(ir.prev[:shared:shared], make([]byte, suffix)...)
	if _, err := io.ReadFull(ir.r, id[shared:]); err != nil {
		return IndexEntry{}, fmt.Errorf("read index id: %w", noEOF(err))
	}
	var e IndexEntry
	if _, err := io.ReadFull(ir.r, e.Hash[:]); err != nil {
		return IndexEntry{}, fmt.Errorf("read index hash: %w", noEOF(err))
	}
	ir.prev = id
	e.ProductID = string(id)
	return e, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	if err == nil {
		return errors.New("bad varint")
	}
	return err
}

// SliceIterator iterates over sorted entries in memory.
type SliceIterator struct {
	Entries []IndexEntry
	pos     int
}

// Next returns the next entry, or io.EOF.
func (s *SliceIterator) Next() (IndexEntry, error) {
	if s.pos >= len(s.Entries) {
		return IndexEntry{}, io.EOF
	}
	s.pos++
	return s.Entries[s.pos-1], nil
}
