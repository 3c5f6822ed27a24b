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
}

// Replayed reports whether the entry is a replay of a chunk whose change
// object the relay has to find.
func (e OutboxEntry) Replayed() bool { return e.Status == nil && e.ObjectKey == "" }

// OutboxFilter picks the outbox entries a relay pass takes.
type OutboxFilter struct {
	RetailerID string        // only this retailer's ("" any)
	OlderThan  time.Duration // only entries written at least this long ago (0 any)
}
