package extsort

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

const benchEntries = 200000

func benchIDs(shuffle bool) [][]byte {
	ids := make([][]byte, benchEntries)
	for i := range ids {
		ids[i] = []byte(fmt.Sprintf("SKU-%010d", 1000000+i*97))
	}
	if shuffle {
		rng := rand.New(rand.NewPCG(1, 2))
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	}
	return ids
}

// cpuTime is the process's user + system time: on a shared machine it
// moves far less than the wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func benchSort(b *testing.B, shuffle bool) {
	ids := benchIDs(shuffle)
	var h catalog.Hash
	b.ReportAllocs()
	cpu0 := cpuTime()
	defer func() {
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*benchEntries), "cpu-ns/entry")
	}()
	for b.Loop() {
		s := NewSorter(SortOptions{})
		for i, id := range ids {
			s.Add(id, h, int32(i+2))
		}
		if err := s.Finish(); err != nil {
			b.Fatal(err)
		}
		it := s.Iter()
		for {
			if _, err := it.NextRef(); err == io.EOF {
				break
			}
		}
		s.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEntries), "ns/entry")
}

// BenchmarkSorterSorted collects, checks and walks entries of sorted input.
func BenchmarkSorterSorted(b *testing.B) { benchSort(b, false) }

// BenchmarkSorterShuffled is BenchmarkSorterSorted on shuffled input.
func BenchmarkSorterShuffled(b *testing.B) { benchSort(b, true) }

// BenchmarkMergeWalk merges sorted entries with a baseline index (3% of the
// ids changed) and writes the new index in the same walk.
func BenchmarkMergeWalk(b *testing.B) {
	ids := benchIDs(false)
	s := NewSorter(SortOptions{})
	var base bytes.Buffer
	iw := catalog.NewIndexWriter(&base)
	for i, id := range ids {
		h := catalog.HashAttributes(id)
		if i%33 == 0 {
			h[0]++
		}
		s.Add(id, catalog.HashAttributes(id), int32(i+2))
		iw.AddRef(id, h)
	}
	iw.Close()
	s.Finish()
	b.SetBytes(int64(base.Len()))
	b.ReportAllocs()
	cpu0 := cpuTime()
	defer func() {
		b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*benchEntries), "cpu-ns/entry")
	}()
	for b.Loop() {
		var out bytes.Buffer
		plan, err := catalog.MergeRefs(s.Iter(), catalog.NewIndexReader(bytes.NewReader(base.Bytes())), nil, catalog.NewIndexWriter(&out))
		if err != nil || plan.Updated == 0 {
			b.Fatal(err, plan.Updated)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchEntries), "ns/entry")
}

// BenchmarkIndexFromSorter writes the index of sorted entries: the
// sorter's copy of its run (WriteIndex) against an IndexWriter fed by a
// walk, as the diff did before.
func BenchmarkIndexFromSorter(b *testing.B) {
	ids := benchIDs(true)
	s := NewSorter(SortOptions{})
	defer s.Close()
	for i, id := range ids {
		s.Add(id, catalog.HashAttributes(id), int32(i+2))
	}
	if err := s.Finish(); err != nil {
		b.Fatal(err)
	}
	for _, how := range []string{"WriteIndex", "IndexWriter"} {
		b.Run(how, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				var out bytes.Buffer
				if how == "WriteIndex" {
					if _, err := s.WriteIndex(&out); err != nil {
						b.Fatal(err)
					}
					continue
				}
				iw := catalog.NewIndexWriter(&out)
				it := s.Iter()
				for {
					r, err := it.NextRef()
					if err == io.EOF {
						break
					}
					iw.AddRef(r.ID, r.Hash)
				}
				iw.Close()
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*benchEntries), "cpu-ns/entry")
		})
	}
}
