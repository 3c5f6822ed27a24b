package pgstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// The first version of an upload is pinned; another version is refused:
// ignored while the pinned one is diffed, the end of a held generation.
func testUploadVersionPinned(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g := reserve(t, s, r)
	d, err := s.BeginDiff(tctx(t), r, g, `"a"`)
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, `"a"`, d.ETag)

	// The same version again (a duplicate event, a re-sent job): proceeds.
	d, err = s.BeginDiff(tctx(t), r, g, `"a"`)
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	d, err = s.BeginDiff(tctx(t), r, g, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Equal(t, `"a"`, d.ETag)
	pinned, err := s.PinUpload(tctx(t), r, g, `"b"`)
	require.NoError(t, err)
	require.Equal(t, `"a"`, pinned, "the first version stays pinned")

	// Another version while diffing: refused, the generation untouched.
	d, err = s.BeginDiff(tctx(t), r, g, `"b"`)
	require.NoError(t, err)
	require.False(t, d.Proceed)
	require.Contains(t, d.Reason, "another version")
	require.Equal(t, catalog.StateDiffing, status(t, s, r, g).State)

	// Held, then replaced: rejected, and confirming it is a conflict.
	require.NoError(t, errOf(s.Hold(tctx(t), r, g, "empty_snapshot", "empty", catalog.Counts{})))
	d, err = s.BeginDiff(tctx(t), r, g, `"b"`)
	require.NoError(t, err)
	require.False(t, d.Proceed)
	st := status(t, s, r, g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeUploadChanged, st.ErrorCode)
	require.ErrorIs(t, s.Confirm(tctx(t), r, g), catalog.ErrConflict)

	// Without a version in the event, the first read pins one.
	g2 := reserve(t, s, r)
	d, err = s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	require.Empty(t, d.ETag)
	pinned, err = s.PinUpload(tctx(t), r, g2, `"c"`)
	require.NoError(t, err)
	require.Equal(t, `"c"`, pinned)
}

// A generation applying when its upload turns out gone ends rejected, and
// its chunks still in flight write nothing.
func testRejectWhileApplying(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g := start(t, s, r, 2, catalog.Counts{Inserted: 2, Products: 2})
	require.Equal(t, catalog.ChunkApplied, applyChunk(t, s, r, g, 0, upsert("a", `{"v": "1"}`)).Outcome)
	require.NoError(t, errOf(s.Reject(tctx(t), r, g, catalog.Rejection{Code: catalog.CodeUploadMissing, Message: "gone"})))
	require.Equal(t, catalog.ChunkSuperseded, applyChunk(t, s, r, g, 1, upsert("b", `{"v": "1"}`)).Outcome)
	st := status(t, s, r, g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, 1, st.ChunksApplied)
	require.Equal(t, map[string]any{"a": jsonOf(t, `{"v": "1"}`)}, productsOf(t, s, r))
}

// At most perHour reservations per rolling hour: one more is
// catalog.ErrRateLimited with the wait until a slot frees; a refused
// reservation uses no generation number.
func testReservationLimit(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	for want := int64(1); want <= 3; want++ {
		g, err := s.ReserveGeneration(tctx(t), r, "csv", time.Now().Add(time.Hour), 3)
		require.NoError(t, err)
		require.Equal(t, want, g)
	}
	_, err := s.ReserveGeneration(tctx(t), r, "csv", time.Now().Add(time.Hour), 3)
	require.ErrorIs(t, err, catalog.ErrRateLimited)
	var de *catalog.Error
	require.ErrorAs(t, err, &de)
	require.Equal(t, "too_many_reservations", de.Code)
	require.Greater(t, de.RetryAfter, 59*time.Minute)
	require.LessOrEqual(t, de.RetryAfter, time.Hour)
	// Another retailer is not limited by this one.
	other := id("other")
	onboard(t, s, other)
	_, err = s.ReserveGeneration(tctx(t), other, "csv", time.Now().Add(time.Hour), 3)
	require.NoError(t, err)
	// A higher limit lets the next one through, numbered right after.
	g, err := s.ReserveGeneration(tctx(t), r, "csv", time.Now().Add(time.Hour), 4)
	require.NoError(t, err)
	require.EqualValues(t, 4, g)
}

// A new reservation supersedes the retailer's older slots still awaiting
// their upload (an expired one ends expired); slots whose upload arrived
// are left alone.
func testReservationSupersedes(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := reserve(t, s, r)
	_, err := s.MarkArrived(tctx(t), r, g1, time.Now(), time.Hour)
	require.NoError(t, err)
	g2, err := s.ReserveGeneration(tctx(t), r, "csv", time.Now().Add(-time.Second), 0)
	require.NoError(t, err)
	require.Equal(t, catalog.StateExpired, status(t, s, r, g2).State, "an unused slot past its expiry reads expired")
	g3 := reserve(t, s, r)
	g4 := reserve(t, s, r)
	require.Equal(t, catalog.StateReceived, status(t, s, r, g1).State)
	st := status(t, s, r, g2)
	require.Equal(t, catalog.StateExpired, st.State)
	require.Nil(t, st.SupersededBy)
	st = status(t, s, r, g3)
	require.Equal(t, catalog.StateSuperseded, st.State)
	require.Equal(t, g4, *st.SupersededBy)
	require.Nil(t, st.ReceivedAt)
	require.Equal(t, catalog.StateAwaitingUpload, status(t, s, r, g4).State)
	list, err := s.Generations(tctx(t), r, 10)
	require.NoError(t, err)
	var states []catalog.State
	for _, g := range list {
		states = append(states, g.State)
	}
	require.Equal(t, []catalog.State{catalog.StateAwaitingUpload, catalog.StateSuperseded, catalog.StateExpired, catalog.StateReceived}, states)
}

// An upload is received when it arrives before its slot's expiry plus the
// grace; later, the slot ends expired (upload_expired) and is not diffed.
func testArrival(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	expires := time.Now().Add(-2 * time.Minute)
	g1, err := s.ReserveGeneration(tctx(t), r, "csv", expires, 0)
	require.NoError(t, err)
	state, err := s.MarkArrived(tctx(t), r, g1, expires.Add(time.Minute), 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, state, "a PUT that started in time and ended after the expiry")
	st := status(t, s, r, g1)
	require.NotNil(t, st.ReceivedAt)
	state, err = s.MarkArrived(tctx(t), r, g1, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, state, "a duplicate arrival changes nothing")

	g2, err := s.ReserveGeneration(tctx(t), r, "csv", expires, 0)
	require.NoError(t, err)
	state, err = s.MarkArrived(tctx(t), r, g2, expires.Add(time.Minute), 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, catalog.StateExpired, state)
	st = status(t, s, r, g2)
	require.Equal(t, catalog.StateExpired, st.State)
	require.Equal(t, catalog.CodeUploadExpired, st.ErrorCode)
	require.Nil(t, st.ReceivedAt)
	d, err := s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.False(t, d.Proceed, "an expired slot is not diffed")

	g3 := reserve(t, s, r)
	reserve(t, s, r)
	state, err = s.MarkArrived(tctx(t), r, g3, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateSuperseded, state, "an upload to a slot a newer reservation superseded")
	_, err = s.MarkArrived(tctx(t), r, 99, time.Now(), time.Hour)
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// An older upload that has not taken over stops at once for a newer one
// that has arrived, even before the newer one is read: at BeginDiff, while
// reading (NewerArrival) and at TakeOver; one that applies is left to the
// fence.
func testNewerArrival(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := reserve(t, s, r)
	_, err := s.MarkArrived(tctx(t), r, g1, time.Now(), time.Hour)
	require.NoError(t, err)
	d, err := s.BeginDiff(tctx(t), r, g1, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	newer, err := s.NewerArrival(tctx(t), r, g1)
	require.NoError(t, err)
	require.Zero(t, newer)

	g2 := reserve(t, s, r)
	require.Equal(t, catalog.StateDiffing, status(t, s, r, g1).State, "a reservation alone stops nothing")
	_, err = s.MarkArrived(tctx(t), r, g2, time.Now(), time.Hour)
	require.NoError(t, err)
	newer, err = s.NewerArrival(tctx(t), r, g1)
	require.NoError(t, err)
	require.Equal(t, g2, newer)
	st := status(t, s, r, g1)
	require.Equal(t, catalog.StateSuperseded, st.State)
	require.Equal(t, g2, *st.SupersededBy)
	_, err = s.TakeOver(tctx(t), r, g1)
	require.ErrorIs(t, err, catalog.ErrSuperseded)

	// Arrived in order g3, g4; g3's diff starts after g4 arrived.
	g3 := reserve(t, s, r)
	_, err = s.MarkArrived(tctx(t), r, g3, time.Now(), time.Hour)
	require.NoError(t, err)
	g4 := reserve(t, s, r)
	_, err = s.MarkArrived(tctx(t), r, g4, time.Now(), time.Hour)
	require.NoError(t, err)
	d, err = s.BeginDiff(tctx(t), r, g3, "")
	require.NoError(t, err)
	require.False(t, d.Proceed)
	require.Equal(t, g4, *status(t, s, r, g3).SupersededBy)

	// A generation applying is not stopped by a mere arrival.
	d, err = s.BeginDiff(tctx(t), r, g4, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	_, err = s.TakeOver(tctx(t), r, g4)
	require.NoError(t, err)
	require.NoError(t, s.StartApplying(tctx(t), r, g4, catalog.Counts{}, 1))
	g5 := reserve(t, s, r)
	_, err = s.MarkArrived(tctx(t), r, g5, time.Now(), time.Hour)
	require.NoError(t, err)
	newer, err = s.NewerArrival(tctx(t), r, g4)
	require.NoError(t, err)
	require.Equal(t, g5, newer)
	require.Equal(t, catalog.StateApplying, status(t, s, r, g4).State)
}

// A retailer's hold thresholds and token change at once for every reader
// of the registry.
func testHoldPolicyAndToken(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	got, err := s.Retailer(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, catalog.DefaultHoldPolicy, got.Hold)
	require.Nil(t, got.OffboardedAt)
	p := catalog.HoldPolicy{DeleteFraction: 0.2, UpdateFraction: 0.75, MinProducts: got.Hold.MinProducts}
	require.NoError(t, s.SetHoldPolicy(tctx(t), r, p))
	got, err = s.Retailer(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, p, got.Hold)

	require.NoError(t, s.SetToken(tctx(t), r, []byte("token of "+r), []byte("new token of "+r)))
	owner, err := s.RetailerByTokenHash(tctx(t), []byte("token of "+r))
	require.NoError(t, err)
	require.Empty(t, owner, "the old token stops working at once")
	owner, err = s.RetailerByTokenHash(tctx(t), []byte("new token of "+r))
	require.NoError(t, err)
	require.Equal(t, r, owner)
	// The change is conditional on the token it replaces: replacing the
	// old one again (a concurrent rotation that lost) changes nothing.
	err = s.SetToken(tctx(t), r, []byte("token of "+r), []byte("lost token of "+r))
	requireCode(t, err, catalog.ErrConflict, "token_rotated")
	owner, err = s.RetailerByTokenHash(tctx(t), []byte("new token of "+r))
	require.NoError(t, err)
	require.Equal(t, r, owner, "the winner's token still works")
	require.ErrorIs(t, s.SetToken(tctx(t), id("nobody"), []byte("x"), []byte("y")), catalog.ErrNotFound)
	require.ErrorIs(t, s.SetHoldPolicy(tctx(t), id("nobody"), p), catalog.ErrNotFound)
}

// The attribute names a generation records are the next diff's baseline
// names (nil before any, or for a baseline that recorded none).
func testBaselineNames(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1, d := arrive(t, s, r)
	require.Nil(t, d.BaselineNames)
	_, err := s.TakeOver(tctx(t), r, g1)
	require.NoError(t, err)
	names := []string{"brand", "price", "title"}
	require.NoError(t, s.StartApplying(tctx(t), r, g1, catalog.Counts{Products: 3, AttributeNames: names}, 0))
	g2, d := arrive(t, s, r)
	require.Equal(t, g1, d.Baseline)
	require.Equal(t, names, d.BaselineNames)
	to, err := s.TakeOver(tctx(t), r, g2)
	require.NoError(t, err)
	require.Equal(t, names, to.BaselineNames)
	require.NoError(t, errOf(s.Hold(tctx(t), r, g2, catalog.HoldMassUpdate, "renamed", catalog.Counts{Products: 3, AttributeNames: []string{"Brand"}})))
	require.NoError(t, s.Confirm(tctx(t), r, g2))
	d, err = s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.Equal(t, names, d.BaselineNames, "the baseline is still generation 1")
}

// Offboarding revokes the token, refuses changes, and reserves once the
// generation that removes the catalog: confirmed in advance, superseding
// the unused slots before it, the fence raised to it, and no reservation
// after it.
func testOffboard(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	unused := reserve(t, s, r)
	gen, err := s.Offboard(tctx(t), r, []byte("revoked "+r), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Greater(t, gen, unused)
	again, err := s.Offboard(tctx(t), r, []byte("revoked again "+r), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, gen, again, "offboarding again is the same generation")
	got, err := s.Retailer(tctx(t), r)
	require.NoError(t, err)
	require.NotNil(t, got.OffboardedAt)
	owner, err := s.RetailerByTokenHash(tctx(t), []byte("token of "+r))
	require.NoError(t, err)
	require.Empty(t, owner, "the token is revoked")
	requireCode(t, s.SetToken(tctx(t), r, []byte("revoked "+r), []byte("x")), catalog.ErrConflict, "retailer_offboarded")
	require.ErrorIs(t, s.SetHoldPolicy(tctx(t), r, catalog.DefaultHoldPolicy), catalog.ErrConflict)
	st := status(t, s, r, unused)
	require.Equal(t, catalog.StateSuperseded, st.State)
	require.Equal(t, gen, *st.SupersededBy)
	st = status(t, s, r, gen)
	require.Equal(t, catalog.StateAwaitingUpload, st.State)
	require.True(t, st.Confirmed, "no empty_snapshot hold for the offboarding")
	// The shard decides: nothing is reserved after the offboarding.
	_, err = s.ReserveGeneration(tctx(t), r, "csv", time.Now().Add(time.Hour), 0)
	requireCode(t, err, catalog.ErrConflict, "retailer_offboarded")
	latest, err := s.IsLatest(tctx(t), r, unused)
	require.NoError(t, err)
	require.False(t, latest, "the fence is raised to the offboarding: older generations write nothing")
	_, err = s.Offboard(tctx(t), id("nobody"), []byte("x"), time.Now().Add(time.Hour))
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// A rejection keeps its problems (up to 100) and says when there are more;
// one without a list keeps its one problem as the list.
func testRejectionProblems(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g, _ := arrive(t, s, r)
	problems := []catalog.Problem{
		{Code: "malformed_csv", Line: 3, Message: "line 3: bad"},
		{Code: "duplicate_product_id", Line: 9, Message: `line 9: duplicate product_id "a", first on line 2`},
	}
	require.NoError(t, errOf(s.Reject(tctx(t), r, g, catalog.Rejection{Code: "malformed_csv", Message: "line 3: bad", Line: 3,
		Problems: problems, More: true})))
	st := status(t, s, r, g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, problems, st.Problems)
	require.True(t, st.MoreProblems)
	list, err := s.Generations(tctx(t), r, 1)
	require.NoError(t, err)
	require.Equal(t, problems, list[0].Problems)

	g2, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Reject(tctx(t), r, g2, catalog.Rejection{Code: "file_too_large", Message: "too large"})))
	st = status(t, s, r, g2)
	require.Equal(t, []catalog.Problem{{Code: "file_too_large", Message: "too large"}}, st.Problems)
	require.False(t, st.MoreProblems)
}
