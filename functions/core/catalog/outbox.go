package catalog

import "time"

// OutboxEntry is one change event waiting in a shard's outbox (DESIGN 8):
// the changes of a chunk, or a generation's state change.
type OutboxEntry struct {
	ID         int64
	Type       string // "catalog.changes" or "catalog.snapshot.<state>"
	RetailerID string
	Generation int64
	// For catalog.changes: the chunk; the object its ops came from and that
	// object's hex SHA-256 ("" for a replayed chunk: the relay finds its
	// change object); how many products it changed; and the ids of its ops
	// that changed nothing, which the change object leaves out.
	Seq       int
	ObjectKey string
	SHA256    string
	Changed   int
	Unchanged []string
	// For catalog.snapshot.*: the generation as it was right after the change.
	Status *GenerationStatus
	// EventTime is when the change committed; CreatedAt when the row was
	// written (later for a replay).
	EventTime, CreatedAt time.Time
	// Attempts counts the failed publishes of the event so far.
	Attempts int
	// Unreadable says why the row cannot be read as an event ("" when it
	// can): its status did not decode. Such a row can never be published.
	Unreadable string
}

// Replayed reports whether the entry is a replay of a chunk whose change
// object the relay has to find.
func (e OutboxEntry) Replayed() bool { return e.Status == nil && e.ObjectKey == "" }

// OutboxFilter picks the outbox entries a relay pass takes.
type OutboxFilter struct {
	RetailerID string        // only this retailer's ("" any)
	OlderThan  time.Duration // only entries written at least this long ago (0 any)
}

// OutboxClaim is a batch of outbox entries leased to one relay: no other
// relay takes them until the lease ends or the claim is settled.
type OutboxClaim struct {
	// Token identifies the claim; a settle names it.
	Token   int64
	Entries []OutboxEntry // oldest first
}

// OutboxSettlement is what became of the entries of a claim.
type OutboxSettlement struct {
	// Done are the entries published, or with nothing to publish: deleted.
	Done []int64
	// Failed are the entries not published, each released or parked.
	Failed []OutboxFailure
}

// OutboxFailure is an entry of a claim that was not published.
type OutboxFailure struct {
	ID    int64
	Error string // why ("" keeps the last error recorded); bounded by the store
	// Counted: the failure counts against the entry (Attempts + 1). Not
	// counted: nothing is known of the entry (the topic was unreachable,
	// or the caller only looked).
	Counted bool
	// Park sets the entry aside: kept, never claimed again until an
	// operator unparks it.
	Park bool
	// RetryAfter is how long the entry stays leased away before it may be
	// claimed again (0: at once).
	RetryAfter time.Duration
}

// OutboxHealth is the state of a shard's outbox.
type OutboxHealth struct {
	Pending int64         // entries waiting to be published (parked ones not included)
	Oldest  time.Duration // how long the oldest pending entry has waited (0: none)
	Parked  int64         // entries set aside
}

// ParkedEvent is an outbox entry set aside because it could not be
// published (DESIGN 8, "Bounds").
type ParkedEvent struct {
	Shard      int
	ID         int64 // the outbox row, on its shard
	Type       string
	RetailerID string
	Generation int64
	Seq        int // the chunk (catalog.changes)
	Attempts   int
	LastError  string
	CreatedAt  time.Time
	ParkedAt   time.Time
}
