package snapshot

import (
	"bytes"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

const benchRows = 20000

// reportCPU reports, when the benchmark ends, the process's user + system
// time per row since it was called: on a shared machine it moves far less
// than the wall time.
func reportCPU(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64((cpu()-start).Nanoseconds())/float64(b.N*benchRows), "cpu-ns/row")
	}
}

func benchRead(b *testing.B, data []byte) { benchReadOpt(b, data, false) }

func benchReadOpt(b *testing.B, data []byte, reuse bool) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	defer reportCPU(b)()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), FormatAuto, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		r.ReuseAttributes = reuse
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchRows {
			b.Fatalf("%d rows", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
}

// BenchmarkReadCSV reads ~8 MB of generated CSV (12 typical retail columns).
func BenchmarkReadCSV(b *testing.B) { benchRead(b, genCSV(benchRows)) }

// BenchmarkReadCSVReuse is BenchmarkReadCSV with Reader.ReuseAttributes.
func BenchmarkReadCSVReuse(b *testing.B) { benchReadOpt(b, genCSV(benchRows), true) }

// BenchmarkReadJSONL reads the same products as JSON Lines.
func BenchmarkReadJSONL(b *testing.B) { benchRead(b, genJSONL(benchRows)) }

// BenchmarkReadCSVGzip is bound by decompression; MB/s is of decompressed data.
func BenchmarkReadCSVGzip(b *testing.B) {
	data := genCSV(benchRows)
	z := gz(b, data)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(z), FormatAuto, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkHashAttributes hashes typical canonical attributes.
func BenchmarkHashAttributes(b *testing.B) {
	rows, _, err := readAll(genCSV(1), FormatCSV, Limits{})
	if err != nil || len(rows) != 1 {
		b.Fatal(err)
	}
	attrs := rows[0].Attributes
	b.SetBytes(int64(len(attrs)))
	b.ReportAllocs()
	for b.Loop() {
		catalog.HashAttributes(attrs)
	}
}

// BenchmarkReadCSVParallel is BenchmarkReadCSVReuse on two workers, the
// diff's pass 1 (Scan, attributes skipped, hashes kept).
func BenchmarkReadCSVParallel(b *testing.B) {
	data := genCSV(benchRows)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), FormatAuto, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		r.Workers, r.SkipAttributes = 2, true
		n := 0
		for {
			_, err := r.Scan()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchRows {
			b.Fatalf("%d rows", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchRows), "ns/row")
}

// BenchmarkSkipCSV is the diff's pass 2 for a 3% change: every row is
// split, one in 33 is parsed.
func BenchmarkSkipCSV(b *testing.B) {
	data := genCSV(benchRows)
	var lines []int32
	for i := 0; i < benchRows; i += 33 {
		lines = append(lines, int32(i+2))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		r, err := NewReader(bytes.NewReader(data), FormatAuto, Limits{})
		if err != nil {
			b.Fatal(err)
		}
		r.Lines = lines
		n := 0
		for {
			if _, err := r.Scan(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != len(lines) {
			b.Fatalf("%d rows, want %d", n, len(lines))
		}
	}
}
