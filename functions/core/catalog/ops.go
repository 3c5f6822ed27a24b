package catalog

import "time"

// Fence is a retailer's generation counters on its shard.
type Fence struct {
	Reserved int64 // the newest generation reserved
	Latest   int64 // the fencing token: the newest generation that took over
	Applied  int64 // the newest applied generation (the baseline), 0 when none
	// AppliedProducts is the applied generation's product count.
	AppliedProducts int64
}

// Progress is what a generation has done beyond its status: when it last
// moved, which chunks are in, and what the stuck-generation sweeper did.
type Progress struct {
	StateChangedAt time.Time
	LastChunkAt    *time.Time // the newest chunk applied, nil when none
	AppliedSeqs    []int      // the chunks applied, in order
	Redrives       int        // how many times the sweeper re-drove it
	LastRedriveAt  *time.Time
}

// LastMoved is the last time the generation made progress: a state change,
// a chunk applied, or a re-drive (which restarts the clock).
func (p Progress) LastMoved() time.Time {
	t := p.StateChangedAt
	for _, u := range []*time.Time{p.LastChunkAt, p.LastRedriveAt} {
		if u != nil && u.After(t) {
			t = *u
		}
	}
	return t
}

// Applied reports whether chunk seq is applied.
func (p Progress) Applied(seq int) bool {
	lo, hi := 0, len(p.AppliedSeqs)
	for lo < hi {
		m := (lo + hi) / 2
		if p.AppliedSeqs[m] < seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo < len(p.AppliedSeqs) && p.AppliedSeqs[lo] == seq
}

// CatalogRow is a product's row as the writer holds it, tombstones included.
type CatalogRow struct {
	Attributes []byte // JSON object; nil for a tombstone
	Generation int64  // the generation that wrote it (or deleted it)
	Deleted    bool
	UpdatedAt  time.Time
}

// ReplicaHealth is what the storefront's read replicas of a retailer's
// shard look like to this process.
type ReplicaHealth struct {
	Replicas, Down, Lagging int
	// MaxLag is the staleness bound beyond which a replica is skipped.
	MaxLag time.Duration
}

// StalledGeneration is a generation with work left that has not moved
// since a time: the stuck-generation sweeper's candidate.
type StalledGeneration struct {
	RetailerID  string
	Generation  int64
	State       State
	Confirmed   bool  // a held generation its retailer confirmed (its diff must run again)
	ChunksTotal int   // the chunks its diff planned (applying)
	Changed     int64 // rows it inserts, updates and deletes (which apply queue its chunks take)
	Redrives    int   // how many times the sweeper re-drove it already
	LastMoved   time.Time
}
