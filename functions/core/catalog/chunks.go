package catalog

// Chunk limits (DESIGN 7, issue 9): a chunk closes at MaxChunkRows ops
// (pipeline.go) or when the next op would take its object over the byte
// budget, whichever comes first. A product's canonical attributes are at most 256 KiB
// (attributes_too_large), so one op never comes near the budget; an op
// larger than the budget would make a chunk of its own.
const (
	// DefaultChunkBytes is the byte budget of a chunk object: 8 MiB, ~1,600
	// bytes an op at 5,000 ops (a typical retail row is a few hundred bytes,
	// so rows, not bytes, close most chunks). The diff holds at most one
	// chunk for sending, and the apply one chunk's ops.
	DefaultChunkBytes = 8 << 20
)

// ChunkLimits bound each chunk of a generation.
type ChunkLimits struct {
	Rows  int // ops, 1..MaxChunkRows
	Bytes int // bytes of the chunk object (JSON lines)
}

func (l ChunkLimits) withDefaults() ChunkLimits {
	if l.Rows <= 0 || l.Rows > MaxChunkRows {
		l.Rows = MaxChunkRows
	}
	if l.Bytes <= 0 {
		l.Bytes = DefaultChunkBytes
	}
	return l
}

// small is the size every op is counted at unless it is recorded as larger:
// Rows ops of it fill Bytes exactly.
func (l ChunkLimits) small() int { return max(1, l.Bytes/l.Rows) }

// RowSizes keeps, from the first pass over a snapshot, the chunk-line size
// of every row larger than its limits' small size (Bytes/Rows), by line;
// every other row counts as that small size, an upper bound. So the chunks
// can be planned, exactly and before any is written, without a size per
// product: a typical snapshot records nothing, a snapshot of large rows 8
// bytes a large row.
type RowSizes struct {
	small int
	lines []int32 // ascending
	sizes []int32
}

// NewRowSizes returns an empty record for limits l.
func NewRowSizes(l ChunkLimits) *RowSizes { return &RowSizes{small: l.withDefaults().small()} }

// Add records the chunk-line size of the row on line (lines ascending, as
// the snapshot is read).
func (s *RowSizes) Add(line int32, size int) {
	if size > s.small {
		s.lines = append(s.lines, line)
		s.sizes = append(s.sizes, int32(min(size, 1<<31-1)))
	}
}

// Large is how many rows were recorded as larger than the small size.
func (s *RowSizes) Large() int { return len(s.lines) }

// PlanChunks splits a generation's ops, in the order the diff sends them
// (the upserts, by ascending line, then the deletes in the given order),
// into chunks within l, and returns the number of ops of each chunk;
// deleteLen is the size of a delete's chunk line (events.DeleteLineLen).
// The plan depends only on its inputs, so a re-run of the diff sends the
// same chunks.
func PlanChunks(l ChunkLimits, upsertLines []int32, sizes *RowSizes, deletes []string, deleteLen func(id string) int) []int {
	l = l.withDefaults()
	var plan []int
	rows, bytes := 0, 0
	add := func(size int) {
		if rows > 0 && (rows == l.Rows || bytes+size > l.Bytes) {
			plan = append(plan, rows)
			rows, bytes = 0, 0
		}
		rows++
		bytes += size
	}
	small := l.small()
	if sizes != nil {
		small = max(small, sizes.small) // what an unrecorded row may be
	}
	k := 0 // next recorded size at or after the current line
	for _, line := range upsertLines {
		size := small
		if sizes != nil {
			for k < len(sizes.lines) && sizes.lines[k] < line {
				k++
			}
			if k < len(sizes.lines) && sizes.lines[k] == line {
				size = int(sizes.sizes[k])
			}
		}
		add(size)
	}
	for _, id := range deletes {
		add(deleteLen(id))
	}
	if rows > 0 {
		plan = append(plan, rows)
	}
	return plan
}
