package pgstore_test

// State checks in the transaction of the change they guard (I12):
// offboarding is final and decided on the shard, every token rotation's
// 201 is honest, and the reservation limit holds under concurrency.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// requireCode requires err to be a catalog.Error of kind and code.
func requireCode(t *testing.T, err error, kind error, code string) {
	t.Helper()
	require.ErrorIs(t, err, kind)
	var e *catalog.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, code, e.Code, e.Message)
}

// fenceOf reads a retailer's fence and its recorded offboarding (0: none).
func fenceOf(t *testing.T, sh *pgstore.Shard, retailerID string) (reserved, latest, offboarding int64) {
	t.Helper()
	require.NoError(t, sh.Pool().QueryRow(context.Background(),
		`SELECT reserved_generation, latest_generation, coalesce(offboarding_generation, 0) FROM retailer_state WHERE retailer_id = $1`,
		retailerID).Scan(&reserved, &latest, &offboarding))
	return reserved, latest, offboarding
}

func requireSupersededBy(t *testing.T, sh *pgstore.Shard, retailerID string, gen, by int64) {
	t.Helper()
	st, err := sh.Generation(context.Background(), retailerID, gen)
	require.NoError(t, err)
	require.Equal(t, catalog.StateSuperseded, st.State, "generation %d", gen)
	require.NotNil(t, st.SupersededBy, "generation %d", gen)
	require.Equal(t, by, *st.SupersededBy, "generation %d", gen)
}

// The offboarding is recorded on the shard in the transaction that
// reserves its generation: the fence is raised to it and every older
// unfinished generation (half applied, received, held, an unused slot) is
// superseded by it; from then on nothing of the retailer is reserved,
// confirmed, diffed or applied but the offboarding, whose empty snapshot
// removes the catalog (repairing what the stopped generation wrote).
// Offboarding again changes nothing.
func TestOffboardingIsDecidedOnTheShard(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	applied(t, sh, upsert("a", `{"v":"1"}`))
	g2 := halfApplied(t, sh, upsert("b", `{"v":"2"}`))
	g3, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	_, err = sh.MarkArrived(ctx, "r1", g3, time.Now(), time.Hour)
	require.NoError(t, err)
	g4, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	d, err := sh.BeginDiff(ctx, "r1", g4, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	_, err = sh.Hold(ctx, "r1", g4, catalog.HoldMassDelete, "deletes everything", catalog.Counts{})
	require.NoError(t, err)
	g5, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)

	off, err := s.Offboard(ctx, "r1", []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, g5+1, off)
	reserved, latest, recorded := fenceOf(t, sh, "r1")
	require.Equal(t, [3]int64{off, off, off}, [3]int64{reserved, latest, recorded}, "reserved, the fence raised, recorded")
	for _, g := range []int64{g2, g3, g4, g5} {
		requireSupersededBy(t, sh, "r1", g, off)
	}

	_, err = sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	requireCode(t, err, catalog.ErrConflict, "retailer_offboarded")
	requireCode(t, sh.Confirm(ctx, "r1", g4), catalog.ErrConflict, "retailer_offboarded")
	res, err := sh.ApplyChunk(ctx, chunkOf("r1", g2, 1), []message.ChunkOp{upsert("c", `{"v":"2"}`)})
	require.NoError(t, err)
	require.Equal(t, catalog.ChunkSuperseded, res.Outcome, "the fence refuses the stopped generation's chunks")
	d, err = sh.BeginDiff(ctx, "r1", g3, "")
	require.NoError(t, err)
	require.False(t, d.Proceed)
	_, err = sh.TakeOver(ctx, "r1", g3)
	require.ErrorIs(t, err, catalog.ErrSuperseded)
	require.Equal(t, map[string]string{"a": `{"v": "1"}`, "b": `{"v": "2"}`}, catalogOf(t, sh))

	again, err := s.Offboard(ctx, "r1", []byte("revoked again"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, off, again)
	owner, err := s.RetailerByTokenHash(ctx, []byte("revoked"))
	require.NoError(t, err)
	require.Equal(t, "r1", owner, "offboarding again changes nothing: the first revoked hash stays")
	reserved, _, _ = fenceOf(t, sh, "r1")
	require.Equal(t, off, reserved)

	// The offboarding itself goes through and empties the catalog.
	state, err := sh.MarkArrived(ctx, "r1", off, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, state)
	d, err = sh.BeginDiff(ctx, "r1", off, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.True(t, d.Offboarding)
	to, err := sh.TakeOver(ctx, "r1", off)
	require.NoError(t, err)
	require.Equal(t, []int64{g2}, to.Stopped, "what the stopped generation wrote is repaired (I5)")
	require.NoError(t, sh.StartApplying(ctx, "r1", off, catalog.Counts{Deleted: 2}, 1))
	res, err = sh.ApplyChunk(ctx, chunkOf("r1", off, 0), []message.ChunkOp{del("a"), del("b")})
	require.NoError(t, err)
	require.True(t, res.GenerationApplied)
	require.Empty(t, catalogOf(t, sh))
	st, err := sh.Generation(ctx, "r1", off)
	require.NoError(t, err)
	require.Equal(t, catalog.StateApplied, st.State)
}

// Defect 1 at the store: reservations racing the offboarding. Whatever the
// interleaving, every reservation that succeeds comes before the
// offboarding (an older generation, superseded by it), none made after
// Offboard returned succeeds, and the offboarding generation is never
// superseded: a repeated offboarding returns it. (Before the shard decided,
// reservations after the offboarding succeeded with newer generations
// that superseded it.)
func TestReservationsRacingOffboarding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	const rounds, reservers = 12, 4
	for round := range rounds {
		r := fmt.Sprintf("race%d", round)
		require.NoError(t, s.Control.CreateRetailer(ctx, catalog.Retailer{ID: r, Shard: 0, TokenHash: []byte("token of " + r)}))
		var offboarded atomic.Bool
		var mu sync.Mutex
		var granted []int64
		var wg sync.WaitGroup
		started := make(chan struct{}, reservers)
		for range reservers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					after := offboarded.Load()
					gen, err := s.ReserveGeneration(ctx, r, "csv", time.Now().Add(time.Hour), 0)
					if i == 0 {
						started <- struct{}{}
					}
					if err != nil {
						var e *catalog.Error
						if !errors.As(err, &e) || e.Code != "retailer_offboarded" {
							t.Errorf("%s: reservation: %v", r, err)
						}
						return
					}
					if after {
						t.Errorf("%s: generation %d reserved after Offboard returned", r, gen)
					}
					mu.Lock()
					granted = append(granted, gen)
					mu.Unlock()
				}
			}()
		}
		<-started
		off, err := s.Offboard(ctx, r, []byte("revoked "+r), time.Now().Add(time.Hour))
		require.NoError(t, err)
		offboarded.Store(true)
		wg.Wait()
		// Each slot is superseded by the next reservation, the last one by
		// the offboarding.
		for _, g := range granted {
			require.Less(t, g, off, "%s: a reservation that succeeded came before the offboarding", r)
			requireSupersededBy(t, sh, r, g, g+1)
		}
		st, err := sh.Generation(ctx, r, off)
		require.NoError(t, err)
		require.Equal(t, catalog.StateAwaitingUpload, st.State, "%s: the offboarding is never superseded", r)
		again, err := s.Offboard(ctx, r, []byte("revoked again "+r), time.Now().Add(time.Hour))
		require.NoError(t, err)
		require.Equal(t, off, again)
	}
}

// Confirm racing the offboarding: the confirmation and the offboarding
// take the fence row in conflicting modes, so either the hold is confirmed
// first and the offboarding supersedes it (its diff job then finds it
// superseded and reads nothing), or the confirmation comes second and is
// refused (409 retailer_offboarded). Never a confirmed hold that applies
// after the offboarding. (Before, a confirmation after the offboarding
// succeeded, and the hold could take over and apply.)
func TestConfirmRacingOffboarding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	held := func(r string) int64 {
		t.Helper()
		require.NoError(t, s.Control.CreateRetailer(ctx, catalog.Retailer{ID: r, Shard: 0, TokenHash: []byte("token of " + r)}))
		startGenerationOf(t, sh, r, 0)
		g, err := sh.ReserveGeneration(ctx, r, "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		d, err := sh.BeginDiff(ctx, r, g, "")
		require.NoError(t, err)
		require.True(t, d.Proceed, d.Reason)
		_, err = sh.Hold(ctx, r, g, catalog.HoldEmptySnapshot, "empty", catalog.Counts{})
		require.NoError(t, err)
		return g
	}

	// In turn: the confirmation after the offboarding is refused.
	g := held("after")
	off, err := s.Offboard(ctx, "after", []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	requireCode(t, sh.Confirm(ctx, "after", g), catalog.ErrConflict, "retailer_offboarded")
	requireSupersededBy(t, sh, "after", g, off)

	// At the same time, many times over.
	var confirmed, refused int
	for round := range 12 {
		r := fmt.Sprintf("confirm%d", round)
		g := held(r)
		var wg sync.WaitGroup
		var confirmErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			confirmErr = sh.Confirm(ctx, r, g)
		}()
		off, err := s.Offboard(ctx, r, []byte("revoked "+r), time.Now().Add(time.Hour))
		require.NoError(t, err)
		wg.Wait()
		if confirmErr == nil {
			confirmed++
		} else {
			requireCode(t, confirmErr, catalog.ErrConflict, "retailer_offboarded")
			refused++
		}
		requireSupersededBy(t, sh, r, g, off)
		d, err := sh.BeginDiff(ctx, r, g, "")
		require.NoError(t, err)
		require.False(t, d.Proceed, "%s: the confirmed hold is never read after the offboarding", r)
		_, err = sh.TakeOver(ctx, r, g)
		require.ErrorIs(t, err, catalog.ErrSuperseded)
	}
	t.Logf("confirmed first %d times, refused %d times", confirmed, refused)
}

// I10's undo never brings an offboarded retailer's catalog back: a
// generation half applied when the offboarding came is superseded by it
// (its rejection is no longer possible, and reserves nothing); and even
// were the offboarding ended by hand, the rejection of a half-applied
// generation reserves no undo (undo_needed), where the insert would be
// refused anyway (the generation_after_offboarding trigger). (Before, the
// rejection reserved an undo that superseded the offboarding, still
// awaiting its empty object, and restored the catalog.)
func TestOffboardingIsNeverUndone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	applied(t, sh, upsert("a", `{"v":"1"}`))
	g2 := halfApplied(t, sh, upsert("a", `{"v":"2"}`))
	off, err := s.Offboard(ctx, "r1", []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)

	undo, err := sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{}, undo, "nothing to reject: superseded by the offboarding")
	requireSupersededBy(t, sh, "r1", g2, off)
	st, err := sh.Generation(ctx, "r1", off)
	require.NoError(t, err)
	require.Equal(t, catalog.StateAwaitingUpload, st.State)
	reserved, _, _ := fenceOf(t, sh, "r1")
	require.Equal(t, off, reserved, "no undo reserved")

	// By hand: the half-applied generation applying again, the offboarding
	// rejected (what undo_needed looks for).
	_, err = sh.Pool().Exec(ctx, `UPDATE generations SET state = CASE generation WHEN $2 THEN 'applying' ELSE 'rejected' END
		WHERE retailer_id = $1 AND generation IN ($2, $3)`, "r1", g2, off)
	require.NoError(t, err)
	undo, err = sh.Reject(ctx, "r1", g2, applyFailed)
	require.NoError(t, err)
	require.Equal(t, catalog.Undo{Rejected: true}, undo, "no undo for an offboarded retailer")
	reserved, _, _ = fenceOf(t, sh, "r1")
	require.Equal(t, off, reserved)
	_, err = sh.Pool().Exec(ctx, `INSERT INTO generations (retailer_id, generation, object_key, upload_expires_at) VALUES ('r1', $1, 'k', now())`, off+1)
	require.ErrorContains(t, err, "offboarded", "no generation is reserved after the offboarding")
}

// A crash between the offboarding's steps, then DELETE again: after the
// registry's step alone the retailer is locked out and the retry records
// the offboarding on the shard; after the shard's step, a retry long past
// the offboarding slot's expiry still writes its empty object, and its
// arrival is taken (the offboarding's slot never expires). (Before, the
// late arrival ended the offboarding expired and the catalog stayed.)
func TestOffboardingRetriedAfterACrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	applied(t, sh, upsert("a", `{"v":"1"}`))

	require.NoError(t, s.Control.Offboard(ctx, "r1", []byte("revoked")))
	got, err := s.Retailer(ctx, "r1")
	require.NoError(t, err)
	require.NotNil(t, got.OffboardedAt)
	owner, err := s.RetailerByTokenHash(ctx, []byte("h1"))
	require.NoError(t, err)
	require.Empty(t, owner, "locked out after the first step")
	_, _, recorded := fenceOf(t, sh, "r1")
	require.Zero(t, recorded, "the shard does not know yet")

	// The retry, whose first try wrote no empty object, comes two hours later.
	off, err := s.Offboard(ctx, "r1", []byte("revoked again"), time.Now().Add(-time.Hour))
	require.NoError(t, err)
	_, _, recorded = fenceOf(t, sh, "r1")
	require.Equal(t, off, recorded)
	_, err = sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	requireCode(t, err, catalog.ErrConflict, "retailer_offboarded")
	st, err := sh.Generation(ctx, "r1", off)
	require.NoError(t, err)
	require.Equal(t, catalog.StateAwaitingUpload, st.State, "the offboarding's slot never reads expired")
	state, err := sh.MarkArrived(ctx, "r1", off, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, state)
}

// An upload to an older slot of an offboarded retailer ends superseded by
// the offboarding when it arrives, even one past its slot's expiry taken
// within the grace (an unused slot past its expiry ended expired at the
// offboarding, as at any reservation).
func TestArrivalAfterOffboardingSuperseded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	late, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(-time.Minute), 0)
	require.NoError(t, err)
	off, err := s.Offboard(ctx, "r1", []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	st, err := sh.Generation(ctx, "r1", late)
	require.NoError(t, err)
	require.Equal(t, catalog.StateExpired, st.State)
	state, err := sh.MarkArrived(ctx, "r1", late, time.Now().Add(-30*time.Second), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateSuperseded, state)
	requireSupersededBy(t, sh, "r1", late, off)
	d, err := sh.BeginDiff(ctx, "r1", late, "")
	require.NoError(t, err)
	require.False(t, d.Proceed)
}

// An offboarding generation reserved before the shard recorded
// offboardings (migration 0082) is taken as it is when nothing beat it,
// and replaced by a new one when a later reservation did (the defect's
// aftermath): a repeated DELETE then finishes the job.
func TestOffboardingReservedBeforeTheShardRecordedIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	sh := s.Shards[0]
	// legacy reserves gen for retailerID as the code before 0082 did: an
	// offboarding generation the shard does not record.
	legacy := func(retailerID string) int64 {
		t.Helper()
		var gen int64
		require.NoError(t, sh.Pool().QueryRow(ctx, `UPDATE retailer_state SET reserved_generation = reserved_generation + 1
			WHERE retailer_id = $1 RETURNING reserved_generation`, retailerID).Scan(&gen))
		_, err := sh.Pool().Exec(ctx, `INSERT INTO generations (retailer_id, generation, format, object_key, upload_expires_at, confirmed, offboarding)
			VALUES ($1, $2, 'csv', $3, now() + interval '1 hour', true, true)`, retailerID, gen, keys.Upload(retailerID, gen))
		require.NoError(t, err)
		return gen
	}

	startGeneration(t, sh, 0)
	kept := legacy("r1")
	off, err := s.Offboard(ctx, "r1", []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, kept, off, "nothing beat it: taken as it is")
	_, _, recorded := fenceOf(t, sh, "r1")
	require.Equal(t, off, recorded)

	require.NoError(t, s.Control.CreateRetailer(ctx, catalog.Retailer{ID: "r2", Shard: 0, TokenHash: []byte("h2")}))
	startGenerationOf(t, sh, "r2", 0)
	beaten := legacy("r2")
	newer, err := sh.ReserveGeneration(ctx, "r2", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	requireSupersededBy(t, sh, "r2", beaten, newer)
	off, err = s.Offboard(ctx, "r2", []byte("revoked r2"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, newer+1, off, "beaten: a new offboarding takes its place")
	requireSupersededBy(t, sh, "r2", newer, off)
	d, err := sh.BeginDiff(ctx, "r2", off, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.True(t, d.Offboarding)
}

// Concurrent rotations of one token: the change is a compare and swap on
// the stored hash, so exactly one succeeds and its token is the one that
// works; the others are token_rotated and change nothing. (Before, every
// rotation succeeded and only the last one's token worked.)
func TestConcurrentTokenRotationsSwapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := newStores(t)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = s.SetToken(ctx, "r1", []byte("h1"), fmt.Appendf(nil, "new %d", i))
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "two rotations of one token succeeded")
			winner = i
			continue
		}
		requireCode(t, err, catalog.ErrConflict, "token_rotated")
	}
	require.NotEqual(t, -1, winner, "no rotation succeeded")
	for i := range n {
		owner, err := s.RetailerByTokenHash(ctx, fmt.Appendf(nil, "new %d", i))
		require.NoError(t, err)
		if i == winner {
			require.Equal(t, "r1", owner, "the winner's token works")
		} else {
			require.Empty(t, owner, "rotation %d changed nothing", i)
		}
	}
}

// Section 5's limit under concurrency: with k reservations left in the
// hour, n concurrent reservations give exactly k generations (the next k,
// in order) and n-k ErrRateLimited: the count is read under the fence
// row, in the transaction that reserves.
func TestReservationLimitRace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sh := newStores(t).Shards[0]
	const perHour, k, n = 10, 3, 16
	for range perHour - k {
		_, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), perHour)
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var granted []int64
	var limited int
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			gen, err := sh.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), perHour)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				granted = append(granted, gen)
				return
			}
			var e *catalog.Error
			if errors.As(err, &e) && errors.Is(err, catalog.ErrRateLimited) && e.RetryAfter > 0 {
				limited++
				return
			}
			t.Errorf("reservation: %v", err)
		}()
	}
	close(start)
	wg.Wait()
	require.ElementsMatch(t, []int64{perHour - k + 1, perHour - k + 2, perHour}, granted)
	require.Equal(t, n-k, limited)
	reserved, _, _ := fenceOf(t, sh, "r1")
	require.Equal(t, int64(perHour), reserved, "a refused reservation uses no generation number")
}
