package catalog

import "time"

// Retailer is a registered retailer.
type Retailer struct {
	ID        string
	Shard     int
	TokenHash []byte
	Hold      HoldPolicy
	CreatedAt time.Time
	// OffboardedAt is when the retailer was offboarded (nil: active): its
	// token is revoked and its catalog removed; nothing new is accepted.
	OffboardedAt *time.Time
}

// GenerationStatus is the state of one upload, as the status route shows it.
type GenerationStatus struct {
	RetailerID    string
	Generation    int64
	State         State
	Format        string
	ObjectKey     string
	UploadExpires time.Time
	CreatedAt     time.Time
	ReceivedAt    *time.Time
	AppliedAt     *time.Time
	SupersededBy  *int64
	ErrorCode     string
	ErrorMessage  string
	ErrorLine     int
	// Problems of a rejected snapshot (empty for holds and other errors);
	// MoreProblems: problems past those exist.
	Problems      []Problem
	MoreProblems  bool
	Inserted      int64
	Updated       int64
	Deleted       int64
	Unchanged     int64
	Products      int64
	ChunksTotal   int
	ChunksApplied int
	Confirmed     bool
	// Mode is where the content came from (ModeFull, ModeDelta, ModeRollback);
	// SourceGeneration, for a rollback, the generation whose catalog it is.
	Mode             string
	SourceGeneration *int64
	// Undoes: for the rollback that undoes a rejected generation, that one.
	Undoes *int64
	// DryRun: a preview, which never writes to the catalog (DESIGN 13).
	DryRun bool
	// PlanPages is how many pages the generation's plan was written in
	// (nil: it has no plan); PlanBaseline the applied generation it was
	// computed against.
	PlanPages    *int
	PlanBaseline *int64
}

// Product is one product of the catalog as the storefront sees it.
type Product struct {
	RetailerID string
	ProductID  string
	Attributes []byte // JSON object
	Generation int64
	UpdatedAt  time.Time
}
