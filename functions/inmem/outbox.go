package inmem

import (
	"context"
	"slices"
	"time"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// outbox is the Store's change events, as pgstore's shard outbox holds
// them: one per applied chunk, one per lifecycle state change.
type outbox struct {
	entries []catalog.OutboxEntry
	nextID  int64
	locked  map[int64]bool // taken by a DrainOutbox in progress
	// history is every event ever written but replays: what Replay
	// finds (pgstore finds it in applied_chunks and generations).
	history []catalog.OutboxEntry
}

func (o *outbox) add(e catalog.OutboxEntry) {
	o.nextID++
	e.ID = o.nextID
	o.entries = append(o.entries, e)
	o.history = append(o.history, e)
}

// pending reports whether an event of this type, generation and (for
// changes) chunk is still in the outbox.
func (o *outbox) pending(retailerID, typ string, gen int64, seq int) bool {
	for _, e := range o.entries {
		if e.RetailerID == retailerID && e.Type == typ && e.Generation == gen && (typ != "catalog.changes" || e.Seq == seq) {
			return true
		}
	}
	return false
}

// Replay writes again the change events of the retailer's chunks applied
// since since and the lifecycle event of each generation whose state
// changed since then (its state now), under their original times, unless
// the same event is still pending, as pgstore's replay_events does.
func (s *Store) Replay(ctx context.Context, retailerID string, since time.Time) (changes, lifecycle int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil || st == nil {
		return 0, 0, err
	}
	now := s.now()
	chunks := map[[2]int64]bool{}
	stateAt := map[int64]time.Time{} // the last state change of each generation
	for _, h := range s.outbox.history {
		if h.RetailerID != retailerID {
			continue
		}
		if h.Type != "catalog.changes" {
			stateAt[h.Generation] = h.EventTime
			continue
		}
		k := [2]int64{h.Generation, int64(h.Seq)}
		if chunks[k] || h.EventTime.Before(since) || s.outbox.pending(retailerID, h.Type, h.Generation, h.Seq) {
			continue
		}
		chunks[k] = true
		s.outbox.nextID++
		s.outbox.entries = append(s.outbox.entries, catalog.OutboxEntry{ID: s.outbox.nextID, Type: h.Type, RetailerID: retailerID,
			Generation: h.Generation, Seq: h.Seq, EventTime: h.EventTime, CreatedAt: now})
		changes++
	}
	gens := make([]int64, 0, len(stateAt))
	for gen := range stateAt {
		gens = append(gens, gen)
	}
	slices.Sort(gens)
	for _, gen := range gens {
		g := st.gens[gen]
		typ := "catalog.snapshot." + string(g.State)
		if !lifecycleStates[g.State] || stateAt[gen].Before(since) || s.outbox.pending(retailerID, typ, gen, 0) {
			continue
		}
		status := g.status(now)
		s.outbox.nextID++
		s.outbox.entries = append(s.outbox.entries, catalog.OutboxEntry{ID: s.outbox.nextID, Type: typ, RetailerID: retailerID,
			Generation: gen, Status: &status, EventTime: stateAt[gen], CreatedAt: now})
		lifecycle++
	}
	return changes, lifecycle, nil
}

// lifecycleStates are the states whose entry writes an event.
var lifecycleStates = map[catalog.State]bool{
	catalog.StateApplied: true, catalog.StateRejected: true, catalog.StateHeld: true, catalog.StateSuperseded: true,
}

// watchStates notes the states of st's generations; the function it returns,
// called after a change of st under the same lock, writes the lifecycle
// event of every generation that entered a state with one (the trigger of
// the shard migration 0020, in memory).
func (s *Store) watchStates(retailerID string, st *retailerState) func() {
	if st == nil {
		return func() {}
	}
	before := make(map[int64]catalog.State, len(st.gens))
	for gen, g := range st.gens {
		before[gen] = g.State
	}
	return func() {
		var changed []int64
		for gen, g := range st.gens {
			if g.State != before[gen] {
				g.stateChangedAt = s.now()
			}
			if g.State != before[gen] && lifecycleStates[g.State] {
				changed = append(changed, gen)
			}
		}
		slices.Sort(changed)
		now := s.now()
		for _, gen := range changed {
			status := st.gens[gen].status(s.now())
			s.outbox.add(catalog.OutboxEntry{Type: "catalog.snapshot." + string(status.State), RetailerID: retailerID,
				Generation: gen, Status: &status, EventTime: now, CreatedAt: now})
		}
	}
}

// Outbox returns the change events waiting to be published, oldest first.
func (s *Store) Outbox() []catalog.OutboxEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.outbox.entries)
}

// OutboxStats is how many events of shard's retailers wait and how long
// the oldest has waited (by the store's clock).
func (s *Store) OutboxStats(ctx context.Context, shard int) (pending int64, oldest time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, e := range s.outbox.entries {
		if s.retailers[e.RetailerID].Shard == shard {
			pending++
			oldest = max(oldest, now.Sub(e.CreatedAt))
		}
	}
	return pending, oldest, nil
}

// RetailerShard is the shard a retailer was placed on; catalog.ErrNotFound when unknown.
func (s *Store) RetailerShard(ctx context.Context, retailerID string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.retailers[retailerID]
	if !ok {
		return 0, retailerNotFound(retailerID)
	}
	return r.Shard, nil
}

// DrainOutbox takes up to limit events of shard's retailers that f picks,
// oldest first, skipping those another DrainOutbox holds, passes them to
// publish (without the store's lock) and deletes those it reports done.
func (s *Store) DrainOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int,
	publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error) {
	s.mu.Lock()
	var taken []catalog.OutboxEntry
	now := s.now()
	for _, e := range s.outbox.entries {
		if len(taken) == limit {
			break
		}
		if s.outbox.locked[e.ID] || s.retailers[e.RetailerID].Shard != shard ||
			(f.RetailerID != "" && e.RetailerID != f.RetailerID) || now.Sub(e.CreatedAt) < f.OlderThan {
			continue
		}
		taken = append(taken, e)
	}
	if s.outbox.locked == nil {
		s.outbox.locked = map[int64]bool{}
	}
	for _, e := range taken {
		s.outbox.locked[e.ID] = true
	}
	s.mu.Unlock()
	if len(taken) == 0 {
		return 0, nil
	}

	done, err := publish(ctx, taken)

	s.mu.Lock()
	defer s.mu.Unlock()
	remove := map[int64]bool{}
	for i, e := range taken {
		delete(s.outbox.locked, e.ID)
		if err == nil && i < len(done) && done[i] {
			remove[e.ID] = true
		}
	}
	s.outbox.entries = slices.DeleteFunc(s.outbox.entries, func(e catalog.OutboxEntry) bool { return remove[e.ID] })
	if err != nil {
		return 0, err // as a rolled-back transaction: nothing taken
	}
	return len(taken), nil
}
