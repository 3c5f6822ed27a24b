package main

import (
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Collection's default tombstone retention is the chunk objects' (DESIGN
// 14): a tombstone goes only once no chunk object, and so no message, of an
// older generation can still exist to carry a write it would have fenced.
func TestTombstonesOutliveTheChunks(t *testing.T) {
	t.Parallel()
	if chunks := time.Duration(claimCheckDays) * 24 * time.Hour; catalog.DefaultTombstoneAfter < chunks {
		t.Fatalf("tombstones are collected after %v, but chunk objects live %v", catalog.DefaultTombstoneAfter, chunks)
	}
}
