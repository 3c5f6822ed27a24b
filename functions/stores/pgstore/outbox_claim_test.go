package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// The relay's three steps on the outbox (I12; docs/ARCHITECTURE.md,
// "Change events"): a claim leases rows in one statement, a settle records
// what became of them in another, and no transaction stays open between.

// rejections writes n lifecycle events of retailerID (n rejected uploads)
// and returns their generations, oldest first.
func rejections(t *testing.T, sh *pgstore.Shard, retailerID string, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	var gens []int64
	for range n {
		gen, err := sh.ReserveGeneration(ctx, retailerID, "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		d, err := sh.BeginDiff(ctx, retailerID, gen, "")
		require.NoError(t, err)
		require.True(t, d.Proceed, d.Reason)
		require.NoError(t, errOf(sh.Reject(ctx, retailerID, gen, catalog.Rejection{Code: "malformed_csv", Message: "bad", Line: 1})))
		gens = append(gens, gen)
	}
	return gens
}

func generationsOf(entries []catalog.OutboxEntry) []int64 {
	var out []int64
	for _, e := range entries {
		out = append(out, e.Generation)
	}
	return out
}

func idsOf(entries []catalog.OutboxEntry) []int64 {
	var out []int64
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

// claimOf claims up to limit events of retailerID for a minute.
func claimOf(t *testing.T, sh *pgstore.Shard, retailerID string, limit int) catalog.OutboxClaim {
	t.Helper()
	c, err := sh.ClaimOutbox(context.Background(), catalog.OutboxFilter{RetailerID: retailerID}, limit, time.Minute)
	require.NoError(t, err)
	return c
}

// A claim leases its rows, oldest first: the next claim takes the rows
// after them, the sweeper's filter only old rows. A settle deletes what was
// done and records each failure: counted or not, with its error, leased
// away for its backoff (then claimable again) or released at once.
func TestClaimLeasesAndSettleRecords(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	gens := rejections(t, sh, "r1", 5)

	first := claimOf(t, sh, "r1", 2)
	require.Equal(t, gens[:2], generationsOf(first.Entries), "oldest first")
	require.NotZero(t, first.Token)
	require.Zero(t, first.Entries[0].Attempts)
	second := claimOf(t, sh, "r1", 10)
	require.Equal(t, gens[2:], generationsOf(second.Entries), "the leased rows are passed over")
	require.NotEqual(t, first.Token, second.Token)
	require.Empty(t, claimOf(t, sh, "r1", 10).Entries, "every row is leased")
	old, err := sh.ClaimOutbox(ctx, catalog.OutboxFilter{OlderThan: 30 * time.Second}, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, old.Entries)

	// first: one published, one failed for a minute (counted). second:
	// one failed, not counted, released at once; the others published.
	deleted, failed, err := sh.SettleOutbox(ctx, first.Token, catalog.OutboxSettlement{
		Done:   []int64{first.Entries[0].ID},
		Failed: []catalog.OutboxFailure{{ID: first.Entries[1].ID, Error: "throttled", Counted: true, RetryAfter: time.Minute}}})
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 1}, [2]int{deleted, failed})
	deleted, failed, err = sh.SettleOutbox(ctx, second.Token, catalog.OutboxSettlement{
		Done:   []int64{second.Entries[1].ID, second.Entries[2].ID},
		Failed: []catalog.OutboxFailure{{ID: second.Entries[0].ID, Error: "topic down"}}})
	require.NoError(t, err)
	require.Equal(t, [2]int{2, 1}, [2]int{deleted, failed})

	again := claimOf(t, sh, "r1", 10)
	require.Equal(t, []int64{gens[2]}, generationsOf(again.Entries), "released at once; the other waits out its backoff")
	require.Zero(t, again.Entries[0].Attempts, "a failure not counted")
	_, _, err = sh.SettleOutbox(ctx, again.Token, catalog.OutboxSettlement{Failed: []catalog.OutboxFailure{{ID: again.Entries[0].ID}}})
	require.NoError(t, err)
	pgstoretest.AgeOutbox(t, s, time.Minute+time.Second)
	again = claimOf(t, sh, "r1", 10)
	require.Equal(t, []int64{gens[1], gens[2]}, generationsOf(again.Entries), "the backoff has passed")
	require.Equal(t, []int{1, 0}, []int{again.Entries[0].Attempts, again.Entries[1].Attempts})
	old, err = sh.ClaimOutbox(ctx, catalog.OutboxFilter{OlderThan: 30 * time.Second}, 10, time.Minute)
	require.NoError(t, err)
	require.Empty(t, old.Entries, "old enough for the sweeper now, but leased")

	var lastError string
	require.NoError(t, sh.Pool().QueryRow(ctx, `SELECT last_error FROM outbox WHERE id = $1`, again.Entries[1].ID).Scan(&lastError))
	require.Equal(t, "topic down", lastError, "a failure without an error keeps the last one")
}

// Claims at once never take the same row.
func TestConcurrentClaimsAreDisjoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	rejections(t, sh, "r1", 24)
	pgstoretest.AgeOutbox(t, s, time.Minute)

	var mu sync.Mutex
	seen := map[int64]int{}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var c catalog.OutboxClaim
				var err error
				if i%2 == 0 { // the fast path and the sweeper, at once
					c, err = sh.ClaimOutbox(ctx, catalog.OutboxFilter{RetailerID: "r1"}, 2, time.Minute)
				} else {
					c, err = sh.ClaimOutbox(ctx, catalog.OutboxFilter{OlderThan: 30 * time.Second}, 3, time.Minute)
				}
				if !assertNoError(t, err) || len(c.Entries) == 0 {
					return
				}
				mu.Lock()
				for _, e := range c.Entries {
					seen[e.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.Len(t, seen, 24)
	for id, n := range seen {
		require.Equal(t, 1, n, "row %d claimed %d times", id, n)
	}
}

func assertNoError(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

// A claimer that dies leaves its rows leased: once the lease has passed
// they are claimed again, the same rows; the dead claim's settle then
// changes no failure (the new claim holds the rows), though what it
// reports published is deleted (it was published).
func TestExpiredLeaseIsClaimedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	rejections(t, sh, "r1", 2)
	dead := claimOf(t, sh, "r1", 10)
	require.Len(t, dead.Entries, 2)
	require.Empty(t, claimOf(t, sh, "r1", 10).Entries)

	pgstoretest.AgeOutbox(t, s, time.Minute+time.Second)
	live := claimOf(t, sh, "r1", 10)
	require.Equal(t, idsOf(dead.Entries), idsOf(live.Entries), "the same rows: the same event ids")
	deleted, failed, err := sh.SettleOutbox(ctx, dead.Token, catalog.OutboxSettlement{
		Done:   []int64{dead.Entries[0].ID},
		Failed: []catalog.OutboxFailure{{ID: dead.Entries[1].ID, Error: "late", Counted: true, Park: true}}})
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 0}, [2]int{deleted, failed}, "the failure is the live claim's to record")
	h, err := sh.OutboxHealth(ctx)
	require.NoError(t, err)
	require.Equal(t, catalog.OutboxHealth{Pending: 1, Oldest: h.Oldest, Parked: 0}, h)
	_, failed, err = sh.SettleOutbox(ctx, live.Token, catalog.OutboxSettlement{Done: []int64{live.Entries[1].ID}})
	require.NoError(t, err)
	require.Zero(t, failed)
	require.Empty(t, pgstoretest.Outbox(t, s))
}

// A parked row is never claimed (by the fast path or the sweeper), is
// counted apart from those waiting, and is listed with its error (bounded)
// until an operator unparks it, attempts reset: then it is claimed again.
// Across shards, by retailer or every one.
func TestParkedEventsWaitForAnOperator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	for i, id := range []string{"p0", "p1", "q0"} {
		require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: id, Shard: []int{0, 1, 0}[i], TokenHash: []byte(id)}))
	}
	rejections(t, s.Shards[0], "p0", 2)
	rejections(t, s.Shards[1], "p1", 1)
	rejections(t, s.Shards[0], "q0", 1)
	park := func(sh *pgstore.Shard, retailerID, reason string) {
		t.Helper()
		c := claimOf(t, sh, retailerID, 10)
		var st catalog.OutboxSettlement
		for _, e := range c.Entries {
			st.Failed = append(st.Failed, catalog.OutboxFailure{ID: e.ID, Error: reason, Counted: true, Park: true})
		}
		_, failed, err := sh.SettleOutbox(ctx, c.Token, st)
		require.NoError(t, err)
		require.Len(t, c.Entries, failed)
	}
	park(s.Shards[0], "p0", strings.Repeat("é", 2000)) // 4000 bytes
	park(s.Shards[1], "p1", "sns refused the message: InvalidParameter")

	pgstoretest.AgeOutbox(t, s, time.Hour)
	for shard := range 2 {
		old, err := s.ClaimOutbox(ctx, shard, catalog.OutboxFilter{OlderThan: 30 * time.Second}, 10, time.Minute)
		require.NoError(t, err)
		for _, e := range old.Entries {
			require.Equal(t, "q0", e.RetailerID, "the sweeper takes no parked row")
		}
		require.Len(t, old.Entries, 1-shard, "q0's event, on shard 0")
		for _, e := range old.Entries { // released, unpublished
			_, _, err = s.SettleOutbox(ctx, shard, old.Token, catalog.OutboxSettlement{Failed: []catalog.OutboxFailure{{ID: e.ID}}})
			require.NoError(t, err)
		}
	}
	require.Empty(t, claimOf(t, s.Shards[0], "p0", 10).Entries, "nor the fast path")
	h, err := s.OutboxHealth(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 2}, [2]int64{h.Pending, h.Parked}, "q0's waits, p0's two are parked")
	require.Greater(t, h.Oldest, 59*time.Minute, "the age of the oldest row waiting, q0's")

	all, total, err := s.ParkedOutbox(ctx, "", 2)
	require.NoError(t, err)
	require.EqualValues(t, 3, total)
	require.Len(t, all, 2, "at most the limit")
	mine, total, err := s.ParkedOutbox(ctx, "p0", 10)
	require.NoError(t, err)
	require.EqualValues(t, 2, total)
	require.Len(t, mine, 2)
	e := mine[0]
	require.Equal(t, "p0", e.RetailerID)
	require.Equal(t, 0, e.Shard)
	require.Equal(t, "catalog.snapshot.rejected", e.Type)
	require.Equal(t, 1, e.Attempts)
	require.LessOrEqual(t, len(e.LastError), catalog.MaxMessageBytes, "the error is bounded")
	require.True(t, strings.HasPrefix(e.LastError, "éé"))
	require.False(t, e.ParkedAt.IsZero())
	other, _, err := s.ParkedOutbox(ctx, "p1", 10)
	require.NoError(t, err)
	require.Equal(t, []int{1}, []int{other[0].Shard})
	require.Equal(t, "sns refused the message: InvalidParameter", other[0].LastError)

	n, left, err := s.UnparkOutbox(ctx, "q0", 10)
	require.NoError(t, err)
	require.Equal(t, [2]int64{0, 0}, [2]int64{n, left}, "q0 has none parked")
	n, left, err = s.UnparkOutbox(ctx, "p0", 1)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 1}, [2]int64{n, left})
	back := claimOf(t, s.Shards[0], "p0", 10)
	require.Len(t, back.Entries, 1)
	require.Zero(t, back.Entries[0].Attempts, "attempts reset")
	n, left, err = s.UnparkOutbox(ctx, "", 100)
	require.NoError(t, err)
	require.Equal(t, [2]int64{2, 0}, [2]int64{n, left}, "the rest, on both shards")
	n, _, err = s.UnparkOutbox(ctx, "", 100)
	require.NoError(t, err)
	require.Zero(t, n, "a second redrive moves nothing")
	_, total, err = s.ParkedOutbox(ctx, "", 10)
	require.NoError(t, err)
	require.Zero(t, total)
	_, _, err = s.ParkedOutbox(ctx, "nobody", 10)
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// A row whose status does not read as a generation is handed out marked
// unreadable, and the rows with it are claimed as usual: one broken row
// never fails a claim.
func TestUnreadableRowDoesNotFailTheClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	gens := rejections(t, sh, "r1", 3)
	_, err := sh.Pool().Exec(ctx, `UPDATE outbox SET status = '{"generation": "not a number"}' WHERE generation = $1`, gens[1])
	require.NoError(t, err)
	c := claimOf(t, sh, "r1", 10)
	require.Equal(t, gens, generationsOf(c.Entries))
	require.Empty(t, c.Entries[0].Unreadable)
	require.NotNil(t, c.Entries[0].Status)
	require.Contains(t, c.Entries[1].Unreadable, "decode generation row")
	require.Nil(t, c.Entries[1].Status)
}
