package upload

import (
	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// The status JSON of the routes is the one catalog.snapshot.* events carry:
// its types live in package events.
type (
	// Status is the contract's JSON of one upload's state.
	Status = message.SnapshotStatus
	// StatusError says why a snapshot was rejected or held.
	StatusError = message.StatusError
	// Changes are the diff's counts against the applied baseline.
	Changes = message.Changes
	// Chunks is the apply progress.
	Chunks = message.Chunks
)

// StatusJSON renders a generation's status.
func StatusJSON(g catalog.GenerationStatus) Status { return message.StatusOf(g) }
