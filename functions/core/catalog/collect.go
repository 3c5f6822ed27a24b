package catalog

import "time"

// DefaultTombstoneAfter is how long after the deleting generation was
// applied its tombstones may be collected (DESIGN 14): the chunk objects'
// retention (19 days: the queues' and dead-letter queues' 14 days and a
// day, infra/storage.go), so that no message can still carry an older write.
const DefaultTombstoneAfter = 19 * 24 * time.Hour

// DefaultParkedAfter is how long a parked outbox row is kept for an
// operator's redrive before collection removes it: the 14 days a
// dead-letter queue keeps a message.
const DefaultParkedAfter = 14 * 24 * time.Hour

// CollectPolicy says what one collection of a retailer may remove.
type CollectPolicy struct {
	// AppliedBefore: tombstones go up to the newest generation applied
	// before this time (the retailer's write floor is raised to it), and
	// the chunk progress of generations finished before it.
	AppliedBefore time.Time
	// ParkedBefore: outbox rows parked before this time and never redriven.
	ParkedBefore time.Time
	// Window is how many catalog rows one batch looks at, and the most
	// chunk or outbox rows one batch deletes [10,000].
	Window int
	// RebuildAbove: the run ends by rebuilding the shard's churned indexes
	// (products', consumer_versions') whose size is past RebuildAbove times
	// a fresh build's [0: 1.2; negative: never].
	RebuildAbove float64
}

// Collected is what a collection removed.
type Collected struct {
	// Floor is the retailer's write floor after the collection: the
	// oldest generation that may still write (0 across retailers).
	Floor            int64
	Tombstones       int64 // deleted products' rows (shard)
	DirectoryEntries int64 // deleted products' directory entries (control)
	ChunkRows        int64 // finished generations' chunk progress (applied_chunks)
	OutboxRows       int64 // parked outbox rows past their retention
	ConsumerVersions int64 // consumers' versions of the collected products
	Batches          int   // transactions it took
	// IndexesRebuilt are the shard's indexes the run rebuilt (REINDEX
	// CONCURRENTLY: they were past CollectPolicy.RebuildAbove).
	IndexesRebuilt []string
	// RebuildSkipped says why the run rebuilt no index although one was
	// past the threshold ("" when none was, or it did).
	RebuildSkipped string
}

// Add sums o into c (not the floor).
func (c *Collected) Add(o Collected) {
	c.Tombstones += o.Tombstones
	c.DirectoryEntries += o.DirectoryEntries
	c.ChunkRows += o.ChunkRows
	c.OutboxRows += o.OutboxRows
	c.ConsumerVersions += o.ConsumerVersions
	c.Batches += o.Batches
}
