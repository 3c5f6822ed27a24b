package message

import (
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// SnapshotStatus is the contract's JSON of one upload's state (DESIGN 5): the
// status routes answer it and every catalog.snapshot.* event carries it.
type SnapshotStatus struct {
	RetailerID   string       `json:"retailer_id"`
	Generation   int64        `json:"generation"`
	State        string       `json:"state"`
	ReceivedAt   *time.Time   `json:"received_at"`
	AppliedAt    *time.Time   `json:"applied_at"`
	SupersededBy *int64       `json:"superseded_by"`
	Error        *StatusError `json:"error"`
	Changes      Changes      `json:"changes"`
	Chunks       Chunks       `json:"chunks"`
	// Mode is where the content came from: "full" (an upload), "delta" (a
	// delta upload laid over the catalog before it) or "rollback" (the
	// catalog of SourceGeneration, null otherwise; DESIGN 13).
	Mode             string `json:"mode"`
	SourceGeneration *int64 `json:"source_generation"`
	// Undoes, on the rollback the pipeline made to undo a generation
	// rejected half way (I10), names that generation.
	Undoes *int64 `json:"undoes,omitempty"`
	// DryRun: a preview, which never writes to the catalog (DESIGN 13).
	DryRun bool `json:"dry_run"`
}

// StatusError says why a snapshot was rejected or held.
type StatusError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    *int   `json:"line"`
	// Problems of a rejected snapshot: up to the first 100 in line order
	// (DESIGN 4), the first being Code, Message and Line; absent for holds.
	Problems []catalog.Problem `json:"problems,omitempty"`
	// MoreProblems says the file has problems past the listed ones.
	MoreProblems bool `json:"more_problems,omitempty"`
}

// Changes are the diff's counts against the applied baseline.
type Changes struct {
	Inserted  int64 `json:"inserted"`
	Updated   int64 `json:"updated"`
	Deleted   int64 `json:"deleted"`
	Unchanged int64 `json:"unchanged"`
}

// Chunks is the apply progress.
type Chunks struct {
	Total   int `json:"total"`
	Applied int `json:"applied"`
}

// StatusOf renders a generation's status.
func StatusOf(g catalog.GenerationStatus) SnapshotStatus {
	s := SnapshotStatus{
		RetailerID: g.RetailerID, Generation: g.Generation, State: string(g.State),
		ReceivedAt: utc(g.ReceivedAt), AppliedAt: utc(g.AppliedAt), SupersededBy: g.SupersededBy,
		Changes: Changes{Inserted: g.Inserted, Updated: g.Updated, Deleted: g.Deleted, Unchanged: g.Unchanged},
		Chunks:  Chunks{Total: g.ChunksTotal, Applied: g.ChunksApplied},
		Mode:    g.Mode, SourceGeneration: g.SourceGeneration, Undoes: g.Undoes, DryRun: g.DryRun,
	}
	if s.Mode == "" {
		s.Mode = catalog.ModeFull
	}
	if g.ErrorCode != "" {
		s.Error = &StatusError{Code: g.ErrorCode, Message: g.ErrorMessage, Problems: g.Problems, MoreProblems: g.MoreProblems}
		if g.ErrorLine > 0 {
			line := g.ErrorLine
			s.Error.Line = &line
		}
	}
	return s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
