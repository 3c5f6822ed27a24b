package catalog

import (
	"errors"
	"hash/fnv"
)

// The pipeline's sizes: what every configuration (the functions'
// environment, the local stack, the benches) takes when it says nothing.
const (
	// MaxChunkRows is the most row operations of one chunk message, and
	// the default chunk size; a chunk object is also bounded in bytes
	// (DefaultChunkBytes).
	MaxChunkRows = 5000
	// DefaultInflightCap is how many chunks of one retailer may be in
	// flight at once: its FIFO message groups (I9).
	DefaultInflightCap = 20
	// DefaultLargeThresholdRows is how many changed rows send a snapshot
	// to the large apply queue.
	DefaultLargeThresholdRows = 100000
)

// ErrSuperseded reports that a newer generation has arrived: the caller
// stops without writing.
var ErrSuperseded = errors.New("superseded by a newer generation")

// DiffDecision tells the diff what to do with an upload.
type DiffDecision struct {
	Proceed bool   // false: nothing to do (duplicate event, superseded, finished, unknown)
	Reason  string // why not, for the log
	// For Proceed:
	Format           string
	Confirmed        bool  // a held snapshot the retailer confirmed
	Baseline         int64 // the applied generation to diff against (0: none)
	BaselineProducts int64 // its product count
	// BaselineNames are the baseline's attribute names (nil: unknown).
	BaselineNames []string
	Stopped       []int64 // newer generations that may have written rows (I5); set by TakeOver
	// ETag is the version of the upload pinned for the generation, "" until
	// the first read pins one; every read of the upload asks for it.
	ETag string
}

// Counts are the diff's figures for a generation.
type Counts struct {
	Inserted, Updated, Deleted, Unchanged, Products int64
	// AttributeNames are the snapshot's attribute names (the union over its
	// products, sorted), kept with the generation: the next snapshot's
	// mass_update hold compares its own with the baseline's.
	AttributeNames []string
	// Bytes is the size of the upload as stored (for the usage counters).
	Bytes int64
}

// ApplyOutcome says what applying one chunk did.
type ApplyOutcome int

// Outcomes of applying a chunk.
const (
	ChunkApplied    ApplyOutcome = iota // the chunk's rows were written and counted
	ChunkDuplicate                      // the chunk was counted before: nothing written
	ChunkSuperseded                     // a newer generation arrived: nothing written (I4)
)

// String names an outcome for logs and test failures.
func (o ApplyOutcome) String() string {
	switch o {
	case ChunkApplied:
		return "applied"
	case ChunkDuplicate:
		return "duplicate"
	case ChunkSuperseded:
		return "superseded"
	}
	return "unknown"
}

// ApplyResult is what one chunk did.
type ApplyResult struct {
	Outcome           ApplyOutcome
	Written           int64 // rows actually written (upserted or deleted)
	GenerationApplied bool  // this chunk was the generation's last
}

// UnfinishedGeneration is a generation whose work a lost message would leave
// stuck: still diffing or applying, or a confirmed hold.
type UnfinishedGeneration struct {
	RetailerID string
	Generation int64
	ObjectKey  string
}

// ShardFor places a retailer on one of shards by a stable hash of its id.
func ShardFor(retailerID string, shards int) int {
	h := fnv.New32a()
	h.Write([]byte(retailerID))
	return int(h.Sum32() % uint32(shards))
}

// Problem is one problem of a rejected snapshot, as the status route lists
// it (error.problems).
type Problem struct {
	Code    string `json:"code"`
	Line    int    `json:"line"` // 1-based, 0 when not about a line
	Message string `json:"message"`
}

// Rejection is why a snapshot was rejected (I7): its first problem, and up
// to the first 100 problems in line order.
type Rejection struct {
	Code    string
	Message string
	Line    int
	// Problems lists the problems, the first one included (empty: only
	// the first is known).
	Problems []Problem
	// More says problems past the listed ones exist.
	More bool
}
