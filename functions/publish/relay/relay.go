// Package relay is the relay function: it publishes the change events that
// wait in the shards' outboxes to the change-events topic, and deletes each
// only once the topic has accepted it (DESIGN 8). Two paths call it: the
// fast path, Flush, right after a function commits (the apply after each
// chunk, in the background of its invocation while the next chunk applies;
// the diff after a state change), best effort; and the sweeper,
// Sweep, every minute, for events older than 30 s: the guarantee.
//
// Both go in three steps, with no database transaction open across a call
// to S3 or SNS (I12): claim a batch of events (one short statement that
// leases them), publish outside any transaction, settle (one short
// statement): delete what was published, and for each failure record its
// error and lease the event away for a backoff, so that the next claim
// takes the events after it. An event that cannot be published (the topic
// refuses it for what it is, it is over the envelope bound, or it failed
// MaxAttempts times) is parked: kept, counted (OutboxParked), never taken
// again until an operator re-drives it (catalogctl dlq redrive outbox). One
// retailer's poison never delays another's events.
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

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/topic"
)

// Store is the shards' outboxes. pgstore.Stores implements it.
type Store interface {
	// ShardCount is the number of shards, each with its outbox.
	ShardCount() int
	// RetailerShard is the shard a retailer is on; catalog.ErrNotFound when unknown.
	RetailerShard(ctx context.Context, retailerID string) (int, error)
	// ClaimOutbox leases up to limit events of a shard's outbox that f
	// picks, oldest first, to one claim for lease, in one short
	// transaction: never a parked event, nor one another claim holds (its
	// lease not yet passed). No transaction stays open after it. Once the
	// lease has passed, the events are claimable again (their claimer
	// died: at least once, same event ids).
	ClaimOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int, lease time.Duration) (catalog.OutboxClaim, error)
	// SettleOutbox records, in one short transaction, what became of a
	// claim's events: Done ones are deleted; each failure is recorded,
	// counted or not, and parked or leased away for its RetryAfter, while
	// the claim still holds it (one another claim took after the lease is
	// left to that one). It returns how many it deleted and how many
	// failures it recorded.
	SettleOutbox(ctx context.Context, shard int, token int64, s catalog.OutboxSettlement) (deleted, failed int, err error)
	// OutboxHealth is how many events wait in a shard's outbox, how long
	// the oldest has waited (0 when none), and how many are parked.
	OutboxHealth(ctx context.Context, shard int) (catalog.OutboxHealth, error)
}

// Blobs reads chunk objects and writes change objects. s3blob.Store and
// inmem.Blobs implement it.
type Blobs interface {
	// Get reads a whole object; blob.ErrNotFound when it does not exist.
	Get(ctx context.Context, key string) ([]byte, error)
	// Put writes an object.
	Put(ctx context.Context, key string, body []byte) error
}

// MaxAttempts is how many failed publishes park an event (DESIGN 8).
const MaxAttempts = 5

// maxBackoff caps the wait between two publishes of a failing event.
const maxBackoff = 15 * time.Minute

// settleTimeout bounds a settle, which runs even when the pass's context
// has ended: what was published is then recorded, not published again.
const settleTimeout = 10 * time.Second

// Config tunes the relay; zero values take the defaults in brackets.
type Config struct {
	// SweepAge: the sweeper takes events written at least this long ago
	// [30s]; younger ones are the fast path's.
	SweepAge time.Duration
	// DrainSize is how many events one claim takes [50].
	DrainSize int
	// SweepBudget bounds one Sweep, leaving a Lambda invocation time to
	// settle [50s]; what is left waits for the next run.
	SweepBudget time.Duration
	// Lease is how long a claim keeps its events from other relays [2m]:
	// longer than a claim's publishing takes (its objects and its publish
	// calls), and the wait before the events of a relay that died are
	// published again.
	Lease time.Duration
	// RetryBackoff is how long a failed event waits before its next
	// publish, doubling with each failure counted against it
	// [SweepAge]; the MaxAttempts-th failure parks it.
	RetryBackoff time.Duration
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
	if c.Lease <= 0 {
		c.Lease = 2 * time.Minute
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = c.SweepAge
	}
}

// backoff is how long an event waits after its attempts-th failure.
func (c *Config) backoff(attempts int) time.Duration {
	d := c.RetryBackoff
	for i := 1; i < attempts && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// Relay publishes outbox events.
type Relay struct {
	cfg   Config
	store Store
	blobs Blobs
	pub   topic.Publisher
	log   *slog.Logger
	// Metrics records, after each sweep, the age of the oldest event still
	// waiting in any outbox (OutboxAgeSeconds) and how many events are
	// parked (OutboxParked), both alarmed on (nil: none).
	Metrics *metrics.Recorder
}

// New builds a relay.
func New(cfg Config, store Store, blobs Blobs, pub topic.Publisher, log *slog.Logger) *Relay {
	cfg.defaults()
	return &Relay{cfg: cfg, store: store, blobs: blobs, pub: pub, log: log}
}

// Stats count what a pass did.
type Stats struct {
	Taken     int // outbox events claimed
	Published int // events the topic accepted
	Empty     int // chunk events with no change: deleted unpublished
	Dropped   int // replayed events whose objects are gone: deleted unpublished
	Failed    int // events not published, left for a later pass after their backoff
	Parked    int // events that cannot be published, set aside for an operator
	// Unavailable counts the events of Failed whose publish call failed
	// as a whole (the topic unreachable): nothing counted against them.
	Unavailable int
}

// Add adds o's counts to s.
func (s *Stats) Add(o Stats) {
	s.Taken += o.Taken
	s.Published += o.Published
	s.Empty += o.Empty
	s.Dropped += o.Dropped
	s.Failed += o.Failed
	s.Parked += o.Parked
	s.Unavailable += o.Unavailable
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
// at least SweepAge ago, until none it can publish is left or SweepBudget
// has passed.
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
			"empty", total.Empty, "dropped", total.Dropped, "failed", total.Failed, "parked", total.Parked,
			"errors", len(errs))
	}
	if err := r.recordOutboxHealth(ctx); err != nil {
		errs = append(errs, err)
	}
	return total, errors.Join(errs...)
}

// recordOutboxHealth records how long the oldest event still waiting in
// any shard's outbox has waited (near zero while the relay keeps up,
// growing when it cannot publish: SNS refusing, a shard unreachable) and
// how many events are parked (zero unless an event cannot be published).
func (r *Relay) recordOutboxHealth(ctx context.Context) error {
	if r.Metrics == nil {
		return nil
	}
	var all catalog.OutboxHealth
	for shard := range r.store.ShardCount() {
		h, err := r.store.OutboxHealth(ctx, shard)
		if err != nil {
			return fmt.Errorf("outbox health of shard %d: %w", shard, err)
		}
		all.Pending += h.Pending
		all.Parked += h.Parked
		all.Oldest = max(all.Oldest, h.Oldest)
	}
	if all.Oldest > r.cfg.SweepAge {
		r.log.WarnContext(ctx, "change events wait in the outbox after a sweep", "pending", all.Pending, "oldest_s", all.Oldest.Seconds())
	}
	if all.Parked > 0 {
		r.log.WarnContext(ctx, "change events are parked in the outbox: they cannot be published (catalogctl dlq list outbox)",
			"parked", all.Parked)
	}
	r.Metrics.Emit(ctx, metrics.Fields{}, metrics.Duration(metrics.OutboxAgeSeconds, all.Oldest),
		metrics.Count(metrics.OutboxParked, all.Parked))
	return nil
}

// HandleSweep is the Lambda entry of the scheduled sweeper.
func (r *Relay) HandleSweep(ctx context.Context) error {
	_, err := r.Sweep(ctx)
	return err
}

// drain claims, publishes and settles batches of a shard's outbox until a
// claim comes back short (nothing else it may take: the events that failed
// are leased away for their backoff, so each claim takes the ones after
// them), the topic is unreachable (a batch whose publish calls all failed
// as a whole), or the deadline (zero: none) passes.
func (r *Relay) drain(ctx context.Context, shard int, f catalog.OutboxFilter, deadline time.Time) (Stats, error) {
	var total Stats
	for {
		claim, err := r.store.ClaimOutbox(ctx, shard, f, r.cfg.DrainSize, r.cfg.Lease)
		if err != nil {
			return total, err
		}
		if len(claim.Entries) == 0 {
			return total, nil
		}
		claimed := time.Now()
		st, settlement := r.publish(ctx, claim.Entries)
		st.Taken = len(claim.Entries)
		total.Add(st)
		if err := r.settle(ctx, shard, claim, settlement, claimed); err != nil {
			return total, err
		}
		if len(claim.Entries) < r.cfg.DrainSize || (st.Unavailable > 0 && st.Published == 0) ||
			(!deadline.IsZero() && time.Now().After(deadline)) {
			return total, nil
		}
	}
}

// settle records a claim's outcome, even when ctx has ended (within
// settleTimeout): an event published and not recorded would go out again.
func (r *Relay) settle(ctx context.Context, shard int, claim catalog.OutboxClaim, s catalog.OutboxSettlement, claimed time.Time) error {
	if held := time.Since(claimed); held > r.cfg.Lease {
		r.log.WarnContext(ctx, "an outbox claim outlived its lease: another relay may have published its events too",
			"shard", shard, "events", len(claim.Entries), "held_s", held.Seconds(), "lease_s", r.cfg.Lease.Seconds())
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	_, failed, err := r.store.SettleOutbox(sctx, shard, claim.Token, s)
	if err != nil {
		return fmt.Errorf("settle %d events (they are published again after the lease): %w", len(claim.Entries), err)
	}
	if failed < len(s.Failed) {
		r.log.WarnContext(ctx, "failed events were claimed by another relay after the lease; left to it",
			"shard", shard, "failed", len(s.Failed), "recorded", failed)
	}
	return nil
}

// failure is how a publish of an event failed.
type failure int

const (
	// unavailable: the publish call failed as a whole; nothing is known
	// of the event, nothing is counted against it.
	unavailable failure = iota
	// failed: the event failed; it is tried again after its backoff, and
	// parked at its MaxAttempts-th failure.
	failed
	// refused: the event can never be published (the topic refused it
	// for what it is, it is over the envelope bound, it does not read):
	// parked at once.
	refused
)

// publish publishes what entries hold and decides the fate of each: done
// (published, or nothing to publish), or failed: released after a backoff,
// or parked.
func (r *Relay) publish(ctx context.Context, entries []catalog.OutboxEntry) (Stats, catalog.OutboxSettlement) {
	var st Stats
	var out catalog.OutboxSettlement
	fail := func(e catalog.OutboxEntry, how failure, reason string) {
		if how == failed && ctx.Err() != nil {
			how = unavailable // the pass was cancelled (a deadline): not the event's doing
		}
		f := r.decide(e, how, reason)
		out.Failed = append(out.Failed, f)
		switch {
		case f.Park:
			st.Parked++
			r.log.ErrorContext(ctx, "event parked: it cannot be published (catalogctl dlq list outbox)", "retailer_id", e.RetailerID,
				"generation", e.Generation, "type", e.Type, "seq", e.Seq, "attempts", e.Attempts+1, "err", reason)
		case how == unavailable:
			st.Failed++
			st.Unavailable++
		default:
			st.Failed++
			r.log.WarnContext(ctx, "event not published; it is tried again later", "retailer_id", e.RetailerID,
				"generation", e.Generation, "type", e.Type, "seq", e.Seq, "attempts", e.Attempts+1,
				"retry_in_s", f.RetryAfter.Seconds(), "err", reason)
		}
	}
	var msgs []topic.Message
	var at []int // entry of each message
	for i, e := range entries {
		if e.Unreadable != "" {
			fail(e, refused, "the outbox row does not read as an event: "+e.Unreadable)
			continue
		}
		env, ok, err := r.envelope(ctx, e)
		switch {
		case errors.Is(err, errGone):
			r.log.ErrorContext(ctx, "replayed event dropped: its objects are gone (older than the bucket keeps them)",
				"retailer_id", e.RetailerID, "generation", e.Generation, "seq", e.Seq)
			out.Done = append(out.Done, e.ID)
			st.Dropped++
			continue
		case err != nil:
			fail(e, failed, err.Error())
			continue
		case !ok:
			out.Done = append(out.Done, e.ID)
			st.Empty++
			continue
		}
		body, err := json.Marshal(env)
		if err != nil {
			fail(e, refused, fmt.Sprintf("encode event %s: %v", env.ID, err))
			continue
		}
		if len(body) > message.MaxEnvelopeBytes {
			fail(e, refused, fmt.Sprintf("event %s is %d bytes, over the envelope bound of %d bytes", env.ID, len(body), message.MaxEnvelopeBytes))
			continue
		}
		msgs = append(msgs, topic.Message{Body: string(body), Attributes: map[string]string{
			message.AttrType: env.Type, message.AttrRetailerID: env.RetailerID}})
		at = append(at, i)
	}
	for start := 0; start < len(msgs); start += topic.MaxBatch {
		end := min(start+topic.MaxBatch, len(msgs))
		errs, err := r.pub.Publish(ctx, msgs[start:end])
		if err != nil {
			// Nothing of this call is known published: those events stay.
			r.log.WarnContext(ctx, "publish failed; the events stay in the outbox", "events", end-start, "err", err)
			for k := start; k < end; k++ {
				fail(entries[at[k]], unavailable, "publish: "+err.Error())
			}
			continue
		}
		for k, perr := range errs {
			e := entries[at[start+k]]
			switch {
			case perr != nil && errors.Is(perr, topic.ErrRefused):
				fail(e, refused, perr.Error())
			case perr != nil:
				fail(e, failed, perr.Error())
			default:
				out.Done = append(out.Done, e.ID)
				st.Published++
				metering.For(ctx, e.RetailerID) // one SNS publish of the retailer (DESIGN 10)
				metering.Count(ctx, usage.Usage{SNSPublishes: 1})
			}
		}
	}
	return st, out
}

// decide is the fate of a failed event: parked when it can never be
// published or this failure is its MaxAttempts-th; otherwise leased away
// for its backoff, which doubles with each failure counted against it.
func (r *Relay) decide(e catalog.OutboxEntry, how failure, reason string) catalog.OutboxFailure {
	f := catalog.OutboxFailure{ID: e.ID, Error: reason, Counted: how != unavailable}
	switch {
	case how == refused || (how == failed && e.Attempts+1 >= MaxAttempts):
		f.Park = true
	case how == failed:
		f.RetryAfter = r.cfg.backoff(e.Attempts + 1)
	default:
		f.RetryAfter = r.cfg.backoff(1)
	}
	return f
}

// errGone: a replayed chunk's change object and chunk object are both gone.
var errGone = errors.New("change object and chunk object are gone")

// envelope builds the event of an outbox entry; ok is false when there is
// nothing to publish (a chunk that changed nothing).
func (r *Relay) envelope(ctx context.Context, e catalog.OutboxEntry) (message.Envelope, bool, error) {
	env := message.Envelope{
		ID: message.EventID(e.Type, e.RetailerID, e.Generation, e.Seq), Type: e.Type,
		Time: e.EventTime.UTC(), RetailerID: e.RetailerID, Generation: e.Generation,
	}
	if e.Type != message.TypeChanges {
		if e.Status == nil {
			return env, false, fmt.Errorf("lifecycle event %d has no status", e.ID)
		}
		st := message.StatusOf(*e.Status)
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
	ops, err := message.ReadChunk(bytes.NewReader(body))
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
			out = message.AppendChunkLine(out, op)
			count++
		}
	}
	if count != e.Changed {
		r.log.WarnContext(ctx, "change object lines differ from the apply's count", "retailer_id", e.RetailerID,
			"generation", e.Generation, "seq", e.Seq, "lines", count, "changed", e.Changed)
	}
	key = keys.Change(e.RetailerID, e.Generation, e.Seq)
	if err := r.blobs.Put(ctx, key, out); err != nil {
		return "", "", 0, fmt.Errorf("write change object %s: %w", key, err)
	}
	return key, sha256Hex(out), count, nil
}

// findChangeObject finds the change object of a replayed chunk: the one the
// relay wrote under changes/ when the chunk had ops that changed nothing,
// else the chunk object itself.
func (r *Relay) findChangeObject(ctx context.Context, e catalog.OutboxEntry) (key, sum string, count int, err error) {
	for _, key := range []string{keys.Change(e.RetailerID, e.Generation, e.Seq), keys.Chunk(e.RetailerID, e.Generation, e.Seq)} {
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
