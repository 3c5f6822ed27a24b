package catalog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"slices"

	"github.com/retailcatalog/catalog/functions/snapshot"
)

// Sorter collects a snapshot's (product_id, hash, line) entries in file
// order and yields them sorted by product_id, in little memory: entries are
// gathered in small batches, each sorted (unless it already is) in the
// background and front-coded into a compact run, with the run before it when
// they follow each other (sorted input ends as one run); Iter merges the
// runs. A typical entry costs its id's new suffix plus ~20 bytes, whatever the
// row width.
type Sorter struct {
	pend    *pending
	spare   chan *pending
	flushes chan *pending
	done    chan struct{}
	runs    []*run
	count   int64
	dup     *dupe // smallest duplicate found while encoding runs
	final   bool
	checked bool // dup holds the answer for every run
	err     error
	batch   int // entries sorted at once
}

// pendingEntries is the size of a batch of entries sorted at once.
const pendingEntries = 1 << 16

type pendEntry struct {
	hash snapshot.Hash
	off  uint32
	n    uint16
	line int32
}

type pending struct {
	arena   []byte
	ents    []pendEntry
	inOrder bool // ids strictly increasing in file order
}

// run is a sorted run: front-coded entries (shared, suffix length, suffix,
// hash, line) in blocks.
type run struct {
	blocks [][]byte
	count  int
	first  []byte
	last   []byte
	lastLn int32
}

type dupe struct {
	id          []byte
	first, next int32
}

const runBlock = 1 << 20

// NewSorter starts an empty sorter.
func NewSorter() *Sorter { return newSorter(pendingEntries) }

func newSorter(batch int) *Sorter {
	s := &Sorter{spare: make(chan *pending, 3), flushes: make(chan *pending, 1), done: make(chan struct{}), batch: batch}
	for i := 0; i < 2; i++ {
		s.spare <- &pending{ents: make([]pendEntry, 0, batch), inOrder: true}
	}
	s.pend = &pending{ents: make([]pendEntry, 0, batch), inOrder: true}
	go func() {
		defer close(s.done)
		for p := range s.flushes {
			s.encode(p)
			p.arena, p.ents, p.inOrder = p.arena[:0], p.ents[:0], true
			s.spare <- p
		}
	}()
	return s
}

// Add adds one entry; id is copied. Entries come in file order (increasing line).
func (s *Sorter) Add(id []byte, hash snapshot.Hash, line int32) {
	p := s.pend
	if n := len(p.ents); n > 0 && p.inOrder {
		last := p.ents[n-1]
		if bytes.Compare(id, p.arena[last.off:last.off+uint32(last.n)]) <= 0 {
			p.inOrder = false
		}
	}
	p.ents = append(p.ents, pendEntry{hash: hash, off: uint32(len(p.arena)), n: uint16(len(id)), line: line})
	p.arena = append(p.arena, id...)
	s.count++
	if len(p.ents) == s.batch {
		s.flushes <- p
		s.pend = <-s.spare
	}
}

// EncodedSize is the size of the sorted runs: an upper bound of the size of
// an index of the same entries (merging runs only lengthens shared prefixes).
func (s *Sorter) EncodedSize() int64 {
	var n int64
	for _, r := range s.runs {
		for _, b := range r.blocks {
			n += int64(len(b))
		}
	}
	return n
}

// Len is the number of entries added.
func (s *Sorter) Len() int64 { return s.count }

// Finish sorts what is left and waits for the background work. It returns
// the duplicate product_id with the smallest id, if any, with the lines of
// its first two rows (dupID is "" when there is none).
func (s *Sorter) Finish() (dupID string, first, second int, err error) {
	if !s.final {
		s.final = true
		if len(s.pend.ents) > 0 {
			s.flushes <- s.pend
		}
		close(s.flushes)
		<-s.done
		s.pend = nil
	}
	if !s.checked {
		s.checked = true
		if len(s.runs) > 1 {
			s.dup, s.err = s.firstDuplicate()
		}
	}
	if s.err != nil || s.dup == nil {
		return "", 0, 0, s.err
	}
	return string(s.dup.id), int(s.dup.first), int(s.dup.next), nil
}

// firstDuplicate walks the merged runs (ordered by id, then line) for the
// first id seen twice.
func (s *Sorter) firstDuplicate() (*dupe, error) {
	it := s.Iter()
	var prev []byte
	var prevLine int32
	for i := int64(0); ; i++ {
		r, err := it.NextRef()
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if i > 0 && bytes.Equal(r.ID, prev) {
			return &dupe{id: bytes.Clone(r.ID), first: prevLine, next: r.Line}, nil
		}
		prev, prevLine = append(prev[:0], r.ID...), r.Line
	}
}

// encode sorts a batch and front-codes it onto the last run, or a new one.
func (s *Sorter) encode(p *pending) {
	id := func(e pendEntry) []byte { return p.arena[e.off : e.off+uint32(e.n)] }
	if !p.inOrder {
		slices.SortFunc(p.ents, func(a, b pendEntry) int {
			if c := bytes.Compare(id(a), id(b)); c != 0 {
				return c
			}
			return int(a.line - b.line)
		})
	}
	var r *run
	if n := len(s.runs); n > 0 && bytes.Compare(s.runs[n-1].last, id(p.ents[0])) < 0 {
		r = s.runs[n-1]
	} else {
		r = &run{first: append([]byte(nil), id(p.ents[0])...)}
		s.runs = append(s.runs, r)
	}
	var blk []byte
	if len(r.blocks) > 0 {
		blk = r.blocks[len(r.blocks)-1]
	}
	prev, prevLine := r.last, r.lastLn
	for _, e := range p.ents {
		cur := id(e)
		if r.count > 0 && bytes.Equal(cur, prev) {
			if s.dup == nil || bytes.Compare(cur, s.dup.id) < 0 {
				s.dup = &dupe{id: append([]byte(nil), cur...), first: prevLine, next: e.line}
			}
		}
		if cap(blk)-len(blk) < 2*binary.MaxVarintLen64+len(cur)+len(e.hash)+binary.MaxVarintLen32 {
			if len(r.blocks) > 0 {
				r.blocks[len(r.blocks)-1] = blk
			}
			blk = make([]byte, 0, runBlock)
			r.blocks = append(r.blocks, blk)
		}
		blk = appendEntry(blk, prev, cur, e.hash)
		blk = binary.AppendUvarint(blk, uint64(e.line))
		prev, prevLine = cur, e.line
		r.count++
	}
	r.blocks[len(r.blocks)-1] = blk
	r.last = append(r.last[:0], prev...)
	r.lastLn = prevLine
}

// Iter returns an iterator over every entry, sorted by product_id (then
// line). Call it after Finish; it may be called again for another walk.
func (s *Sorter) Iter() RefIterator {
	if len(s.runs) == 1 {
		return &runReader{r: s.runs[0]}
	}
	m := &runMerge{}
	for _, r := range s.runs {
		rr := &runReader{r: r}
		if err := rr.advance(); err != nil {
			m.err = err
		}
		if rr.ok {
			m.heap = append(m.heap, rr)
		}
	}
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m
}

// runReader decodes one run.
type runReader struct {
	r   *run
	blk int
	pos int
	cur Ref
	id  []byte
	ok  bool
}

func (rr *runReader) advance() error {
	for rr.blk < len(rr.r.blocks) && rr.pos >= len(rr.r.blocks[rr.blk]) {
		rr.blk++
		rr.pos = 0
	}
	if rr.blk >= len(rr.r.blocks) {
		rr.ok = false
		return nil
	}
	b := rr.r.blocks[rr.blk][rr.pos:]
	shared, n1 := binary.Uvarint(b)
	suffix, n2 := binary.Uvarint(b[n1:])
	if n1 <= 0 || n2 <= 0 || shared > uint64(len(rr.id)) {
		rr.ok = false
		return fmt.Errorf("corrupt sorted run")
	}
	p := n1 + n2
	rr.id = append(rr.id[:shared], b[p:p+int(suffix)]...)
	p += int(suffix)
	copy(rr.cur.Hash[:], b[p:p+len(rr.cur.Hash)])
	p += len(rr.cur.Hash)
	line, n3 := binary.Uvarint(b[p:])
	rr.cur.Line = int32(line)
	rr.cur.ID = rr.id
	rr.pos += p + n3
	rr.ok = true
	return nil
}

// NextRef returns the next entry of the run.
func (rr *runReader) NextRef() (Ref, error) {
	if err := rr.advance(); err != nil {
		return Ref{}, err
	}
	if !rr.ok {
		return Ref{}, io.EOF
	}
	return rr.cur, nil
}

// runMerge merges runs with a heap ordered by (id, line).
type runMerge struct {
	heap []*runReader
	last *runReader // returned last: advanced at the next call
	err  error
}

func less(a, b *runReader) bool {
	if c := bytes.Compare(a.cur.ID, b.cur.ID); c != 0 {
		return c < 0
	}
	return a.cur.Line < b.cur.Line
}

func (m *runMerge) down(i int) {
	h := m.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && less(h[r], h[l]) {
			j = r
		}
		if !less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}

// NextRef returns the smallest entry left.
func (m *runMerge) NextRef() (Ref, error) {
	if m.err != nil {
		return Ref{}, m.err
	}
	if m.last != nil {
		if err := m.last.advance(); err != nil {
			m.err = err
			return Ref{}, err
		}
		if !m.last.ok {
			n := len(m.heap) - 1
			m.heap[0] = m.heap[n]
			m.heap = m.heap[:n]
		}
		if len(m.heap) > 0 {
			m.down(0)
		}
		m.last = nil
	}
	if len(m.heap) == 0 {
		return Ref{}, io.EOF
	}
	m.last = m.heap[0]
	return m.last.cur, nil
}
