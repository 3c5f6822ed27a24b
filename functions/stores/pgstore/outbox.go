package pgstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// ClaimOutbox leases up to limit events of the shard's outbox that f picks,
// oldest first, to one claim for lease: none parked, none another claim
// holds. It is one statement (with the commit that need not wait for the
// disk: one round trip), and no transaction stays open after it: the
// caller publishes outside any transaction, then settles the claim
// (SettleOutbox). If the caller dies instead, its rows are claimable again
// once the lease has passed (at least once, same event ids).
func (s *Shard) ClaimOutbox(ctx context.Context, f catalog.OutboxFilter, limit int, lease time.Duration) (catalog.OutboxClaim, error) {
	b := &pgx.Batch{}
	b.Queue(q("outbox_unsynced"))
	var claim catalog.OutboxClaim
	take := func(rows pgx.Rows) error {
		for rows.Next() {
			e, token, err := scanClaimedEntry(rows)
			if err != nil {
				return err
			}
			claim.Token = token
			claim.Entries = append(claim.Entries, e)
		}
		return rows.Err()
	}
	if f.RetailerID != "" {
		b.Queue(q("outbox_claim_retailer"), f.RetailerID, limit, lease.Seconds()).Query(take)
	} else {
		b.Queue(q("outbox_claim_old"), f.OlderThan.Seconds(), limit, lease.Seconds()).Query(take)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return catalog.OutboxClaim{}, fmt.Errorf("claim outbox events: %w", err)
	}
	slices.SortFunc(claim.Entries, func(a, b catalog.OutboxEntry) int { return cmp.Compare(a.ID, b.ID) })
	return claim, nil
}

// SettleOutbox records, in one statement, what became of the events of a
// claim: those done are deleted; each failure is recorded (its error
// bounded), counted when it says so, and parked or released after its
// backoff, but only while the claim still holds the row (one that another
// claim took after the lease is left to it). It returns how many rows it
// deleted and how many failures it recorded.
func (s *Shard) SettleOutbox(ctx context.Context, token int64, st catalog.OutboxSettlement) (deleted, failed int, err error) {
	if len(st.Done) == 0 && len(st.Failed) == 0 {
		return 0, 0, nil
	}
	n := len(st.Failed)
	ids, errs := make([]int64, n), make([]string, n)
	counted, park, retry := make([]bool, n), make([]bool, n), make([]float64, n)
	for i, f := range st.Failed {
		ids[i], errs[i], counted[i], park[i], retry[i] = f.ID, catalog.BoundMessage(f.Error), f.Counted, f.Park, f.RetryAfter.Seconds()
	}
	done := st.Done
	if done == nil {
		done = []int64{}
	}
	b := &pgx.Batch{}
	b.Queue(q("outbox_unsynced"))
	if n == 0 {
		// Everything published (the usual case): the plain delete.
		b.Queue(q("outbox_delete"), done).Exec(func(ct pgconn.CommandTag) error {
			deleted = int(ct.RowsAffected())
			return nil
		})
	} else {
		b.Queue(q("outbox_settle"), done, token, ids, errs, counted, park, retry).QueryRow(func(row pgx.Row) error {
			return row.Scan(&deleted, &failed)
		})
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, 0, fmt.Errorf("settle outbox claim %d: %w", token, err)
	}
	return deleted, failed, nil
}

// DrainOutbox takes up to limit events of the shard's outbox that f picks,
// oldest first, hands them to publish, which reports which it published,
// and deletes those: a claim, the call, a settle, with no transaction open
// during the call. What publish does not report done is released at once
// with nothing counted against it (all of it when publish fails); a
// concurrent drain takes other events. It returns how many events it took.
// The relay makes its own decisions (ClaimOutbox, SettleOutbox); this is
// for callers that only read or publish everything they are given.
func (s *Shard) DrainOutbox(ctx context.Context, f catalog.OutboxFilter, limit int,
	publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error) {
	claim, err := s.ClaimOutbox(ctx, f, limit, drainLease)
	if err != nil {
		return 0, fmt.Errorf("drain outbox: %w", err)
	}
	if len(claim.Entries) == 0 {
		return 0, nil
	}
	done, perr := publish(ctx, claim.Entries)
	var st catalog.OutboxSettlement
	for i, e := range claim.Entries {
		if perr == nil && i < len(done) && done[i] {
			st.Done = append(st.Done, e.ID)
			continue
		}
		st.Failed = append(st.Failed, catalog.OutboxFailure{ID: e.ID})
	}
	if _, _, err := s.SettleOutbox(context.WithoutCancel(ctx), claim.Token, st); err != nil {
		return 0, fmt.Errorf("drain outbox: %w", errors.Join(perr, err))
	}
	if perr != nil {
		return 0, fmt.Errorf("drain outbox: %w", perr)
	}
	return len(claim.Entries), nil
}

// drainLease is how long DrainOutbox's events stay leased should its
// caller die before the settle.
const drainLease = time.Minute

// scanClaimedEntry reads a row of a claim: the event and the claim's token.
// A status that does not decode makes the entry Unreadable, not the claim
// fail: one broken row never stops the others.
func scanClaimedEntry(row pgx.Rows) (catalog.OutboxEntry, int64, error) {
	var e catalog.OutboxEntry
	var status []byte
	var token int64
	if err := row.Scan(&e.ID, &e.Type, &e.RetailerID, &e.Generation, &e.Seq, &e.ObjectKey, &e.SHA256,
		&e.Changed, &e.Unchanged, &status, &e.EventTime, &e.CreatedAt, &e.Attempts, &token); err != nil {
		return e, 0, err
	}
	if status == nil {
		return e, token, nil
	}
	g, err := decodeGenerationRow(status)
	if err != nil {
		e.Unreadable = err.Error()
		return e, token, nil
	}
	e.Status = &g
	return e, token, nil
}

// PeekOutbox returns every event of the shard's outbox, leased and
// parked ones included, oldest first, read as a claim reads them, taking
// none (tests and tools look with it; the relay claims).
func (s *Shard) PeekOutbox(ctx context.Context) ([]catalog.OutboxEntry, error) {
	rows, err := s.pool.Query(ctx, q("outbox_peek"))
	if err != nil {
		return nil, fmt.Errorf("peek outbox: %w", err)
	}
	defer rows.Close()
	var out []catalog.OutboxEntry
	for rows.Next() {
		e, _, err := scanClaimedEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("peek outbox: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("peek outbox: %w", err)
	}
	return out, nil
}

// generationRow is a generations row as to_jsonb writes it (the lifecycle
// trigger keeps the row of the state change in the outbox).
type generationRow struct {
	RetailerID    string            `json:"retailer_id"`
	Generation    int64             `json:"generation"`
	State         string            `json:"state"`
	Format        string            `json:"format"`
	ObjectKey     string            `json:"object_key"`
	UploadExpires time.Time         `json:"upload_expires_at"`
	CreatedAt     time.Time         `json:"created_at"`
	ReceivedAt    *time.Time        `json:"received_at"`
	AppliedAt     *time.Time        `json:"applied_at"`
	SupersededBy  *int64            `json:"superseded_by"`
	ErrorCode     *string           `json:"error_code"`
	ErrorMessage  *string           `json:"error_message"`
	ErrorLine     *int              `json:"error_line"`
	ErrorProblems []catalog.Problem `json:"error_problems"`
	ErrorMore     bool              `json:"error_more_problems"`
	Inserted      int64             `json:"inserted"`
	Updated       int64             `json:"updated"`
	Deleted       int64             `json:"deleted"`
	Unchanged     int64             `json:"unchanged"`
	Products      int64             `json:"products"`
	ChunksTotal   int               `json:"chunks_total"`
	ChunksApplied int               `json:"chunks_applied"`
	Confirmed     bool              `json:"confirmed"`
	Mode          string            `json:"mode"`
	Source        *int64            `json:"source_generation"`
	Undoes        *int64            `json:"undoes"`
}

func decodeGenerationRow(b []byte) (catalog.GenerationStatus, error) {
	var r generationRow
	if err := json.Unmarshal(b, &r); err != nil {
		return catalog.GenerationStatus{}, fmt.Errorf("decode generation row: %w", err)
	}
	g := catalog.GenerationStatus{
		RetailerID: r.RetailerID, Generation: r.Generation, State: catalog.State(r.State), Format: r.Format,
		ObjectKey: r.ObjectKey, UploadExpires: r.UploadExpires, CreatedAt: r.CreatedAt,
		ReceivedAt: r.ReceivedAt, AppliedAt: r.AppliedAt, SupersededBy: r.SupersededBy,
		Inserted: r.Inserted, Updated: r.Updated, Deleted: r.Deleted, Unchanged: r.Unchanged, Products: r.Products,
		ChunksTotal: r.ChunksTotal, ChunksApplied: r.ChunksApplied, Confirmed: r.Confirmed,
		Problems: r.ErrorProblems, MoreProblems: r.ErrorMore,
		Mode: r.Mode, SourceGeneration: r.Source, Undoes: r.Undoes,
	}
	if r.ErrorCode != nil {
		g.ErrorCode = *r.ErrorCode
	}
	if r.ErrorMessage != nil {
		g.ErrorMessage = *r.ErrorMessage
	}
	if r.ErrorLine != nil {
		g.ErrorLine = *r.ErrorLine
	}
	return g, nil
}

// OutboxHealth returns how many events wait in the shard's outbox to be
// published, how long the oldest of them has waited, and how many are
// parked.
func (s *Shard) OutboxHealth(ctx context.Context) (catalog.OutboxHealth, error) {
	var h catalog.OutboxHealth
	var secs float64
	if err := s.pool.QueryRow(ctx, q("outbox_health")).Scan(&h.Pending, &secs, &h.Parked); err != nil {
		return catalog.OutboxHealth{}, fmt.Errorf("outbox health: %w", err)
	}
	h.Oldest = time.Duration(secs * float64(time.Second))
	return h, nil
}

// OutboxStats returns how many events wait in the shard's outbox to be
// published and how long the oldest has waited (parked events are not
// waiting: OutboxHealth counts them).
func (s *Shard) OutboxStats(ctx context.Context) (pending int64, oldest time.Duration, err error) {
	h, err := s.OutboxHealth(ctx)
	return h.Pending, h.Oldest, err
}

// ParkedOutbox returns the shard's parked events (of one retailer; ""
// every), first parked first, at most limit, and how many are parked in
// all. Shard is left zero: the caller knows the shard.
func (s *Shard) ParkedOutbox(ctx context.Context, retailerID string, limit int) ([]catalog.ParkedEvent, int64, error) {
	var out []catalog.ParkedEvent
	var total int64
	b := &pgx.Batch{}
	b.Queue(q("outbox_parked_count"), retailerID).QueryRow(func(row pgx.Row) error { return row.Scan(&total) })
	b.Queue(q("outbox_parked"), retailerID, limit).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var e catalog.ParkedEvent
			if err := rows.Scan(&e.ID, &e.Type, &e.RetailerID, &e.Generation, &e.Seq, &e.Attempts, &e.LastError,
				&e.CreatedAt, &e.ParkedAt); err != nil {
				return err
			}
			out = append(out, e)
		}
		return rows.Err()
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, 0, fmt.Errorf("parked outbox events: %w", err)
	}
	return out, total, nil
}

// UnparkOutbox puts up to limit parked events (of one retailer; "" every)
// back in the outbox, first parked first, with no attempt counted and no
// lease: the sweeper publishes them at its next run. It returns how many it
// unparked and how many are still parked.
func (s *Shard) UnparkOutbox(ctx context.Context, retailerID string, limit int) (unparked, left int64, err error) {
	if err := s.pool.QueryRow(ctx, q("outbox_unpark"), retailerID, limit).Scan(&unparked, &left); err != nil {
		return 0, 0, fmt.Errorf("unpark outbox events: %w", err)
	}
	return unparked, left, nil
}

// Replay writes again, as outbox rows, the events of a retailer since a
// time: the changes of every chunk applied since then and the current
// lifecycle event of every generation whose state changed since then, each
// under its original id and time (pending ones are not doubled). The relay
// publishes them like any other.
func (s *Shard) Replay(ctx context.Context, retailerID string, since time.Time) (changes, lifecycle int, err error) {
	if err := s.pool.QueryRow(ctx, q("replay_events"), retailerID, since).Scan(&changes, &lifecycle); err != nil {
		return 0, 0, fmt.Errorf("replay events of %s since %s: %w", retailerID, since.Format(time.RFC3339), err)
	}
	return changes, lifecycle, nil
}

// The relay's view of every shard, by shard number.

// shardAt is shard i, or an error naming what wanted it.
func (s *Stores) shardAt(i int, what string) (*Shard, error) {
	if i < 0 || i >= len(s.Shards) {
		return nil, fmt.Errorf("%s: no shard %d", what, i)
	}
	return s.Shards[i], nil
}

// ClaimOutbox is Shard.ClaimOutbox on shard i.
func (s *Stores) ClaimOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int, lease time.Duration) (catalog.OutboxClaim, error) {
	sh, err := s.shardAt(shard, "claim outbox events")
	if err != nil {
		return catalog.OutboxClaim{}, err
	}
	return sh.ClaimOutbox(ctx, f, limit, lease)
}

// SettleOutbox is Shard.SettleOutbox on shard i.
func (s *Stores) SettleOutbox(ctx context.Context, shard int, token int64, st catalog.OutboxSettlement) (deleted, failed int, err error) {
	sh, err := s.shardAt(shard, "settle outbox claim")
	if err != nil {
		return 0, 0, err
	}
	return sh.SettleOutbox(ctx, token, st)
}

// DrainOutbox is Shard.DrainOutbox on shard i.
func (s *Stores) DrainOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int,
	publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error) {
	sh, err := s.shardAt(shard, "drain outbox")
	if err != nil {
		return 0, err
	}
	return sh.DrainOutbox(ctx, f, limit, publish)
}

// OutboxHealth is Shard.OutboxHealth on shard i.
func (s *Stores) OutboxHealth(ctx context.Context, shard int) (catalog.OutboxHealth, error) {
	sh, err := s.shardAt(shard, "outbox health")
	if err != nil {
		return catalog.OutboxHealth{}, err
	}
	return sh.OutboxHealth(ctx)
}

// OutboxStats is Shard.OutboxStats on shard i.
func (s *Stores) OutboxStats(ctx context.Context, shard int) (pending int64, oldest time.Duration, err error) {
	sh, err := s.shardAt(shard, "outbox stats")
	if err != nil {
		return 0, 0, err
	}
	return sh.OutboxStats(ctx)
}

// ParkedOutbox returns the parked events of a retailer (on its shard) or,
// with retailerID "", of every shard, first parked first, at most limit,
// and how many are parked in all.
func (s *Stores) ParkedOutbox(ctx context.Context, retailerID string, limit int) ([]catalog.ParkedEvent, int64, error) {
	shards, err := s.outboxShards(ctx, retailerID)
	if err != nil {
		return nil, 0, err
	}
	var out []catalog.ParkedEvent
	var total int64
	for _, i := range shards {
		evs, n, err := s.Shards[i].ParkedOutbox(ctx, retailerID, limit)
		if err != nil {
			return nil, 0, fmt.Errorf("shard %d: %w", i, err)
		}
		for _, e := range evs {
			e.Shard = i
			out = append(out, e)
		}
		total += n
	}
	slices.SortStableFunc(out, func(a, b catalog.ParkedEvent) int { return a.ParkedAt.Compare(b.ParkedAt) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, total, nil
}

// UnparkOutbox puts up to limit parked events of a retailer (on its shard)
// or, with retailerID "", of every shard back in the outbox for the
// sweeper; it returns how many it unparked and how many are still parked.
func (s *Stores) UnparkOutbox(ctx context.Context, retailerID string, limit int) (unparked, left int64, err error) {
	shards, err := s.outboxShards(ctx, retailerID)
	if err != nil {
		return 0, 0, err
	}
	for _, i := range shards {
		n, l, err := s.Shards[i].UnparkOutbox(ctx, retailerID, max(limit-int(unparked), 0))
		if err != nil {
			return unparked, 0, fmt.Errorf("shard %d: %w", i, err)
		}
		unparked += n
		left += l
	}
	return unparked, left, nil
}

// outboxShards are the shards that hold a retailer's events (every shard
// for "").
func (s *Stores) outboxShards(ctx context.Context, retailerID string) ([]int, error) {
	if retailerID == "" {
		out := make([]int, len(s.Shards))
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	i, err := s.RetailerShard(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return []int{i}, nil
}

// RetailerShard is the shard a registered retailer is on; catalog.ErrNotFound
// when unknown. It reads only the registry's retailer_id and shard columns
// (the relay's and the consumers' roles may read no more), through the
// control database's readers, and remembers the answer for RouteTTL (a
// move changes it).
func (s *Stores) RetailerShard(ctx context.Context, retailerID string) (int, error) {
	if r, ok := loadRoute(&s.retailers, retailerID); ok {
		return r.Shard, nil
	}
	if r, ok := loadRoute(&s.shardOfRetailer, retailerID); ok {
		return r.Shard, nil
	}
	r, err := s.ControlReaders.retailer(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	if r.Shard < 0 || r.Shard >= len(s.Shards) {
		return 0, fmt.Errorf("retailer %s is on shard %d, but %d shards are configured", retailerID, r.Shard, len(s.Shards))
	}
	storeRoute(&s.shardOfRetailer, catalog.Retailer{ID: retailerID, Shard: r.Shard})
	return r.Shard, nil
}

// Replay is Shard.Replay on the retailer's shard; catalog.ErrRateLimited
// retailer_moving while a move switches the retailer's shard.
func (s *Stores) Replay(ctx context.Context, retailerID string, since time.Time) (changes, lifecycle int, err error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, 0, err
	}
	changes, lifecycle, err = sh.Replay(ctx, retailerID, since)
	return changes, lifecycle, movingError(err) // 429 retailer_moving while it switches shards, not 500
}
