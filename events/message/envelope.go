package message

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Event types on the change-events topic (DESIGN 8).
const (
	// TypeChanges: a chunk's committed changes, by reference to a change object.
	TypeChanges = "catalog.changes"
	// Snapshot lifecycle events, each written in the transaction of its state change.
	TypeSnapshotApplied    = "catalog.snapshot.applied"
	TypeSnapshotRejected   = "catalog.snapshot.rejected"
	TypeSnapshotHeld       = "catalog.snapshot.held"
	TypeSnapshotSuperseded = "catalog.snapshot.superseded"
)

// MaxEnvelopeBytes bounds an envelope's JSON (DESIGN 8, I12), well under
// SNS's 256 KiB with its attributes: a status is at most 64 KiB, and a
// chunk's changes go by claim check. The relay parks an event over it.
const MaxEnvelopeBytes = 200 << 10

// SnapshotTypePrefix starts the type of every snapshot lifecycle event.
const SnapshotTypePrefix = "catalog.snapshot."

// SnapshotType is the event type of a generation entering state ("applied",
// "rejected", "held", "superseded"); "" for a state that has no event.
func SnapshotType(state string) string {
	switch state {
	case "applied", "rejected", "held", "superseded":
		return SnapshotTypePrefix + state
	}
	return ""
}

// Message attributes every envelope is published with, so that a
// subscription can filter on them without reading the body.
const (
	AttrType       = "type"
	AttrRetailerID = "retailer_id"
)

// Envelope is one message on the change-events topic: the body of an SNS
// message and, with raw message delivery, of the SQS message each consumer
// receives. A catalog.changes envelope is a claim check: the changes are in
// Object (JSON lines in the chunk object format, see ChangeObject); a
// catalog.snapshot.* envelope carries the status of the upload.
type Envelope struct {
	// ID is stable across retries and replays: the same change or state
	// change always has the same id (EventID).
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Time       time.Time `json:"time"` // when the change committed
	RetailerID string    `json:"retailer_id"`
	Generation int64     `json:"generation"`

	// catalog.changes
	Seq    *int   `json:"seq,omitempty"`    // the chunk
	Count  int    `json:"count,omitempty"`  // lines in Object
	Object string `json:"object,omitempty"` // key of the change object in the catalog bucket
	SHA256 string `json:"sha256,omitempty"` // hex SHA-256 of the change object

	// catalog.snapshot.*
	Status *SnapshotStatus `json:"status,omitempty"`
}

// EventID is the id of an event: "{retailer}:{generation}:changes:{seq}" for
// the changes of a chunk, "{retailer}:{generation}:{state}" for a lifecycle
// event. Retailer ids hold no ':' ([A-Za-z0-9_-]), so ids never collide.
func EventID(eventType, retailerID string, generation int64, seq int) string {
	if eventType == TypeChanges {
		return retailerID + ":" + strconv.FormatInt(generation, 10) + ":changes:" + strconv.Itoa(seq)
	}
	return retailerID + ":" + strconv.FormatInt(generation, 10) + ":" + strings.TrimPrefix(eventType, SnapshotTypePrefix)
}

// Validate checks that an envelope has what its type needs.
func (e Envelope) Validate() error {
	if e.ID == "" || e.RetailerID == "" || e.Generation <= 0 || e.Time.IsZero() {
		return fmt.Errorf("event %q: id, retailer_id, generation and time are required", e.ID)
	}
	switch {
	case e.Type == TypeChanges:
		if e.Seq == nil || *e.Seq < 0 || e.Object == "" || len(e.SHA256) != 64 || e.Count <= 0 {
			return fmt.Errorf("event %s: a %s event needs seq, a positive count, object and sha256", e.ID, e.Type)
		}
	case strings.HasPrefix(e.Type, SnapshotTypePrefix) && SnapshotType(strings.TrimPrefix(e.Type, SnapshotTypePrefix)) == e.Type:
		if e.Status == nil {
			return fmt.Errorf("event %s: a %s event needs the upload's status", e.ID, e.Type)
		}
	default:
		return fmt.Errorf("event %s: unknown type %q", e.ID, e.Type)
	}
	return nil
}

// A change object holds one JSON line per product a chunk actually changed,
// in the chunk object's line format (ChunkOp: "op", "product_id", and for an
// upsert "hash" and "attributes"). A chunk whose every op changed its
// product is its own change object; AppendChunkLine writes the lines and
// ReadChunk reads them.
