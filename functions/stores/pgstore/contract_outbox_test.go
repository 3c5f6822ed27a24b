package pgstore_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// The outbox part of the contract (DESIGN 8): a change event per applied
// chunk and per lifecycle state change, written with the change, and a
// drain that hands each event to one relay at a time and deletes only what
// was published.

// drainAll takes and deletes every pending event of retailerID, oldest first.
func drainAll(t *testing.T, s Store, retailerID string) []catalog.OutboxEntry {
	t.Helper()
	shard, err := s.RetailerShard(tctx(t), retailerID)
	require.NoError(t, err)
	var out []catalog.OutboxEntry
	for {
		n, err := s.DrainOutbox(tctx(t), shard, catalog.OutboxFilter{RetailerID: retailerID}, 3,
			func(_ context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
				out = append(out, entries...)
				done := make([]bool, len(entries))
				for i := range done {
					done[i] = true
				}
				return done, nil
			})
		require.NoError(t, err)
		if n == 0 {
			return out
		}
	}
}

// kinds lists entries as "type" or "type seq changed unchanged...".
func kinds(entries []catalog.OutboxEntry) []string {
	var out []string
	for _, e := range entries {
		if e.Type == message.TypeChanges {
			u := slices.Clone(e.Unchanged)
			slices.Sort(u)
			out = append(out, e.Type+" "+string(rune('0'+e.Seq))+" "+string(rune('0'+e.Changed))+" "+joined(u))
			continue
		}
		out = append(out, e.Type)
	}
	return out
}

func joined(s []string) string {
	out := "["
	for i, v := range s {
		if i > 0 {
			out += " "
		}
		out += v
	}
	return out + "]"
}

func testChangeEvents(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := start(t, s, r, 2, catalog.Counts{Inserted: 2, Products: 2})
	applyChunk(t, s, r, g1, 0, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`))
	applyChunk(t, s, r, g1, 0, upsert("a", `{"v":"1"}`)) // a duplicate: no event
	got := drainAll(t, s, r)
	require.Equal(t, []string{"catalog.changes 0 2 []"}, kinds(got))
	e := got[0]
	require.Equal(t, g1, e.Generation)
	require.Equal(t, keys.Chunk(r, g1, 0), e.ObjectKey, "a claim check on the chunk object")
	require.Len(t, e.SHA256, 64)
	require.False(t, e.EventTime.IsZero())
	require.Nil(t, e.Status)
	require.Empty(t, drainAll(t, s, r), "a drained event is gone")

	// The last chunk: a equal, zz absent, c new; the generation is applied.
	applyChunk(t, s, r, g1, 1, upsert("a", `{"v":"1"}`), del("zz"), upsert("c", `{"v":"1"}`))
	got = drainAll(t, s, r)
	require.Equal(t, []string{"catalog.changes 1 1 [a zz]", "catalog.snapshot.applied"}, kinds(got))
	st := got[1].Status
	require.NotNil(t, st, "a lifecycle event carries the generation's status")
	require.Equal(t, catalog.StateApplied, st.State)
	require.Equal(t, g1, st.Generation)
	require.Equal(t, 2, st.ChunksApplied)
	require.NotNil(t, st.AppliedAt)

	// A chunk that changes nothing still leaves its (empty) record.
	g2 := start(t, s, r, 1, catalog.Counts{Unchanged: 3, Products: 3})
	applyChunk(t, s, r, g2, 0, upsert("b", `{"v":"1"}`))
	require.Equal(t, []string{"catalog.changes 0 0 [b]", "catalog.snapshot.applied"}, kinds(drainAll(t, s, r)))
}

func testLifecycleEvents(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Reject(tctx(t), r, g1, catalog.Rejection{Code: "malformed_csv", Message: "bad quote", Line: 3})))
	g2, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Hold(tctx(t), r, g2, "empty_snapshot", "empty", catalog.Counts{})))
	got := drainAll(t, s, r)
	require.Equal(t, []string{message.TypeSnapshotRejected, message.TypeSnapshotHeld}, kinds(got))
	require.Equal(t, "malformed_csv", got[0].Status.ErrorCode)
	require.Equal(t, 3, got[0].Status.ErrorLine)
	require.Equal(t, catalog.StateHeld, got[1].Status.State)

	// Confirmed, then overtaken by a newer upload: superseded, by it.
	require.NoError(t, s.Confirm(tctx(t), r, g2))
	require.Empty(t, drainAll(t, s, r), "a confirmation is no lifecycle event")
	g3 := start(t, s, r, 1, catalog.Counts{})
	got = drainAll(t, s, r)
	require.Equal(t, []string{message.TypeSnapshotSuperseded}, kinds(got))
	require.Equal(t, g2, got[0].Generation)
	require.Equal(t, &g3, got[0].Status.SupersededBy)
}

func testDrainOutbox(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	for range 4 {
		g, _ := arrive(t, s, r)
		require.NoError(t, errOf(s.Reject(tctx(t), r, g, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 1})))
	}
	shard, err := s.RetailerShard(tctx(t), r)
	require.NoError(t, err)
	mine := catalog.OutboxFilter{RetailerID: r}

	// A failed publish deletes nothing; a partial one deletes what it reports.
	n, err := s.DrainOutbox(tctx(t), shard, mine, 10, func(context.Context, []catalog.OutboxEntry) ([]bool, error) {
		return nil, errors.New("topic down")
	})
	require.Error(t, err)
	require.Zero(t, n)
	var first []int64
	_, err = s.DrainOutbox(tctx(t), shard, mine, 10, func(_ context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
		for _, e := range entries {
			first = append(first, e.Generation)
		}
		return []bool{true, false, true, false}, nil
	})
	require.NoError(t, err)
	require.Len(t, first, 4)
	left := drainAll(t, s, r)
	require.Equal(t, []int64{first[1], first[3]}, []int64{left[0].Generation, left[1].Generation}, "the unpublished stay, in order")

	// Two relays at once never take the same event.
	for range 6 {
		g, _ := arrive(t, s, r)
		require.NoError(t, errOf(s.Reject(tctx(t), r, g, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 1})))
	}
	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.DrainOutbox(tctx(t), shard, mine, 3, func(_ context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
				mu.Lock()
				for _, e := range entries {
					seen[e.ID]++
				}
				mu.Unlock()
				<-hold // both hold their events at once
				return make([]bool, len(entries)), nil
			})
			require.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 6
	}, 10*time.Second, 10*time.Millisecond, "each relay took three different events")
	close(hold)
	wg.Wait()
	for id, times := range seen {
		require.Equal(t, 1, times, "event %d taken twice", id)
	}
	require.Len(t, drainAll(t, s, r), 6, "nothing was reported published")

	// The sweeper's filter: only events at least OlderThan old.
	g, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Reject(tctx(t), r, g, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 1})))
	n, err = s.DrainOutbox(tctx(t), shard, catalog.OutboxFilter{OlderThan: time.Hour}, 100,
		func(_ context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
			for _, e := range entries {
				require.NotEqual(t, r, e.RetailerID, "an event of a second ago is not an hour old")
			}
			return make([]bool, len(entries)), nil
		})
	require.NoError(t, err)
	_ = n
	require.Len(t, drainAll(t, s, r), 1)
}

func testConsumerVersions(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	newer := func(consumer string, ids []string, gens []int64) []bool {
		t.Helper()
		got, err := s.NewerVersions(tctx(t), consumer, r, ids, gens)
		require.NoError(t, err)
		return got
	}
	record := func(consumer string, ids []string, gens []int64) {
		t.Helper()
		require.NoError(t, s.RecordVersions(tctx(t), consumer, r, ids, gens))
	}
	require.Equal(t, []bool{true, true}, newer("analytics", []string{"a", "b"}, []int64{5, 5}), "nothing recorded yet")
	require.Equal(t, []bool{true, true}, newer("analytics", []string{"a", "b"}, []int64{5, 5}), "a read records nothing")
	record("analytics", []string{"a", "b"}, []int64{5, 5})
	require.Equal(t, []bool{false, false, true, true}, newer("analytics", []string{"a", "b", "c", "a"}, []int64{5, 4, 1, 6}),
		"equal and older changes are not newer; answers in the order asked, a key twice answered twice")
	require.Equal(t, []bool{true}, newer("webhooks", []string{"a"}, []int64{1}), "each consumer has its own")

	// Only raising: a record of an older generation, or of the same one
	// again, changes nothing; a key given twice keeps its highest.
	record("analytics", []string{"a", "b"}, []int64{3, 5})
	require.Equal(t, []bool{false, true}, newer("analytics", []string{"a", "a"}, []int64{5, 6}))
	record("analytics", []string{"c", "c", "d"}, []int64{7, 2, 1})
	require.Equal(t, []bool{false, true, false}, newer("analytics", []string{"c", "c", "d"}, []int64{7, 8, 1}))

	// Many records of one key at once (two deliveries of one change): no
	// deadlock, no error, the highest stays.
	var wg sync.WaitGroup
	for g := int64(10); g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			assert.NoError(t, s.RecordVersions(tctx(t), "analytics", r, []string{"z", "y", "x"}, []int64{g, g, g}))
		}()
	}
	wg.Wait()
	require.Equal(t, []bool{false, false, false, true}, newer("analytics", []string{"x", "y", "z", "z"}, []int64{19, 19, 19, 20}))

	got, err := s.NewerVersions(tctx(t), "analytics", r, nil, nil)
	require.NoError(t, err)
	require.Empty(t, got)
	require.NoError(t, s.RecordVersions(tctx(t), "analytics", r, nil, nil))
	_, err = s.NewerVersions(tctx(t), "analytics", r, []string{"a"}, nil)
	require.Error(t, err)
	require.Error(t, s.RecordVersions(tctx(t), "analytics", r, []string{"a"}, nil))
	_, err = s.NewerVersions(tctx(t), "analytics", id("nobody"), []string{"a"}, []int64{1})
	require.ErrorIs(t, err, catalog.ErrNotFound)
	require.ErrorIs(t, s.RecordVersions(tctx(t), "analytics", id("nobody"), []string{"a"}, []int64{1}), catalog.ErrNotFound)
}

func testWebhooks(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	_, err := s.Webhook(tctx(t), r)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	require.NoError(t, s.SetWebhook(tctx(t), catalog.Webhook{RetailerID: r, URL: "https://a.example/1", SecretSealed: []byte{1, 2}}))
	require.NoError(t, s.SetWebhook(tctx(t), catalog.Webhook{RetailerID: r, URL: "https://a.example/2", SecretSealed: []byte{3}}))
	w, err := s.Webhook(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, "https://a.example/2", w.URL, "the newest replaces the old")
	require.Equal(t, []byte{3}, w.SecretSealed)
	require.Equal(t, r, w.RetailerID)
	require.NoError(t, s.DeleteWebhook(tctx(t), r))
	require.NoError(t, s.DeleteWebhook(tctx(t), r))
	_, err = s.Webhook(tctx(t), r)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	require.Error(t, s.SetWebhook(tctx(t), catalog.Webhook{RetailerID: id("nobody"), URL: "https://a.example/", SecretSealed: []byte{1}}),
		"only a registered retailer has a webhook")
}

func testReplay(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	before := time.Now().Add(-time.Minute)
	g1 := start(t, s, r, 2, catalog.Counts{Inserted: 2, Products: 2})
	applyChunk(t, s, r, g1, 0, upsert("a", `{"v":"1"}`))
	applyChunk(t, s, r, g1, 1, upsert("b", `{"v":"1"}`))
	g2, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Reject(tctx(t), r, g2, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 2})))
	first := drainAll(t, s, r)
	require.Len(t, first, 4, "two chunks, applied, rejected")

	changes, lifecycle, err := s.Replay(tctx(t), r, before)
	require.NoError(t, err)
	require.Equal(t, 2, changes)
	require.Equal(t, 2, lifecycle)
	changes, lifecycle, err = s.Replay(tctx(t), r, before)
	require.NoError(t, err)
	require.Zero(t, changes+lifecycle, "what is still pending is not written twice")
	replayed := drainAll(t, s, r)
	require.Len(t, replayed, 4)
	times := map[string]time.Time{} // the original events' times, by type and chunk
	key := func(e catalog.OutboxEntry) string { return e.Type + "/" + string(rune('0'+e.Seq)) }
	for _, e := range first {
		times[key(e)] = e.EventTime
	}
	for _, e := range replayed {
		switch e.Type {
		case message.TypeChanges:
			require.Empty(t, e.ObjectKey, "a replayed chunk: the relay finds its change object")
			require.True(t, e.Replayed())
			require.Equal(t, g1, e.Generation)
		case message.TypeSnapshotApplied:
			require.Equal(t, catalog.StateApplied, e.Status.State)
		case message.TypeSnapshotRejected:
			require.Equal(t, "malformed_csv", e.Status.ErrorCode)
		default:
			t.Fatalf("unexpected replayed event %s", e.Type)
		}
		require.True(t, times[key(e)].Equal(e.EventTime), "%s keeps its time: %s, replayed %s", key(e), times[key(e)], e.EventTime)
	}
	changes, lifecycle, err = s.Replay(tctx(t), r, time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Zero(t, changes+lifecycle, "nothing since an hour from now")
}
