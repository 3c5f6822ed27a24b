package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Sorter collects a snapshot's (product_id, hash, line) entries in file
// order and yields them sorted by product_id, in bounded memory: an
// external merge sort.
//
// Entries are gathered in batches, each sorted (unless it already is) in
// the background and front-coded into a compact sorted run, appended to the
// run before it when they follow each other (sorted input ends as one run).
// When the runs held in memory exceed SortOptions.MemoryBytes they are
// merged into one run written to a temporary file (a run that is alone is
// written as it is), so memory stays near the budget whatever the snapshot's
// size; Iter merges what is in memory and on disk. A typical entry costs its
// id's new suffix plus ~20 bytes, whatever the row width.
//
// Finish finds duplicate product_ids (Duplicates); Close releases the memory
// and the temporary file.
type Sorter struct {
	opts    SortOptions
	pend    *pending
	spare   chan *pending
	flushes chan *pending
	done    chan struct{}
	count   int64
	batch   int // entries sorted at once
	block   int // bytes of a block of a run
	final   bool
	closed  bool

	// Owned by the background goroutine until Finish has waited for it.
	runs     []*run
	memBytes int64    // bytes of the in-memory blocks of runs
	free     [][]byte // spare blocks
	spill    *os.File // spilled runs (unlinked at creation: gone with the process)
	spillEnd int64
	spills   int         // times runs were written to disk
	keys     []sortKey   // sortBatch's keys, reused
	keysTmp  []sortKey   // and their scratch
	sorted   []pendEntry // sortBatch's output, reused
	// createSpill makes the spill file: createSpillFile, or a test's.
	createSpill func() (*os.File, error)
	err         error // first background failure

	dups  []Duplicate // after Finish: up to opts.MaxDuplicates, by Second
	ndups int64       // after Finish: how many duplicate rows in all
}

// SortOptions bound the memory of a Sorter.
type SortOptions struct {
	// MemoryBytes bounds the sorted runs held in memory: over it, runs are
	// merged onto disk. 0 keeps every run in memory.
	MemoryBytes int64
	// TempDir is where spilled runs go ("" is os.TempDir()). The file is
	// removed from the directory as soon as it is created: it takes space
	// only while the sorter is open and never outlives the process.
	TempDir string
	// MaxDuplicates is how many duplicates Duplicates reports at most
	// (default DefaultMaxDuplicates); all of them are counted.
	MaxDuplicates int
}

// ErrSortSpaceFull is the error of a sorter whose spilled runs found no
// space left on the device of SortOptions.TempDir: a snapshot too large for
// the diff's temporary storage (on Lambda, its ephemeral storage).
var ErrSortSpaceFull = errors.New("no space left for sorted runs")

// DefaultMaxDuplicates is how many duplicate product_ids a sorter reports by
// default: a rejection lists at most 100 problems.
const DefaultMaxDuplicates = 100

// Duplicate is a product_id found on more than one row of a snapshot: First
// is the line of its first row, Second the line of a later one (an id on
// three rows is two duplicates, both with the first row's line).
type Duplicate struct {
	ID            string
	First, Second int
}

// pendingEntries is the size of a batch of entries sorted at once.
const pendingEntries = 1 << 16

type pendEntry struct {
	hash catalog.Hash
	off  uint32
	n    uint16
	line int32
}

type pending struct {
	arena   []byte
	ents    []pendEntry
	inOrder bool // ids strictly increasing in file order
}

// newPending makes a batch, its arena sized for ids of up to 24 bytes (it
// grows once for longer ones and keeps its size).
func newPending(batch int) *pending {
	return &pending{ents: make([]pendEntry, 0, batch), arena: make([]byte, 0, batch*24), inOrder: true}
}

// runBlock is the size of a block of a run, in memory or on disk. Small
// enough that a merge of runs in memory, which frees each block it has
// read, needs few new ones (with 1 MiB blocks a merge of 16 runs took 15
// MiB more); large enough that reading a run from disk is a few preads.
const runBlock = 64 << 10

// run is a sorted run (by id, then line): front-coded entries (shared,
// suffix length, suffix, hash, line) in blocks, each block in memory or on
// disk; an entry never spans two blocks, the front coding does.
type run struct {
	blocks []block
	count  int64
	last   []byte
	lastLn int32
	dups   dupList // every duplicate within the run (complete for the run)
}

// block is a block of a run: mem, or n bytes at off in the spill file.
type block struct {
	mem []byte
	off int64
	n   int
}

func (r *run) inMemory() bool {
	for _, b := range r.blocks {
		if b.mem != nil {
			return true
		}
	}
	return false
}

func (r *run) onDisk() bool {
	for _, b := range r.blocks {
		if b.mem == nil {
			return true
		}
	}
	return false
}

// NewSorter starts an empty sorter.
func NewSorter(opts SortOptions) *Sorter { return newSorter(opts, pendingEntries, runBlock) }

func newSorter(opts SortOptions, batch, block int) *Sorter {
	if opts.MaxDuplicates <= 0 {
		opts.MaxDuplicates = DefaultMaxDuplicates
	}
	s := &Sorter{opts: opts, spare: make(chan *pending, 3), flushes: make(chan *pending, 1), done: make(chan struct{}),
		batch: batch, block: block}
	s.createSpill = s.createSpillFile
	for i := 0; i < 2; i++ {
		s.spare <- newPending(batch)
	}
	s.pend = newPending(batch)
	go func() {
		defer close(s.done)
		for p := range s.flushes {
			if s.err == nil {
				s.encode(p)
				if s.opts.MemoryBytes > 0 && s.memBytes > s.opts.MemoryBytes {
					s.err = s.spillRuns()
				}
			}
			p.arena, p.ents, p.inOrder = p.arena[:0], p.ents[:0], true
			s.spare <- p
		}
	}()
	return s
}

// Add adds one entry; id is copied. Entries come in file order (increasing line).
func (s *Sorter) Add(id []byte, hash catalog.Hash, line int32) {
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

// Len is the number of entries added.
func (s *Sorter) Len() int64 { return s.count }

// Spilled is what went to disk: the bytes written to the temporary file and
// how many times runs were written there. Call it after Finish.
func (s *Sorter) Spilled() (bytes int64, times int) { return s.spillEnd, s.spills }

// Finish sorts what is left, waits for the background work and looks for
// duplicate product_ids (see Duplicates). It may be called more than once.
func (s *Sorter) Finish() error {
	if s.closed {
		return errors.New("sorter closed")
	}
	if s.final {
		return s.err
	}
	s.final = true
	if len(s.pend.ents) > 0 {
		s.flushes <- s.pend
	}
	close(s.flushes)
	<-s.done
	s.release()
	if s.err != nil {
		return s.err
	}
	s.err = s.finishRuns()
	s.free = nil // no block is made after Finish
	return s.err
}

// release drops the batches and the sort's scratch, which only Add needs.
func (s *Sorter) release() {
	s.pend = nil
	for len(s.spare) > 0 {
		<-s.spare
	}
	s.keys, s.keysTmp, s.sorted = nil, nil, nil
}

// finishRuns leaves as few runs as it can and collects the duplicates:
// the runs in memory are merged into one (in memory: the merge reuses the
// blocks it has read, and walks after it read one run in sequence); when
// runs are left on disk too, one merged walk over everything finds the
// duplicates.
func (s *Sorter) finishRuns() error {
	var mem, rest []*run
	for _, r := range s.runs {
		if r.inMemory() && !r.onDisk() {
			mem = append(mem, r)
		} else {
			rest = append(rest, r)
		}
	}
	if len(mem) > 1 {
		merged, err := s.mergeRuns(mem, false)
		if err != nil {
			return err
		}
		s.runs = append(rest, merged)
	}
	var all dupList
	all.max = s.opts.MaxDuplicates
	switch len(s.runs) {
	case 0:
	case 1:
		all = s.runs[0].dups
	default:
		t := dupTracker{list: &all}
		if err := s.walk(func(r catalog.Ref) error { t.see(r.ID, r.Line); return nil }); err != nil {
			return fmt.Errorf("look for duplicate product_ids: %w", err)
		}
	}
	s.dups, s.ndups = all.sorted(), all.total
	return nil
}

// Duplicates returns, after Finish, the duplicate product_ids: at most
// SortOptions.MaxDuplicates of them, those whose later row comes first in
// the file, ordered by that row's line; and how many rows repeat an id
// seen before in all (0 when every product_id is unique).
func (s *Sorter) Duplicates() (first []Duplicate, total int64) { return s.dups, s.ndups }

// Close releases the runs and the temporary file. The sorter cannot be used
// afterwards; Close may be called more than once, also before Finish.
func (s *Sorter) Close() error {
	if s.closed {
		return nil
	}
	if !s.final {
		s.final = true
		close(s.flushes)
		<-s.done
		s.release()
	}
	s.closed = true
	s.runs, s.free = nil, nil
	if s.spill != nil {
		err := s.spill.Close()
		s.spill = nil
		if err != nil {
			return fmt.Errorf("close sort spill file: %w", err)
		}
	}
	return nil
}

// encode sorts a batch and front-codes it onto the last run, or a new one.
func (s *Sorter) encode(p *pending) {
	if len(p.ents) == 0 {
		return
	}
	id := func(e pendEntry) []byte { return p.arena[e.off : e.off+uint32(e.n)] }
	if !p.inOrder {
		s.sortBatch(p)
	}
	var r *run
	if n := len(s.runs); n > 0 && bytes.Compare(s.runs[n-1].last, id(p.ents[0])) < 0 {
		r = s.runs[n-1]
	} else {
		r = &run{dups: dupList{max: s.opts.MaxDuplicates}}
		s.runs = append(s.runs, r)
	}
	w := s.appendTo(r)
	for _, e := range p.ents {
		w.add(id(e), e.hash, e.line)
	}
	w.close()
}

// sortBatch sorts a batch by (id, line). It radix-sorts 16-byte keys, not
// the entries: each key holds the 8 bytes of the id that follow the prefix all
// ids of the batch share (big-endian, so that comparing keys compares those
// bytes; zero-padded, so a shorter id never sorts after a longer one with
// the same bytes) and the entry's index; only equal keys compare the ids.
// SKU-0123456789 ids share "SKU-00" and differ in the next 8 bytes; random
// ids differ in their first 8.
func (s *Sorter) sortBatch(p *pending) {
	id := func(e pendEntry) []byte { return p.arena[e.off : e.off+uint32(e.n)] }
	first := id(p.ents[0])
	shared := len(first)
	for _, e := range p.ents[1:] {
		shared = min(shared, commonPrefix(first, id(e)))
		if shared == 0 {
			break
		}
	}
	if cap(s.keys) < len(p.ents) {
		s.keys = make([]sortKey, 0, s.batch)
		s.keysTmp = make([]sortKey, s.batch)
		s.sorted = make([]pendEntry, 0, s.batch)
	}
	keys := s.keys[:0]
	for i, e := range p.ents {
		var k [8]byte
		if b := id(e); len(b) > shared {
			copy(k[:], b[shared:])
		}
		keys = append(keys, sortKey{key: binary.BigEndian.Uint64(k[:]), i: uint32(i)})
	}
	keys = radixSort(keys, s.keysTmp[:len(keys)])
	// Equal keys (ids alike in those 8 bytes) are in line order: sort each
	// such stretch by id, then line.
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j].key == keys[i].key {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], func(a, b sortKey) int {
				ea, eb := p.ents[a.i], p.ents[b.i]
				if c := bytes.Compare(id(ea), id(eb)); c != 0 {
					return c
				}
				return int(ea.line - eb.line)
			})
		}
		i = j
	}
	sorted := s.sorted[:0]
	for _, k := range keys {
		sorted = append(sorted, p.ents[k.i])
	}
	// The batch takes the sorted entries; the sorter keeps its old slice
	// for the next batch.
	p.ents, s.sorted = sorted, p.ents[:0]
}

// radixSort sorts keys by key, stably (so equal keys keep their order),
// with tmp as scratch of the same length: one counting pass per byte of the
// key, skipping the bytes all keys share. It returns keys or tmp, whichever
// holds the result.
func radixSort(keys, tmp []sortKey) []sortKey {
	if len(keys) < 2 {
		return keys
	}
	for shift := 0; shift < 64; shift += 8 {
		var count [256]int
		for _, k := range keys {
			count[byte(k.key>>shift)]++
		}
		if count[byte(keys[0].key>>shift)] == len(keys) {
			continue
		}
		sum := 0
		for d, c := range count {
			count[d] = sum
			sum += c
		}
		for _, k := range keys {
			d := byte(k.key >> shift)
			tmp[count[d]] = k
			count[d]++
		}
		keys, tmp = tmp, keys
	}
	return keys
}

// sortKey is what sortBatch sorts: an id's 8 distinguishing bytes and the
// entry's index in its batch.
type sortKey struct {
	key uint64
	i   uint32
}

// runWriter appends entries to a run: to its last in-memory block, new
// blocks from the sorter's spares, or (toDisk) blocks written to the spill
// file as they fill.
type runWriter struct {
	s         *Sorter
	r         *run
	blk       []byte
	toDisk    bool
	groupLine int32 // line of the first entry with id r.last
	err       error
}

// appendTo continues run r in memory.
func (s *Sorter) appendTo(r *run) *runWriter {
	// groupLine only matters for a next id equal to r.last, which cannot
	// come: a batch continues a run only when its first id is greater.
	w := &runWriter{s: s, r: r}
	if n := len(r.blocks); n > 0 && r.blocks[n-1].mem != nil {
		w.blk = r.blocks[n-1].mem
		r.blocks = r.blocks[:n-1]
		s.memBytes -= int64(cap(w.blk))
	}
	return w
}

func (w *runWriter) add(id []byte, hash catalog.Hash, line int32) {
	if w.err != nil {
		return
	}
	if w.r.count > 0 && bytes.Equal(id, w.r.last) {
		w.r.dups.add(id, w.groupLine, line)
	} else {
		w.groupLine = line
	}
	if w.blk == nil || cap(w.blk)-len(w.blk) < 2*binary.MaxVarintLen64+len(id)+len(hash)+binary.MaxVarintLen32 {
		w.endBlock()
		if w.blk == nil {
			w.blk = w.s.newBlock()
		}
	}
	w.blk = catalog.AppendIndexEntry(w.blk, w.r.last, id, hash)
	w.blk = binary.AppendUvarint(w.blk, uint64(line))
	w.r.last = append(w.r.last[:0], id...)
	w.r.lastLn = line
	w.r.count++
}

// endBlock closes the current block: kept in memory, or written to disk
// (its buffer then reused).
func (w *runWriter) endBlock() {
	if w.blk == nil {
		return
	}
	if !w.toDisk {
		w.r.blocks = append(w.r.blocks, block{mem: w.blk})
		w.s.memBytes += int64(cap(w.blk))
		w.blk = nil
		return
	}
	b, err := w.s.writeBlock(w.blk)
	if err != nil {
		w.err = err
		return
	}
	w.r.blocks = append(w.r.blocks, b)
	w.blk = w.blk[:0]
}

func (w *runWriter) close() error {
	if w.err == nil && w.blk != nil && len(w.blk) > 0 {
		w.endBlock()
	}
	if w.toDisk && w.blk != nil {
		w.s.releaseBlock(w.blk)
	}
	w.blk = nil
	return w.err
}

func (s *Sorter) newBlock() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b[:0]
	}
	return make([]byte, 0, s.block)
}

// releaseBlock keeps b for reuse (a block that grew past the block size
// for one huge entry is left to the garbage collector).
func (s *Sorter) releaseBlock(b []byte) {
	if cap(b) == s.block {
		s.free = append(s.free, b[:0])
	}
}

// writeBlock appends b to the spill file.
func (s *Sorter) writeBlock(b []byte) (block, error) {
	if s.spill == nil {
		f, err := s.createSpill()
		if err != nil {
			return block{}, err
		}
		s.spill = f
	}
	if _, err := s.spill.Write(b); err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return block{}, fmt.Errorf("%w after %d bytes: %w", ErrSortSpaceFull, s.spillEnd, err)
		}
		return block{}, fmt.Errorf("write sorted run to %s: %w", s.spill.Name(), err)
	}
	blk := block{off: s.spillEnd, n: len(b)}
	s.spillEnd += int64(len(b))
	return blk, nil
}

// createSpillFile creates the spill file in TempDir and unlinks it.
func (s *Sorter) createSpillFile() (*os.File, error) {
	f, err := os.CreateTemp(s.opts.TempDir, "catalog-sort-*")
	if err != nil {
		return nil, fmt.Errorf("create sort spill file: %w", err)
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("unlink sort spill file: %w", err)
	}
	return f, nil
}

// spillRuns moves the runs held in memory to disk: a run that is alone (or
// partly on disk already) by writing its blocks as they are; several by
// merging them into one run on disk.
func (s *Sorter) spillRuns() error {
	var merge []*run
	for _, r := range s.runs {
		if !r.inMemory() {
			continue
		}
		if r.onDisk() {
			if err := s.writeRun(r); err != nil {
				return err
			}
			continue
		}
		merge = append(merge, r)
	}
	if len(merge) == 1 {
		if err := s.writeRun(merge[0]); err != nil {
			return err
		}
	} else if len(merge) > 1 {
		merged, err := s.mergeRuns(merge, true)
		if err != nil {
			return err
		}
		kept := s.runs[:0]
		for _, r := range s.runs {
			if !slices.Contains(merge, r) {
				kept = append(kept, r)
			}
		}
		// The merged run goes last: the next batch may continue it.
		s.runs = append(kept, merged)
	}
	s.spills++
	return nil
}

// writeRun writes the in-memory blocks of r to disk, in place.
func (s *Sorter) writeRun(r *run) error {
	for i, b := range r.blocks {
		if b.mem == nil {
			continue
		}
		nb, err := s.writeBlock(b.mem)
		if err != nil {
			return err
		}
		s.memBytes -= int64(cap(b.mem))
		s.releaseBlock(b.mem)
		r.blocks[i] = nb
	}
	return nil
}

// mergeRuns merges runs into a new one, in memory or on disk, finding the
// duplicates between them on the way. The runs are consumed: each of their
// in-memory blocks is reused once read.
func (s *Sorter) mergeRuns(runs []*run, toDisk bool) (*run, error) {
	out := &run{dups: dupList{max: s.opts.MaxDuplicates}}
	w := &runWriter{s: s, r: out, toDisk: toDisk}
	m := &runMerge{}
	for _, r := range runs {
		m.add(&runReader{s: s, r: r, consume: true})
	}
	if err := m.init(); err != nil {
		return nil, err
	}
	for {
		e, err := m.NextRef()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("merge sorted runs: %w", err)
		}
		w.add(e.ID, e.Hash, e.Line)
	}
	if err := w.close(); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteIndex writes the index of the entries (IndexWriter's format) to w,
// and returns how many it wrote. Call it after Finish, on entries without
// duplicates. It may run while another goroutine walks Iter: with one run
// left (sorted input, or runs merged in memory) it only copies the run's
// blocks without their lines (a run is front-coded the way an index is);
// otherwise it writes what a merged walk yields.
func (s *Sorter) WriteIndex(w io.Writer) (int64, error) {
	if s.closed || !s.final {
		return 0, errors.New("sorter not finished, or closed")
	}
	if s.ndups > 0 {
		return 0, fmt.Errorf("%d duplicate product_ids: no index", s.ndups)
	}
	if len(s.runs) != 1 {
		iw := catalog.NewIndexWriter(w)
		if err := s.walk(func(r catalog.Ref) error { return iw.AddRef(r.ID, r.Hash) }); err != nil {
			return iw.Count(), err
		}
		return iw.Count(), iw.Close()
	}
	rr := &runReader{s: s, r: s.runs[0]}
	out := make([]byte, 0, runBlock)
	out = append(out, catalog.IndexMagic...)
	var n int64
	for ; rr.blk < len(rr.r.blocks); rr.blk++ {
		if err := rr.load(); err != nil {
			return n, err
		}
		for b := rr.data; len(b) > 0; n++ {
			_, n1 := binary.Uvarint(b)
			suffix, n2 := binary.Uvarint(b[max(n1, 0):])
			end := n1 + n2 + int(suffix) + len(catalog.Hash{})
			if n1 <= 0 || n2 <= 0 || end > len(b) {
				return n, fmt.Errorf("corrupt sorted run")
			}
			_, n3 := binary.Uvarint(b[end:])
			if n3 <= 0 {
				return n, fmt.Errorf("corrupt sorted run")
			}
			if len(out)+end > cap(out) {
				if _, err := w.Write(out); err != nil {
					return n, fmt.Errorf("write index: %w", err)
				}
				out = out[:0]
			}
			out = append(out, b[:end]...)
			b = b[end+n3:]
		}
	}
	if _, err := w.Write(out); err != nil {
		return n, fmt.Errorf("write index: %w", err)
	}
	return n, nil
}

// walk calls fn for every entry, in order, until it returns an error.
func (s *Sorter) walk(fn func(catalog.Ref) error) error {
	it := s.Iter()
	for {
		r, err := it.NextRef()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}

// Iter returns an iterator over every entry, sorted by product_id (then
// line). Call it after Finish; it may be called again for another walk.
func (s *Sorter) Iter() catalog.RefIterator {
	if s.closed {
		return errIterator{errors.New("sorter closed")}
	}
	if len(s.runs) == 1 {
		rr := &runReader{s: s, r: s.runs[0]}
		if s.ndups == 0 {
			return catalog.StrictlyIncreasing(rr)
		}
		return rr
	}
	m := &runMerge{}
	for _, r := range s.runs {
		m.add(&runReader{s: s, r: r})
	}
	if err := m.init(); err != nil {
		return errIterator{err}
	}
	if s.ndups == 0 {
		return catalog.StrictlyIncreasing(m)
	}
	return m
}

type errIterator struct{ err error }

func (e errIterator) NextRef() (catalog.Ref, error) { return catalog.Ref{}, e.err }

// runReader decodes one run. With consume, it hands each in-memory block
// of the run back to the sorter once read (the run is merged into another).
type runReader struct {
	s       *Sorter
	r       *run
	consume bool
	blk     int    // index of the current block
	data    []byte // the current block's bytes
	loaded  bool
	buf     []byte // a disk block's bytes
	pos     int
	cur     catalog.Ref
	id      []byte
	ok      bool
}

// load makes rr.data the current block.
func (rr *runReader) load() error {
	b := rr.r.blocks[rr.blk]
	if b.mem != nil {
		rr.data = b.mem
	} else {
		if cap(rr.buf) < b.n {
			rr.buf = make([]byte, max(b.n, rr.s.block))
		}
		rr.buf = rr.buf[:b.n]
		if _, err := rr.s.spill.ReadAt(rr.buf, b.off); err != nil {
			return fmt.Errorf("read sorted run from %s: %w", rr.s.spill.Name(), err)
		}
		rr.data = rr.buf
	}
	rr.loaded, rr.pos = true, 0
	return nil
}

func (rr *runReader) advance() error {
	for {
		if rr.blk >= len(rr.r.blocks) {
			rr.ok = false
			return nil
		}
		if !rr.loaded {
			if err := rr.load(); err != nil {
				rr.ok = false
				return err
			}
		}
		if rr.pos < len(rr.data) {
			break
		}
		if rr.consume {
			if b := rr.r.blocks[rr.blk]; b.mem != nil {
				rr.s.memBytes -= int64(cap(b.mem))
				rr.s.releaseBlock(b.mem)
				rr.r.blocks[rr.blk].mem = nil
			}
		}
		rr.blk++
		rr.loaded = false
	}
	b := rr.data[rr.pos:]
	shared, n1 := binary.Uvarint(b)
	suffix, n2 := binary.Uvarint(b[n1:])
	if n1 <= 0 || n2 <= 0 || shared > uint64(len(rr.id)) || uint64(len(b)-n1-n2) < suffix+uint64(len(rr.cur.Hash)) {
		rr.ok = false
		return fmt.Errorf("corrupt sorted run")
	}
	p := n1 + n2
	rr.id = append(rr.id[:shared], b[p:p+int(suffix)]...)
	p += int(suffix)
	copy(rr.cur.Hash[:], b[p:p+len(rr.cur.Hash)])
	p += len(rr.cur.Hash)
	line, n3 := binary.Uvarint(b[p:])
	if n3 <= 0 {
		rr.ok = false
		return fmt.Errorf("corrupt sorted run")
	}
	rr.cur.Line = int32(line)
	rr.cur.ID = rr.id
	rr.pos += p + n3
	rr.ok = true
	return nil
}

// NextRef returns the next entry of the run.
func (rr *runReader) NextRef() (catalog.Ref, error) {
	if err := rr.advance(); err != nil {
		return catalog.Ref{}, err
	}
	if !rr.ok {
		return catalog.Ref{}, io.EOF
	}
	return rr.cur, nil
}

// runMerge merges runs with a heap ordered by (id, line).
type runMerge struct {
	heap []*runReader
	last *runReader // returned last: advanced at the next call
	err  error
}

func (m *runMerge) add(rr *runReader) { m.heap = append(m.heap, rr) }

// init reads the first entry of every run and orders the heap.
func (m *runMerge) init() error {
	h := m.heap[:0]
	for _, rr := range m.heap {
		if err := rr.advance(); err != nil {
			return err
		}
		if rr.ok {
			h = append(h, rr)
		}
	}
	m.heap = h
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return nil
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
func (m *runMerge) NextRef() (catalog.Ref, error) {
	if m.err != nil {
		return catalog.Ref{}, m.err
	}
	if m.last != nil {
		if err := m.last.advance(); err != nil {
			m.err = err
			return catalog.Ref{}, err
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
		return catalog.Ref{}, io.EOF
	}
	m.last = m.heap[0]
	return m.last.cur, nil
}

// dupTracker sees entries in (id, line) order and records each entry whose
// id equals the one before, with the line of the id's first entry.
type dupTracker struct {
	list      *dupList
	prev      []byte // a copy: iterators reuse their buffers
	groupLine int32  // line of the first entry with id prev
	have      bool
}

func (t *dupTracker) see(id []byte, line int32) {
	if t.have && bytes.Equal(id, t.prev) {
		t.list.add(id, t.groupLine, line)
		return
	}
	t.groupLine = line
	t.prev, t.have = append(t.prev[:0], id...), true
}

// dupList keeps the max duplicates with the smallest Second line (a
// max-heap on Second while full) and counts them all.
type dupList struct {
	max   int
	heap  []Duplicate
	total int64
}

func (l *dupList) add(id []byte, first, second int32) {
	l.total++
	d := Duplicate{First: int(first), Second: int(second)}
	if len(l.heap) < l.max {
		d.ID = string(id)
		l.heap = append(l.heap, d)
		for i := len(l.heap) - 1; i > 0; {
			p := (i - 1) / 2
			if l.heap[p].Second >= l.heap[i].Second {
				break
			}
			l.heap[p], l.heap[i] = l.heap[i], l.heap[p]
			i = p
		}
		return
	}
	if l.max == 0 || d.Second >= l.heap[0].Second {
		return
	}
	d.ID = string(id)
	l.heap[0] = d
	for i := 0; ; {
		c := 2*i + 1
		if c >= len(l.heap) {
			break
		}
		if c+1 < len(l.heap) && l.heap[c+1].Second > l.heap[c].Second {
			c++
		}
		if l.heap[i].Second >= l.heap[c].Second {
			break
		}
		l.heap[i], l.heap[c] = l.heap[c], l.heap[i]
		i = c
	}
}

// sorted returns the kept duplicates by line.
func (l *dupList) sorted() []Duplicate {
	out := slices.Clone(l.heap)
	slices.SortFunc(out, func(a, b Duplicate) int { return a.Second - b.Second })
	return out
}

// commonPrefix is the length of the prefix a and b share.
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
