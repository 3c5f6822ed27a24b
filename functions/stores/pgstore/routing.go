package pgstore

import (
	"context"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// The methods below are what the handlers ask of the databases, keyed by
// retailer: each finds the retailer's shard (ForRetailer, cached) and runs
// the shard's or the control database's method of the same name. A
// retailer the registry does not know is catalog.ErrNotFound. Handlers
// declare the part they use as an interface of their own; Stores
// implements all of them.

func (s *Stores) shardOf(ctx context.Context, retailerID string) (*Shard, error) {
	_, sh, err := s.ForRetailer(ctx, retailerID)
	return sh, err
}

// Retailer returns a registered retailer as the control database has it
// now (thresholds, offboarding); catalog.ErrNotFound when unknown. Its
// shard is cached for RouteTTL (a move changes it).
func (s *Stores) Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error) {
	r, err := s.Control.Retailer(ctx, retailerID)
	if err == nil && r.Shard >= 0 && r.Shard < len(s.Shards) {
		storeRoute(&s.retailers, r)
	}
	return r, err
}

// SetHoldPolicy is Control.SetHoldPolicy.
func (s *Stores) SetHoldPolicy(ctx context.Context, retailerID string, p catalog.HoldPolicy) error {
	return s.Control.SetHoldPolicy(ctx, retailerID, p)
}

// SetToken is Control.SetToken.
func (s *Stores) SetToken(ctx context.Context, retailerID string, old, hash []byte) error {
	return s.Control.SetToken(ctx, retailerID, old, hash)
}

// Offboard revokes the retailer's token and marks it offboarded (control
// database), then reserves its offboarding generation on its shard
// (Shard.ReserveOffboarding: the shard's record, which decides) and
// returns it. The two databases cannot commit together, so the order says
// what a crash between the steps leaves: the retailer locked out (token
// revoked; the upload routes refuse its reservations, token and settings
// changes), while the shard, not knowing yet, still takes an upload
// through a URL handed out before and finishes work in flight. Both steps
// are idempotent: asking again records the offboarding on the shard and
// finishes the job.
func (s *Stores) Offboard(ctx context.Context, retailerID string, revokedHash []byte, expires time.Time) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	if err := s.Control.Offboard(ctx, retailerID, revokedHash); err != nil {
		return 0, err
	}
	gen, err := sh.ReserveOffboarding(ctx, retailerID, expires)
	return gen, movingError(err) // 429 retailer_moving while it switches shards: asking again finishes the job
}

// ShardCount is the number of shards retailers are placed on.
func (s *Stores) ShardCount() int { return len(s.Shards) }

// CreateRetailer registers a retailer; catalog.ErrConflict when it exists.
func (s *Stores) CreateRetailer(ctx context.Context, r catalog.Retailer) error {
	return s.Control.CreateRetailer(ctx, r)
}

// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
func (s *Stores) RetailerByTokenHash(ctx context.Context, hash []byte) (string, error) {
	return s.Control.RetailerByTokenHash(ctx, hash)
}

// UpdateDirectory is Control.UpdateDirectory.
func (s *Stores) UpdateDirectory(ctx context.Context, retailerID string, gen int64, ops []message.ChunkOp) error {
	return s.Control.UpdateDirectory(ctx, retailerID, gen, ops)
}

// ReserveGeneration is Shard.ReserveGeneration on the retailer's shard.
func (s *Stores) ReserveGeneration(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	gen, err := sh.ReserveGeneration(ctx, retailerID, format, expires, perHour)
	return gen, movingError(err)
}

// MarkArrived is Shard.MarkArrived on the retailer's shard. Refused
// while the retailer's move switches shards, it is catalog.ErrRateLimited
// retailer_moving: a reservation records the slots whose files arrived
// before it (upload's takeArrivedUploads) and answers 429 then, not 500;
// the arrival function's message is retried as after any error.
func (s *Stores) MarkArrived(ctx context.Context, retailerID string, gen int64, at time.Time, grace time.Duration) (catalog.State, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return "", err
	}
	state, err := sh.MarkArrived(ctx, retailerID, gen, at, grace)
	return state, movingError(err)
}

// NewerArrival is Shard.NewerArrival on the retailer's shard.
func (s *Stores) NewerArrival(ctx context.Context, retailerID string, gen int64) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	return sh.NewerArrival(ctx, retailerID, gen)
}

// Generation is Shard.Generation on the retailer's shard.
func (s *Stores) Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.GenerationStatus{}, err
	}
	return sh.Generation(ctx, retailerID, gen)
}

// Generations is Shard.Generations on the retailer's shard.
func (s *Stores) Generations(ctx context.Context, retailerID string, limit int) ([]catalog.GenerationStatus, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.Generations(ctx, retailerID, limit)
}

// GenerationsBefore is Shard.GenerationsBefore on the retailer's shard.
func (s *Stores) GenerationsBefore(ctx context.Context, retailerID string, before int64, limit int) ([]catalog.GenerationStatus, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.GenerationsBefore(ctx, retailerID, before, limit)
}

// Confirm is Shard.Confirm on the retailer's shard.
func (s *Stores) Confirm(ctx context.Context, retailerID string, gen int64) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return movingError(sh.Confirm(ctx, retailerID, gen))
}

// BeginDiff is Shard.BeginDiff on the retailer's shard.
func (s *Stores) BeginDiff(ctx context.Context, retailerID string, gen int64, etag string) (catalog.DiffDecision, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.DiffDecision{}, err
	}
	return sh.BeginDiff(ctx, retailerID, gen, etag)
}

// PinUpload is Shard.PinUpload on the retailer's shard.
func (s *Stores) PinUpload(ctx context.Context, retailerID string, gen int64, etag string) (string, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return "", err
	}
	return sh.PinUpload(ctx, retailerID, gen, etag)
}

// TakeOver is Shard.TakeOver on the retailer's shard.
func (s *Stores) TakeOver(ctx context.Context, retailerID string, gen int64) (catalog.DiffDecision, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.DiffDecision{}, err
	}
	return sh.TakeOver(ctx, retailerID, gen)
}

// Rollback is Shard.Rollback on the retailer's shard.
func (s *Stores) Rollback(ctx context.Context, retailerID string, source int64, perHour int) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	gen, err := sh.Rollback(ctx, retailerID, source, perHour)
	return gen, movingError(err)
}

// Reject is Shard.Reject on the retailer's shard.
func (s *Stores) Reject(ctx context.Context, retailerID string, gen int64, rej catalog.Rejection) (catalog.Undo, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.Undo{}, err
	}
	return sh.Reject(ctx, retailerID, gen, rej)
}

// RecordDiffFailure is Shard.RecordDiffFailure on the retailer's shard.
func (s *Stores) RecordDiffFailure(ctx context.Context, retailerID string, gen int64, reason string) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.RecordDiffFailure(ctx, retailerID, gen, reason)
}

// Hold is Shard.Hold on the retailer's shard.
func (s *Stores) Hold(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts) (catalog.Undo, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return catalog.Undo{}, err
	}
	return sh.Hold(ctx, retailerID, gen, code, message, c)
}

// StartApplying is Shard.StartApplying on the retailer's shard.
func (s *Stores) StartApplying(ctx context.Context, retailerID string, gen int64, c catalog.Counts, chunks int) error {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return err
	}
	return sh.StartApplying(ctx, retailerID, gen, c, chunks)
}

// IsLatest is Shard.IsLatest on the retailer's shard.
func (s *Stores) IsLatest(ctx context.Context, retailerID string, gen int64) (bool, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return false, err
	}
	return sh.IsLatest(ctx, retailerID, gen)
}

// ApplyChunk is Shard.ApplyChunk on the retailer's shard.
func (s *Stores) ApplyChunk(ctx context.Context, m message.ChunkMessage, ops []message.ChunkOp) (catalog.ApplyResult, error) {
	sh, err := s.shardOf(ctx, m.RetailerID)
	if err != nil {
		return catalog.ApplyResult{}, err
	}
	return sh.ApplyChunk(ctx, m, ops)
}

// ChunkCounted is Shard.ChunkCounted on the retailer's shard.
func (s *Stores) ChunkCounted(ctx context.Context, retailerID string, gen int64, seq int) (bool, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return false, err
	}
	return sh.ChunkCounted(ctx, retailerID, gen, seq)
}

// Unfinished lists, over every shard, the generations still diffing or
// applying and the confirmed holds.
func (s *Stores) Unfinished(ctx context.Context) ([]catalog.UnfinishedGeneration, error) {
	var out []catalog.UnfinishedGeneration
	for _, sh := range s.Shards {
		list, err := sh.Unfinished(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, list...)
	}
	return out, nil
}

// The storefront's reads, through the read replicas (ReaderSet).

func source(fresh bool) Source {
	if fresh {
		return WriterOnly
	}
	return AnyReader
}

// Product returns a live product from a replica of the retailer's shard
// within the staleness bound (or its writer); with fresh, from the writer.
// catalog.ErrNotFound when absent or deleted.
func (s *Stores) Product(ctx context.Context, retailerID, productID string, fresh bool) (catalog.Product, error) {
	rs, err := s.ReadersFor(ctx, retailerID)
	if err != nil {
		return catalog.Product{}, err
	}
	return rs.Product(ctx, source(fresh), retailerID, productID)
}

// Products returns up to limit live products with product_id > after, in
// byte order, stopping after the product that brings the total size of
// their attributes to maxBytes (<= 0: no bound), read like Product.
func (s *Stores) Products(ctx context.Context, retailerID, after string, limit, maxBytes int, fresh bool) ([]catalog.Product, error) {
	rs, err := s.ReadersFor(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return rs.Products(ctx, source(fresh), retailerID, after, limit, maxBytes)
}

// KnownGenerations returns the retailer's newest generation that took over
// and its newest applied one, as a replica of its shard (or the writer
// when none answers) knows them.
func (s *Stores) KnownGenerations(ctx context.Context, retailerID string) (latest, applied int64, err error) {
	rs, err := s.ReadersFor(ctx, retailerID)
	if err != nil {
		return 0, 0, err
	}
	return rs.KnownGenerations(ctx, retailerID)
}

// Replicated reports whether the retailer's reads may come from a replica,
// that is whether a fresh read can see more than another.
func (s *Stores) Replicated(ctx context.Context, retailerID string) (bool, error) {
	rs, err := s.ReadersFor(ctx, retailerID)
	if err != nil {
		return false, err
	}
	return rs.Replicas() > 0, nil
}

// ReplicaFallbacks counts, over the control database and every shard, the
// storefront reads that replicas could not answer (the writer did).
func (s *Stores) ReplicaFallbacks() int64 {
	var n int64
	for _, rs := range append([]*ReaderSet{s.ControlReaders}, s.ShardReaders...) {
		if rs != nil {
			n += rs.Stats().Fallbacks
		}
	}
	return n
}

// DirectoryRetailers returns, in order, the retailers (at most limit) whose
// catalog holds a live product with this id, read through the control
// database's replicas.
func (s *Stores) DirectoryRetailers(ctx context.Context, productID string, limit int) ([]string, error) {
	return s.ControlReaders.DirectoryRetailers(ctx, productID, limit)
}
