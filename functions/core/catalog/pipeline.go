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

// ErrRefused reports that the database refuses a write for its content
// (a value it cannot hold, a constraint it breaks): trying again writes
// nothing more. A chunk refused on every try ends its generation
// apply_failed (I10).
var ErrRefused = errors.New("refused by the database")

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
	// BaselineObjectKey is the object the baseline's content was read from
	// (set by TakeOver): its upload, or its source's for a rollback. It is
	// kept for as long as it is the baseline's, for an undo to read.
	BaselineObjectKey string
	// BaselineKeys are every object the baseline's catalog is read from
	// (its chain, set by TakeOver): kept for an undo or a rollback to it.
	BaselineKeys []string
	Stopped      []int64 // newer generations that may have written rows (I5); set by TakeOver
	// ETag is the version of the upload pinned for the generation, "" until
	// the first read pins one; every read of the upload asks for it.
	ETag string
	// ObjectKey is the object the generation's content is read from: its
	// own upload, or for a rollback its source's ("" for the empty
	// catalog, a rollback to generation 0).
	ObjectKey string
	// Attempt counts the diff runs of the generation, this one included
	// (since its confirmation, for a held one); LastFailure is why the last
	// failed run failed, when it could say.
	Attempt     int
	LastFailure string
	// Undoes is the generation whose half-applied writes this rollback
	// undoes (0: not an undo).
	Undoes int64
	// Mode is where the generation's content comes from (ModeFull,
	// ModeDelta, ModeRollback); Source is a rollback's source generation.
	Mode   string
	Source int64
	// Offboarding: the empty snapshot that removes an offboarded
	// retailer's catalog; never given up (it is re-driven until it applies).
	Offboarding bool
	// Resumed: the generation was already applying when this run began (a
	// re-run re-sends its chunks; some may have changed the catalog).
	Resumed bool
	// DryRun: a preview (DESIGN 13): diffed against Baseline, never taking
	// over, holding or writing to the catalog.
	DryRun bool
	// Undo, when !Proceed, is the rollback reserved because the decision
	// rejected the generation (a held upload replaced) and the catalog
	// would otherwise keep a mix: its diff job is the caller's to send.
	Undo Undo
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
	// EmptyPlan, for a generation applied without chunks (it changes
	// nothing), records its plan as empty (its objects written) in the
	// same step that applies it, so that an applied status always comes
	// with its plan (DESIGN 13).
	EmptyPlan bool
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

// MaxProblems is how many problems a status lists (DESIGN 4): the first
// ones, in line order.
const MaxProblems = 100

// Rejection is why a snapshot was rejected (I7): its first problem, and up
// to the first MaxProblems problems in line order.
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

// Generation modes: where a generation's content comes from (DESIGN 13).
const (
	// ModeFull: a full snapshot the retailer uploaded.
	ModeFull = "full"
	// ModeRollback: the catalog of an earlier applied generation (its
	// SourceGeneration; 0 is the empty catalog), read from that
	// generation's upload.
	ModeRollback = "rollback"
	// ModeDelta: a delta upload, laid over the catalog the generations
	// before it leave (DESIGN 13).
	ModeDelta = "delta"
)

// ChainLink is one object of the chain whose merge is a generation's
// catalog (DESIGN 13): the newest full snapshot at or before it, then each
// delta applied after it, oldest first.
type ChainLink struct {
	Generation int64
	Mode       string // ModeFull (first link only) or ModeDelta
	Format     string
	ObjectKey  string // "" for the empty catalog (an offboarding)
	ETag       string // the version pinned when it was read ("" unknown)
}

// StoredProduct is a product as the catalog holds it: its attributes as
// the database prints them (canonicalize before comparing) and their hash.
type StoredProduct struct {
	ProductID  string
	Attributes []byte
	Hash       Hash
}

// Failure is why a generation cannot be finished (I10): one of
// FailureCodes and a message for people.
type Failure struct {
	Code    string
	Message string
}

// Undo is what ending a generation that cannot be finished did (I10).
type Undo struct {
	// Rejected: the generation was rejected now (false: it had ended
	// before, or it is an offboarding, which is never given up).
	Rejected bool
	// Generation is the rollback generation that returns the catalog to
	// Source, the last applied generation, reserved in the same
	// transaction as the rejection; 0 when nothing of the rejected
	// generation (or of a generation it stopped) can have been written, or
	// a newer upload that will repair it has arrived. Its diff job is the
	// caller's to send.
	Generation int64
	Source     int64
}
