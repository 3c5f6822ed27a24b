package diff

import (
	"bufio"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// planSpill collects a plan's entries (product_id, plan line) in any
// order (the order rows are read or chunks filled) and writes them as the
// plan's pages, in product_id order, and its page index (DESIGN 13), in
// bounded memory whatever the plan's size: entries are held up to
// Config.PlanMemoryBytes, then sorted and written as a sorted run to a
// temporary file in Config.SpillDir (unlinked at creation: it takes space
// only while the spill is open and never outlives the process); write
// merges the runs (and the entries still held) while it writes the pages,
// one at a time. A plan that fits in the budget never touches the disk: it
// is sorted in memory, as catalog.BuildPlanPages sorts it.
//
// The plan's bytes (ids and lines) are bounded by Config.MaxPlanBytes
// [catalog.MaxKeptPlanBytes], the share of the diff's temporary storage a
// plan may take: past it, or when the disk is full, add returns an error
// errors.Is errPlanTooLarge and the plan is not kept.
type planSpill struct {
	dir      string
	memory   int   // bytes of held entries that make a run
	maxBytes int64 // the plan's bytes at most

	entries []catalog.PlanEntry // held, in arrival order
	held    int                 // their bytes, with planEntryOverhead each
	bytes   int64               // the plan's bytes so far (ids and lines)

	f    *os.File // the runs, one after another
	w    *bufio.Writer
	end  int64 // bytes written to f
	runs []spillRun
	tmp  []byte
}

// spillRun is a sorted run of the spill file: n bytes at off, of count entries.
type spillRun struct {
	off, n int64
	count  int
}

// planEntryOverhead is what an entry held costs besides its id and line:
// its PlanEntry and the allocations' rounding.
const planEntryOverhead = 64

// DefaultPlanMemoryBytes is the default Config.PlanMemoryBytes: a plan of
// ~25,000 typical changes (300 bytes a line) is sorted in memory, a
// larger one through runs on disk. At 32 MiB the 40,000 changes of a 4%
// change of 1M products stayed in memory and the diff's peak RSS rose
// from 80 to 104-114 MiB (issue 15's bound: 94.5), for no time saved
// (bench diff: 690-711 ms sorted either way).
const DefaultPlanMemoryBytes = 8 << 20

// errPlanTooLarge stops a plan past Config.MaxPlanBytes, or one that found
// no space left for its sorted runs.
var errPlanTooLarge = errors.New("the plan passes the bytes kept for one")

func (r *run) newPlanSpill() *planSpill {
	return &planSpill{dir: r.h.cfg.SpillDir, memory: r.h.cfg.PlanMemoryBytes, maxBytes: r.h.cfg.MaxPlanBytes}
}

// add adds an entry; line is copied.
func (s *planSpill) add(id string, line []byte) error {
	if s.bytes += int64(len(id) + len(line)); s.bytes > s.maxBytes {
		return fmt.Errorf("%w (%d bytes)", errPlanTooLarge, s.maxBytes)
	}
	s.entries = append(s.entries, catalog.PlanEntry{ProductID: id, Line: slices.Clone(line)})
	if s.held += len(id) + len(line) + planEntryOverhead; s.held >= s.memory {
		return s.spill()
	}
	return nil
}

// spilled reports how many sorted runs were written and their bytes.
func (s *planSpill) spilled() (runs int, bytes int64) { return len(s.runs), s.end }

func sortPlanEntries(entries []catalog.PlanEntry) {
	slices.SortFunc(entries, func(a, b catalog.PlanEntry) int { return strings.Compare(a.ProductID, b.ProductID) })
}

// spill writes the held entries as a sorted run: each an uvarint length
// and the id, an uvarint length and the line.
func (s *planSpill) spill() error {
	if len(s.entries) == 0 {
		return nil
	}
	sortPlanEntries(s.entries)
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, "catalog-plan-*")
		if err != nil {
			return fmt.Errorf("plan: create spill file: %w", err)
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return fmt.Errorf("plan: unlink spill file: %w", err)
		}
		s.f, s.w = f, bufio.NewWriterSize(f, 1<<16)
	}
	start := s.end
	for _, e := range s.entries {
		s.tmp = binary.AppendUvarint(s.tmp[:0], uint64(len(e.ProductID)))
		s.tmp = append(s.tmp, e.ProductID...)
		s.tmp = binary.AppendUvarint(s.tmp, uint64(len(e.Line)))
		if _, err := s.w.Write(s.tmp); err != nil {
			return s.writeErr(err)
		}
		if _, err := s.w.Write(e.Line); err != nil {
			return s.writeErr(err)
		}
		s.end += int64(len(s.tmp) + len(e.Line))
	}
	if err := s.w.Flush(); err != nil {
		return s.writeErr(err)
	}
	s.runs = append(s.runs, spillRun{off: start, n: s.end - start, count: len(s.entries)})
	clear(s.entries) // the lines are garbage now
	s.entries, s.held = s.entries[:0], 0
	return nil
}

func (s *planSpill) writeErr(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w: no space left for its sorted runs after %d bytes: %w", errPlanTooLarge, s.end, err)
	}
	return fmt.Errorf("plan: write sorted run: %w", err)
}

// close releases the held entries and the spill file.
func (s *planSpill) close() {
	if s == nil {
		return
	}
	s.entries = nil
	if s.f != nil {
		s.f.Close()
		s.f, s.w = nil, nil
	}
}

// write writes the plan's pages, in product_id order, through put (page
// n's bytes), and returns their number and the page index. It holds one
// page, and for a spilled plan one read buffer a run (together about
// Config.PlanMemoryBytes).
func (s *planSpill) write(put func(n int, page []byte) error) (int, []byte, error) {
	var pager catalog.PlanPager
	pages := 0
	emit := func(id string, line []byte) error {
		if page := pager.Add(id, line); page != nil {
			if err := put(pages, page); err != nil {
				return err
			}
			pages++
		}
		return nil
	}
	sortPlanEntries(s.entries)
	if len(s.runs) == 0 {
		for _, e := range s.entries {
			if err := emit(e.ProductID, e.Line); err != nil {
				return 0, nil, err
			}
		}
	} else if err := s.merge(emit); err != nil {
		return 0, nil, err
	}
	last, index, err := pager.Finish()
	if err != nil {
		return 0, nil, fmt.Errorf("plan: its index: %w", err)
	}
	if last != nil {
		if err := put(pages, last); err != nil {
			return 0, nil, err
		}
		pages++
	}
	s.entries = nil
	return pages, index, nil
}

// merge gives emit every entry of the runs and of the held ones (sorted),
// in product_id order: a k-way merge on a heap of cursors.
func (s *planSpill) merge(emit func(id string, line []byte) error) error {
	buf := min(max(s.memory/(len(s.runs)+1), 4<<10), 1<<16)
	h := make(cursorHeap, 0, len(s.runs)+1)
	for i, run := range s.runs {
		c := &planCursor{order: i, rd: bufio.NewReaderSize(io.NewSectionReader(s.f, run.off, run.n), buf), left: run.count}
		if err := c.next(); err != nil {
			return err
		}
		h = append(h, c)
	}
	if len(s.entries) > 0 {
		c := &planCursor{order: len(s.runs), held: s.entries}
		if err := c.next(); err != nil {
			return err
		}
		h = append(h, c)
	}
	heap.Init(&h)
	for len(h) > 0 {
		c := h[0]
		if err := emit(c.id, c.line); err != nil {
			return err
		}
		if err := c.next(); err != nil {
			return err
		}
		if c.done {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return nil
}

// planCursor reads a sorted run (rd) or the held entries (held).
type planCursor struct {
	order int // the run's place: ties (impossible: ids are unique) go in run order
	rd    *bufio.Reader
	left  int
	held  []catalog.PlanEntry
	id    string
	line  []byte
	done  bool
}

func (c *planCursor) next() error {
	if c.rd == nil {
		if len(c.held) == 0 {
			c.done = true
			return nil
		}
		c.id, c.line, c.held = c.held[0].ProductID, c.held[0].Line, c.held[1:]
		return nil
	}
	if c.left == 0 {
		c.done = true
		return nil
	}
	c.left--
	n, err := binary.ReadUvarint(c.rd)
	if err != nil {
		return fmt.Errorf("plan: read sorted run: %w", err)
	}
	id := make([]byte, n)
	if _, err := io.ReadFull(c.rd, id); err != nil {
		return fmt.Errorf("plan: read sorted run: %w", err)
	}
	if n, err = binary.ReadUvarint(c.rd); err != nil {
		return fmt.Errorf("plan: read sorted run: %w", err)
	}
	if uint64(cap(c.line)) < n {
		c.line = make([]byte, n)
	}
	c.line = c.line[:n]
	if _, err := io.ReadFull(c.rd, c.line); err != nil {
		return fmt.Errorf("plan: read sorted run: %w", err)
	}
	c.id = string(id)
	return nil
}

type cursorHeap []*planCursor

func (h cursorHeap) Len() int { return len(h) }
func (h cursorHeap) Less(i, j int) bool {
	if h[i].id != h[j].id {
		return h[i].id < h[j].id
	}
	return h[i].order < h[j].order
}
func (h cursorHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *cursorHeap) Push(x any)   { *h = append(*h, x.(*planCursor)) }
func (h *cursorHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// planPutters is how many pages of a plan are written at once: a plan
// of 1M operations is 1,000 pages, written before the last chunk is sent.
const planPutters = 8

// putPlan writes a plan's pages (planPutters at once) and then its page
// index under keys.PlanIndex from spill (closed after); it returns the
// number of pages.
func (r *run) putPlan(ctx context.Context, spill *planSpill) (int, error) {
	defer spill.close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		putErr   error
		inFlight = make(chan struct{}, planPutters)
	)
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return putErr
	}
	pages, index, err := spill.write(func(n int, page []byte) error {
		if err := failed(); err != nil {
			return err
		}
		inFlight <- struct{}{}
		wg.Go(func() {
			defer func() { <-inFlight }()
			if err := r.h.blobs.Put(ctx, keys.PlanPage(r.job.RetailerID, r.job.Generation, n), page); err != nil {
				mu.Lock()
				if putErr == nil {
					putErr = fmt.Errorf("plan: write page %d: %w", n, err)
					cancel()
				}
				mu.Unlock()
			}
		})
		return nil
	})
	wg.Wait()
	if err == nil {
		err = failed()
	}
	if err != nil {
		return 0, err
	}
	if runs, bytes := spill.spilled(); runs > 0 {
		r.log.InfoContext(ctx, "the plan's sorted runs spilled to disk", "runs", runs, "bytes", bytes, "pages", pages)
	}
	if err := r.h.blobs.Put(ctx, keys.PlanIndex(r.job.RetailerID, r.job.Generation), index); err != nil {
		return 0, fmt.Errorf("plan: write its index: %w", err)
	}
	return pages, nil
}
