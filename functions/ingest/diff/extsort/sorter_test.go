package extsort

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/retailcatalog/catalog/functions/core/catalog"

	"github.com/stretchr/testify/require"
)

// sorterCase is a random input for the sorter: ids with repeats, partly in
// order, sometimes all sorted.
func sorterCase(seed uint64) []catalog.Ref {
	rng := rand.New(rand.NewPCG(seed, 3))
	n := rng.IntN(600)
	var in []catalog.Ref
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("p%04d", rng.IntN(3000))
		if rng.IntN(4) == 0 { // stretches of sorted input
			id = fmt.Sprintf("p%04d", 500+i)
		}
		if rng.IntN(8) == 0 { // long ids: entries of many sizes
			id += string(bytes.Repeat([]byte{'x'}, rng.IntN(300)))
		}
		in = append(in, catalog.Ref{ID: []byte(id), Hash: h(id), Line: int32(i + 2)})
	}
	if seed%3 == 0 {
		slices.SortStableFunc(in, func(a, b catalog.Ref) int { return bytes.Compare(a.ID, b.ID) })
		for i := range in {
			in[i].Line = int32(i + 2)
		}
	}
	return in
}

// wantSorted is in sorted by (id, line), with its duplicates: every row
// whose id came before, with the line of the id's first row, by line.
func wantSorted(in []catalog.Ref) ([]catalog.Ref, []Duplicate) {
	want := slices.Clone(in)
	slices.SortStableFunc(want, func(a, b catalog.Ref) int { return bytes.Compare(a.ID, b.ID) })
	firstLine := map[string]int{}
	var dups []Duplicate
	for _, r := range in {
		if f, ok := firstLine[string(r.ID)]; ok {
			dups = append(dups, Duplicate{ID: string(r.ID), First: f, Second: int(r.Line)})
		} else {
			firstLine[string(r.ID)] = int(r.Line)
		}
	}
	return want, dups
}

func walk(t *testing.T, it catalog.RefIterator) []catalog.Ref {
	t.Helper()
	var got []catalog.Ref
	for {
		r, err := it.NextRef()
		if err == io.EOF {
			return got
		}
		require.NoError(t, err)
		got = append(got, catalog.Ref{ID: bytes.Clone(r.ID), Hash: r.Hash, Line: r.Line})
	}
}

// The sorter yields every entry sorted by (id, line), whatever the input
// order, batch size, block size and memory budget (in memory, or spilled to
// disk after every batch), and reports the duplicates whose later row comes
// first in the file, with the line of the id's first row, and counts them all.
func TestSorterProperty(t *testing.T) {
	t.Parallel()
	type config struct {
		name     string
		opts     SortOptions
		block    int
		maxBatch int
	}
	tmp := t.TempDir()
	configs := []config{
		{name: "memory", opts: SortOptions{}, block: runBlock, maxBatch: 40},
		{name: "memory, small blocks", opts: SortOptions{MaxDuplicates: 3}, block: 64, maxBatch: 40},
		{name: "spill every batch", opts: SortOptions{MemoryBytes: 1, TempDir: tmp}, block: 64, maxBatch: 40},
		{name: "spill now and then", opts: SortOptions{MemoryBytes: 2048, TempDir: tmp, MaxDuplicates: 5}, block: 256, maxBatch: 100},
	}
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			for seed := uint64(0); seed < 150; seed++ {
				in := sorterCase(seed)
				rng := rand.New(rand.NewPCG(seed, 4))
				s := newSorter(c.opts, 1+rng.IntN(c.maxBatch), c.block)
				for _, r := range in {
					s.Add(r.ID, r.Hash, r.Line)
				}
				require.NoError(t, s.Finish())
				require.NoError(t, s.Finish(), "Finish twice")
				want, wantDups := wantSorted(in)
				max := c.opts.MaxDuplicates
				if max == 0 {
					max = DefaultMaxDuplicates
				}
				dups, total := s.Duplicates()
				require.Equal(t, int64(len(wantDups)), total, "seed %d", seed)
				require.Equal(t, nonNil(wantDups[:min(max, len(wantDups))]), nonNil(dups), "seed %d", seed)
				for pass := 0; pass < 2; pass++ {
					got := walk(t, s.Iter())
					if len(want) == 0 {
						require.Empty(t, got)
						continue
					}
					require.Equal(t, want, got, "seed %d pass %d", seed, pass)
				}
				require.Equal(t, int64(len(in)), s.Len())
				// The index the sorter writes is the one an IndexWriter
				// writes of the same walk.
				var got bytes.Buffer
				n, err := s.WriteIndex(&got)
				if len(wantDups) > 0 {
					require.Error(t, err, "no index of duplicates")
				} else {
					require.NoError(t, err)
					require.Equal(t, int64(len(in)), n)
					var want bytes.Buffer
					iw := catalog.NewIndexWriter(&want)
					for _, r := range walk(t, s.Iter()) {
						require.NoError(t, iw.AddRef(r.ID, r.Hash))
					}
					require.NoError(t, iw.Close())
					require.Equal(t, want.Bytes(), got.Bytes(), "seed %d", seed)
				}
				require.NoError(t, s.Close())
				require.NoError(t, s.Close(), "Close twice")
			}
		})
	}
}

func nonNil(d []Duplicate) []Duplicate {
	if d == nil {
		return []Duplicate{}
	}
	return d
}

// Over its budget the sorter writes runs to a file that no one else can
// see (it is unlinked at once), keeps its memory near the budget, and still
// yields every entry in order; sorted input stays one run.
func TestSorterSpillsToDisk(t *testing.T) {
	t.Parallel()
	for _, shuffle := range []bool{false, true} {
		dir := t.TempDir()
		const n = 20000
		ids := make([][]byte, n)
		for i := range ids {
			ids[i] = fmt.Appendf(nil, "SKU-%08d-%s", i*7, bytes.Repeat([]byte{'z'}, 40))
		}
		if shuffle {
			rng := rand.New(rand.NewPCG(1, 2))
			rng.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		}
		const budget = 64 << 10
		s := newSorter(SortOptions{MemoryBytes: budget, TempDir: dir}, 500, 4096)
		for i, id := range ids {
			s.Add(id, h(string(id)), int32(i+2))
		}
		require.NoError(t, s.Finish())
		spilled, times := s.Spilled()
		require.Greater(t, spilled, int64(budget), "shuffle %v", shuffle)
		require.Greater(t, times, 1)
		require.LessOrEqual(t, s.memBytes, int64(budget+4096), "in-memory runs after spilling")
		if !shuffle {
			require.Len(t, s.runs, 1, "sorted input is one run")
		}
		left, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, left, "the spill file is unlinked")
		got := walk(t, s.Iter())
		require.Len(t, got, n)
		for i := 1; i < n; i++ {
			require.Negative(t, bytes.Compare(got[i-1].ID, got[i].ID))
		}
		dups, total := s.Duplicates()
		require.Empty(t, dups)
		require.Zero(t, total)
		require.NoError(t, s.Close())
		_, err = s.Iter().NextRef()
		require.Error(t, err, "closed")
	}
}

// A spill that cannot be written fails Finish with the reason.
func TestSorterSpillFailure(t *testing.T) {
	t.Parallel()
	s := newSorter(SortOptions{MemoryBytes: 1, TempDir: filepath.Join(t.TempDir(), "missing")}, 10, 64)
	for i := 0; i < 100; i++ {
		id := fmt.Appendf(nil, "p%03d", 99-i)
		s.Add(id, h(string(id)), int32(i+2))
	}
	err := s.Finish()
	require.ErrorContains(t, err, "sort spill file")
	require.NoError(t, s.Close())
}

// A full disk is ErrSortSpaceFull (the diff rejects the snapshot: a retry
// would fill the same space again).
func TestSorterSpaceFull(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	s := newSorter(SortOptions{MemoryBytes: 1}, 10, 64)
	s.createSpill = func() (*os.File, error) { return os.OpenFile("/dev/full", os.O_RDWR, 0) }
	for i := 0; i < 100; i++ {
		id := fmt.Appendf(nil, "p%03d", 99-i)
		s.Add(id, h(string(id)), int32(i+2))
	}
	require.ErrorIs(t, s.Finish(), ErrSortSpaceFull)
	require.NoError(t, s.Close())
}

// Close before Finish stops the background work.
func TestSorterCloseEarly(t *testing.T) {
	t.Parallel()
	s := NewSorter(SortOptions{})
	s.Add([]byte("a"), h("a"), 2)
	require.NoError(t, s.Close())
	require.Error(t, s.Finish())
}

// Ids of any bytes sort in byte order: prefixes of each other, zero bytes
// (the sort keys are zero-padded), ids alike in their first 8 distinguishing
// bytes, long shared prefixes.
func TestSorterByteOrder(t *testing.T) {
	t.Parallel()
	alphabet := []byte{0x00, 0x01, 'a', 0xff}
	for seed := uint64(0); seed < 100; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		prefix := bytes.Repeat([]byte{'P'}, rng.IntN(20))
		var in []catalog.Ref
		for i := 0; i < 1+rng.IntN(400); i++ {
			id := bytes.Clone(prefix)
			for n := rng.IntN(14); n > 0; n-- {
				id = append(id, alphabet[rng.IntN(len(alphabet))])
			}
			if len(id) == 0 {
				id = []byte{'a'}
			}
			in = append(in, catalog.Ref{ID: id, Hash: h(string(id)), Line: int32(i + 2)})
		}
		s := newSorter(SortOptions{}, 1+rng.IntN(500), 128)
		for _, r := range in {
			s.Add(r.ID, r.Hash, r.Line)
		}
		require.NoError(t, s.Finish())
		want, wantDups := wantSorted(in)
		require.Equal(t, want, walk(t, s.Iter()), "seed %d", seed)
		dups, total := s.Duplicates()
		require.Equal(t, int64(len(wantDups)), total)
		require.Equal(t, nonNil(wantDups[:min(len(wantDups), DefaultMaxDuplicates)]), nonNil(dups), "seed %d", seed)
		require.NoError(t, s.Close())
	}
}

func h(s string) catalog.Hash { return catalog.HashAttributes([]byte(s)) }
