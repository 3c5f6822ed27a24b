package upload

import (
	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/catalog"
)

// The status JSON of the routes is the one catalog.snapshot.* events carry:
// its types live in package events.
type (
	// Status is the contract's JSON of one upload's state.
	Status = events.SnapshotStatus
	// StatusError says why a snapshot was rejected or held.
	StatusError = events.StatusError
	// Changes are the diff's counts against the applied baseline.
	Changes = events.Changes
	// Chunks is the apply progress.
	Chunks = events.Chunks
)

// StatusJSON renders a generation's status.
func StatusJSON(g catalog.GenerationStatus) Status { return events.StatusOf(g) }
