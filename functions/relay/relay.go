// Package relay is the relay function: it publishes the change events that
// wait in the shards' outboxes to the change-events topic, and deletes each
// only once the topic has accepted it (DESIGN 8). Two paths call it: the
// fast path, Flush, right after a function commits (the apply after each
// chunk, in the background of its invocation while the next chunk applies;
// the diff after a state change), best effort; and the sweeper,
// Sweep, every minute, for events older than 30 s: the guarantee.
//
// A catalog.changes event is a claim check. Its outbox row names the chunk
// object the apply read and the ids of the chunk's ops that changed nothing.
// When there are none, the chunk object is the change object and the event
// refers to it. Otherwise the relay writes the change object (the chunk's
// lines less those ids) under changes/ before it publishes: no event is
// published before the object it refers to exists.
package relay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/blob"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/costs"
	"github.com/retailcatalog/catalog/functions/metering"
	"github.com/retailcatalog/catalog/functions/metrics"
	"github.com/retailcatalog/catalog/functions/topic"
)

// Store is the shards' outboxes. pgstore.Stores implements it.
type Store interface {
	// ShardCount is the number of shards, each with its outbox.
	ShardCount() int
	// RetailerShard is the shard a retailer is on; catalog.ErrNotFound when unknown.
	RetailerShard(ctx context.Context, retailerID string) (int, error)
	// DrainOutbox takes up to limit events of a shard's outbox that f picks,
	// oldest first, locked against other relays, passes them to publish and
	// deletes those publish reports done, in one transaction; it returns
	// how many it took.
	DrainOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int,
		publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error)
	// OutboxStats is how many events wait in a shard's outbox and how long
	// the oldest has waited (0 when none).
	OutboxStats(ctx context.Context, shard int) (pending int64, oldest time.Duration, err error)
}

// Blobs reads chunk objects and writes change objects. s3blob.Store and
// inmem.Blobs implement it.
type Blobs interface {
	// Get reads a whole object; blob.ErrNotFound when it does not exist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
}

// Config tunes the relay; zero values take the defaults in brackets.
type Config struct {
	// SweepAge: the sweeper takes events written at least this long ago
	// [30s]; younger ones are the fast path's.
	SweepAge time.Duration
	// DrainSize is how many events one outbox transaction takes [50].
	DrainSize int
	// SweepBudget bounds one Sweep, leaving a Lambda invocation time to
	// commit [50s]; what is left waits for the next run.
	SweepBudget time.Duration
}

func (c *Config) defaults() {
	if c.SweepAge <= 0 {
		c.SweepAge = 30 * time.Second
	}
	if c.DrainSize <= 0 {
		c.DrainSize = 50
	}
	if c.SweepBudget <= 0 {
		c.SweepBudget = 50 * time.Second
	}
}

// Relay publishes outbox events.
type Relay struct {
	cfg   Config
	store Store
	blobs Blobs
	pub   topic.Publisher
	log   *slog.Logger
	// Metrics records, after each sweep, the age of the oldest event still
	// waiting in any outbox (OutboxAgeSeconds, alarmed on; nil: none).
	Metrics *metrics.Recorder
}

// New builds a relay.
func New(cfg Config, store Store, blobs Blobs, pub topic.Publisher, log *slog.Logger) *Relay {
	cfg.defaults()
	return &Relay{cfg: cfg, store: store, blobs: blobs, pub: pub, log: log}
}

// Stats count what a pass did.
type Stats struct {
	Taken     int // outbox events taken
	Published int // events the topic accepted
	Empty     int // chunk events with no change: deleted unpublished
	Dropped   int // replayed events whose objects are gone: deleted unpublished
	Failed    int // events left in the outbox for the next pass
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Taken += o.Taken
	s.Published += o.Published
	s.Empty += o.Empty
	s.Dropped += o.Dropped
	s.Failed += o.Failed
}

// Flush is the fast path: it publishes every pending event of a retailer,
// now. Best effort: a failure is logged and the sweeper publishes later.
func (r *Relay) Flush(ctx context.Context, retailerID string) {
	if _, err := r.FlushRetailer(ctx, retailerID); err != nil && !errors.Is(err, catalog.ErrNotFound) {
		r.log.WarnContext(ctx, "fast path failed; the sweeper will publish", "retailer_id", retailerID, "err", err)
	}
}

// FlushRetailer publishes every pending event of a retailer.
func (r *Relay) FlushRetailer(ctx context.Context, retailerID string) (Stats, error) {
	shard, err := r.store.RetailerShard(ctx, retailerID)
	if err != nil {
		return Stats{}, err
	}
	return r.drain(ctx, shard, catalog.OutboxFilter{RetailerID: retailerID}, time.Time{})
}

// Sweep is the guarantee: it publishes, on every shard, the events written
// at least SweepAge ago, until none is left or SweepBudget has passed.
func (r *Relay) Sweep(ctx context.Context) (Stats, error) {
	deadline := time.Now().Add(r.cfg.SweepBudget)
	var total Stats
	var errs []error
	for shard := range r.store.ShardCount() {
		st, err := r.drain(ctx, shard, catalog.OutboxFilter{OlderThan: r.cfg.SweepAge}, deadline)
		total.Add(st)
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %d: %w", shard, err))
		}
	}
	if total.Taken > 0 || len(errs) > 0 {
		r.log.InfoContext(ctx, "outbox swept", "taken", total.Taken, "published", total.Published,
			"empty", total.Empty, "dropped", total.Dropped, "failed", total.Failed, "errors", len(errs))
	}
	if err := r.recordOutboxAge(ctx); err != nil {
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// recordOutboxAge records how long the oldest event still waiting in any
// shard's outbox has waited: near zero while the relay keeps up, and
// growing when it cannot publish (SNS refusing, a shard unreachable).
func (r *Relay) recordOutboxAge(ctx context.Context) error {
	if r.Metrics == nil {
		return nil
	}
	var oldest time.Duration
	var pending int64
	for shard := range r.store.ShardCount() {
		n, age, err := r.store.OutboxStats(ctx, shard)
		if err != nil {
			return fmt.Errorf("outbox stats of shard %d: %w", shard, err)
		}
		pending += n
		oldest = max(oldest, age)
	}
	if oldest > r.cfg.SweepAge {
		r.log.WarnContext(ctx, "change events wait in the outbox after a sweep", "pending", pending, "oldest_s", oldest.Seconds())
	}
	r.Metrics.Emit(ctx, metrics.Fields{}, metrics.Duration(metrics.OutboxAgeSeconds, oldest))
	return nil
}

// HandleSweep is the Lambda entry of the scheduled sweeper.
func (r *Relay) HandleSweep(ctx context.Context) error {
	_, err := r.Sweep(ctx)
	return err
}

// drain takes batches of a shard's outbox until a batch publishes nothing
// new (empty, or every event failed) or the deadline (zero: none) passes.
func (r *Relay) drain(ctx context.Context, shard int, f catalog.OutboxFilter, deadline time.Time) (Stats, error) {
	var total Stats
	for {
		var st Stats
		taken, err := r.store.DrainOutbox(ctx, shard, f, r.cfg.DrainSize, func(ctx context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
			done, s, err := r.publish(ctx, entries)
			st = s
			return done, err
		})
		st.Taken = taken
		total.Add(st)
		if err != nil {
			return total, err
		}
		if taken < r.cfg.DrainSize || st.Failed == taken || (!deadline.IsZero() && time.Now().After(deadline)) {
			return total, nil
		}
	}
}

// publish publishes what entries hold and reports which are done (published,
// or nothing to publish).
func (r *Relay) publish(ctx context.Context, entries []catalog.OutboxEntry) ([]bool, Stats, error) {
	var st Stats
	done := make([]bool, len(entries))
	var msgs []topic.Message
	var at []int // entry of each message
	for i, e := range entries {
		env, ok, err := r.envelope(ctx, e)
		switch {
		case errors.Is(err, errGone):
			r.log.ErrorContext(ctx, "replayed event dropped: its objects are gone (older than the bucket keeps them)",
				"retailer_id", e.RetailerID, "generation", e.Generation, "seq", e.Seq)
			done[i] = true
			st.Dropped++
			continue
		case err != nil:
			r.log.ErrorContext(ctx, "event not published; it stays in the outbox", "retailer_id", e.RetailerID,
				"generation", e.Generation, "type", e.Type, "seq", e.Seq, "err", err)
			st.Failed++
			continue
		case !ok:
			done[i] = true
			st.Empty++
			continue
		}
		body, err := json.Marshal(env)
		if err != nil {
			return nil, st, fmt.Errorf("encode event %s: %w", env.ID, err)
		}
		msgs = append(msgs, topic.Message{Body: string(body), Attributes: map[string]string{
			events.AttrType: env.Type, events.AttrRetailerID: env.RetailerID}})
		at = append(at, i)
	}
	for start := 0; start < len(msgs); start += topic.MaxBatch {
		end := min(start+topic.MaxBatch, len(msgs))
		errs, err := r.pub.Publish(ctx, msgs[start:end])
		if err != nil {
			// Nothing of this call is known published: those events stay.
			r.log.WarnContext(ctx, "publish failed; the events stay in the outbox", "events", end-start, "err", err)
			st.Failed += end - start
			continue
		}
		for k, perr := range errs {
			e := entries[at[start+k]]
			if perr != nil {
				r.log.WarnContext(ctx, "event refused by the topic; it stays in the outbox", "retailer_id", e.RetailerID,
					"generation", e.Generation, "type", e.Type, "err", perr)
				st.Failed++
				continue
			}
			done[at[start+k]] = true
			st.Published++
			metering.For(ctx, e.RetailerID) // one SNS publish of the retailer (DESIGN 10)
			metering.Count(ctx, costs.Usage{SNSPublishes: 1})
		}
	}
	return done, st, nil
}

// errGone: a replayed chunk's change object and chunk object are both gone.
var errGone = errors.New("change object and chunk object are gone")

// envelope builds the event of an outbox entry; ok is false when there is
// nothing to publish (a chunk that changed nothing).
func (r *Relay) envelope(ctx context.Context, e catalog.OutboxEntry) (events.Envelope, bool, error) {
	env := events.Envelope{
		ID: events.EventID(e.Type, e.RetailerID, e.Generation, e.Seq), Type: e.Type,
		Time: e.EventTime.UTC(), RetailerID: e.RetailerID, Generation: e.Generation,
	}
	if e.Type != events.TypeChanges {
		if e.Status == nil {
			return env, false, fmt.Errorf("lifecycle event %d has no status", e.ID)
		}
		st := events.StatusOf(*e.Status)
		env.Status = &st
		return env, true, nil
	}
	seq := e.Seq
	env.Seq = &seq
	var err error
	switch {
	case e.Replayed():
		env.Object, env.SHA256, env.Count, err = r.findChangeObject(ctx, e)
	case len(e.Unchanged) == 0:
		env.Object, env.SHA256, env.Count = e.ObjectKey, e.SHA256, e.Changed
	default:
		env.Object, env.SHA256, env.Count, err = r.writeChangeObject(ctx, e)
	}
	if err != nil || env.Count == 0 {
		return env, false, err
	}
	return env, true, nil
}

// writeChangeObject writes the change object of a chunk some of whose ops
// changed nothing: its lines less those ops.
func (r *Relay) writeChangeObject(ctx context.Context, e catalog.OutboxEntry) (key, sum string, count int, err error) {
	body, err := r.blobs.Get(ctx, e.ObjectKey)
	if err != nil {
		return "", "", 0, fmt.Errorf("read chunk object %s: %w", e.ObjectKey, err)
	}
	if got := sha256Hex(body); got != e.SHA256 {
		return "", "", 0, fmt.Errorf("chunk object %s has checksum %s, the apply read %s", e.ObjectKey, got, e.SHA256)
	}
	ops, err := events.ReadChunk(bytes.NewReader(body))
	if err != nil {
		return "", "", 0, fmt.Errorf("chunk object %s: %w", e.ObjectKey, err)
	}
	skip := make(map[string]bool, len(e.Unchanged))
	for _, id := range e.Unchanged {
		skip[id] = true
	}
	var out []byte
	for _, op := range ops {
		if !skip[op.ProductID] {
			out = events.AppendChunkLine(out, op)
			count++
		}
	}
	if count != e.Changed {
		r.log.WarnContext(ctx, "change object lines differ from the apply's count", "retailer_id", e.RetailerID,
			"generation", e.Generation, "seq", e.Seq, "lines", count, "changed", e.Changed)
	}
	key = events.ChangeKey(e.RetailerID, e.Generation, e.Seq)
	if err := r.blobs.Put(ctx, key, out); err != nil {
		return "", "", 0, fmt.Errorf("write change object %s: %w", key, err)
	}
	return key, sha256Hex(out), count, nil
}

// findChangeObject finds the change object of a replayed chunk: the one the
// relay wrote under changes/ when the chunk had ops that changed nothing,
// else the chunk object itself.
func (r *Relay) findChangeObject(ctx context.Context, e catalog.OutboxEntry) (key, sum string, count int, err error) {
	for _, key := range []string{events.ChangeKey(e.RetailerID, e.Generation, e.Seq), events.ChunkKey(e.RetailerID, e.Generation, e.Seq)} {
		body, err := r.blobs.Get(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", "", 0, fmt.Errorf("read %s: %w", key, err)
		}
		return key, sha256Hex(body), bytes.Count(body, []byte("\n")), nil
	}
	return "", "", 0, errGone
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
