package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// DrainOutbox takes up to limit events of the shard's outbox that f picks,
// oldest first, and hands them to publish, which reports which it
// published; those are deleted. All of it is one transaction holding the
// events' rows locked (FOR UPDATE SKIP LOCKED), so concurrent relays take
// different events; if the process dies before the commit, the events stay
// and are published again (at least once). The commit does not wait for
// the disk (synchronous_commit off): a delete lost with the server is the
// same at-least-once case. It returns how many events it took.
func (s *Shard) DrainOutbox(ctx context.Context, f catalog.OutboxFilter, limit int,
	publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error) {
	var taken int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// One round trip: the commit that need not wait for the disk, and
		// the take.
		b := &pgx.Batch{}
		b.Queue(q("outbox_drain_unsynced"))
		var take *pgx.QueuedQuery
		if f.RetailerID != "" {
			take = b.Queue(q("outbox_take_retailer"), f.RetailerID, limit)
		} else {
			take = b.Queue(q("outbox_take_old"), f.OlderThan.Seconds(), limit)
		}
		var entries []catalog.OutboxEntry
		take.Query(func(rows pgx.Rows) error {
			var err error
			entries, err = pgx.CollectRows(rows, scanOutboxEntry)
			return err
		})
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		taken = len(entries)
		if taken == 0 {
			return nil
		}
		done, err := publish(ctx, entries)
		if err != nil {
			return err
		}
		var ids []int64
		for i, ok := range done {
			if ok {
				ids = append(ids, entries[i].ID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, q("outbox_delete"), ids)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("drain outbox: %w", err)
	}
	return taken, nil
}

func scanOutboxEntry(row pgx.CollectableRow) (catalog.OutboxEntry, error) {
	var e catalog.OutboxEntry
	var status []byte
	err := row.Scan(&e.ID, &e.Type, &e.RetailerID, &e.Generation, &e.Seq, &e.ObjectKey, &e.SHA256,
		&e.Changed, &e.Unchanged, &status, &e.EventTime, &e.CreatedAt)
	if err != nil || status == nil {
		return e, err
	}
	g, err := decodeGenerationRow(status)
	if err != nil {
		return e, fmt.Errorf("outbox event %d: %w", e.ID, err)
	}
	e.Status = &g
	return e, nil
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

// OutboxStats returns how many events wait in the shard's outbox and how
// long the oldest has waited.
func (s *Shard) OutboxStats(ctx context.Context) (pending int64, oldest time.Duration, err error) {
	var secs float64
	if err := s.pool.QueryRow(ctx, q("outbox_stats")).Scan(&pending, &secs); err != nil {
		return 0, 0, fmt.Errorf("outbox stats: %w", err)
	}
	return pending, time.Duration(secs * float64(time.Second)), nil
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

// DrainOutbox is Shard.DrainOutbox on shard i.
func (s *Stores) DrainOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int,
	publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error) {
	if shard < 0 || shard >= len(s.Shards) {
		return 0, fmt.Errorf("drain outbox: no shard %d", shard)
	}
	return s.Shards[shard].DrainOutbox(ctx, f, limit, publish)
}

// OutboxStats is Shard.OutboxStats on shard i.
func (s *Stores) OutboxStats(ctx context.Context, shard int) (pending int64, oldest time.Duration, err error) {
	if shard < 0 || shard >= len(s.Shards) {
		return 0, 0, fmt.Errorf("outbox stats: no shard %d", shard)
	}
	return s.Shards[shard].OutboxStats(ctx)
}

// RetailerShard is the shard a registered retailer is on; catalog.ErrNotFound
// when unknown. It reads only the registry's retailer_id and shard columns
// (the relay's and the consumers' roles may read no more), through the
// control database's readers, and remembers the answer: a retailer never
// moves shard.
func (s *Stores) RetailerShard(ctx context.Context, retailerID string) (int, error) {
	if r, ok := s.retailers.Load(retailerID); ok {
		return r.(catalog.Retailer).Shard, nil
	}
	if shard, ok := s.shardOfRetailer.Load(retailerID); ok {
		return shard.(int), nil
	}
	r, err := s.ControlReaders.retailer(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	if r.Shard < 0 || r.Shard >= len(s.Shards) {
		return 0, fmt.Errorf("retailer %s is on shard %d, but %d shards are configured", retailerID, r.Shard, len(s.Shards))
	}
	s.shardOfRetailer.Store(retailerID, r.Shard)
	return r.Shard, nil
}

// Replay is Shard.Replay on the retailer's shard.
func (s *Stores) Replay(ctx context.Context, retailerID string, since time.Time) (changes, lifecycle int, err error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, 0, err
	}
	return sh.Replay(ctx, retailerID, since)
}
