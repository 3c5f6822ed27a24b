package pgstore_test

// The catalog store contract: the control and shard databases as the
// handlers see them. It pins down the rules the pipeline's correctness
// rests on: generations in order, the fence (I2, I4), no resurrection
// (I3), the repair set of stopped generations (I5), only changed rows
// written (I6), holds (I8), chunks counted exactly once, the product
// directory, and the outbox of change events.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/arrival"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/publish/relay"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// Store is everything the handlers ask of the databases (each declares
// the part it uses), plus the list of unfinished work the stack resumes:
// pgstore.Stores must implement all of it (TestStoresContract does not
// compile otherwise).
type Store interface {
	arrival.Store
	diff.Store
	apply.Store
	upload.Store
	control.Store
	read.Store
	relay.Store
	analytics.Versions
	ops.Store
	control.WebhookStore
	Unfinished(ctx context.Context) ([]catalog.UnfinishedGeneration, error)
	// DrainOutbox is claim, publish, settle in one call, for callers that
	// publish or read whatever they are given (the outbox cases, tools).
	DrainOutbox(ctx context.Context, shard int, f catalog.OutboxFilter, limit int,
		publish func(context.Context, []catalog.OutboxEntry) ([]bool, error)) (int, error)
	metering.Store
	control.UsageSource
}

var ids atomic.Int64

// TestStoresContract runs every case of the contract on one control and
// one shard database: each case uses retailer and product ids of its own.
func TestStoresContract(t *testing.T) {
	t.Parallel()
	var s Store = pgstoretest.New(t)
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store, id func(string) string)
	}{
		{"Registry", testRegistry},
		{"GenerationsReservedInOrder", testGenerationsInOrder},
		{"DiffApplyLifecycle", testLifecycle},
		{"ChunkCountedExactlyOnce", testChunkOnce},
		{"FenceStopsOlderGenerations", testFence},
		{"NoResurrection", testNoResurrection},
		{"OnlyChangedRowsWritten", testOnlyChanges},
		{"StoppedGenerationsAreRepaired", testStopped},
		{"OutOfOrderArrivalIsSuperseded", testOutOfOrder},
		{"RejectHoldConfirm", testRejectHoldConfirm},
		{"ConfirmOnlyTheLatest", testConfirmLatest},
		{"ZeroChunksApplyAtOnce", testZeroChunks},
		{"StartApplyingWhenSuperseded", testStartApplyingSuperseded},
		{"ProductsInByteOrder", testProducts},
		{"DirectoryFencedByGeneration", testDirectory},
		{"UnfinishedWork", testUnfinished},
		{"UnknownRetailer", testUnknownRetailer},
		{"UsageCountedOnceWithTheWork", testUsage},
		{"UploadVersionPinned", testUploadVersionPinned},
		{"RejectWhileApplying", testRejectWhileApplying},
		{"ChangeEventPerChunk", testChangeEvents},
		{"LifecycleEventPerStateChange", testLifecycleEvents},
		{"DrainOutbox", testDrainOutbox},
		{"ReservationsLimitedPerHour", testReservationLimit},
		{"ReservationSupersedesUnusedSlots", testReservationSupersedes},
		{"ArrivalAndExpiry", testArrival},
		{"NewerArrivalStopsOlderUploads", testNewerArrival},
		{"HoldPolicyAndToken", testHoldPolicyAndToken},
		{"BaselineAttributeNames", testBaselineNames},
		{"Offboard", testOffboard},
		{"ConsumerVersions", testConsumerVersions},
		{"RejectionProblems", testRejectionProblems},
		{"OpsViews", testOpsViews},
		{"StalledGenerations", testStalledGenerations},
		{"Webhooks", testWebhooks},
		{"ReconcileRuns", testReconcileRuns},
		{"ReconcileWalkAndRepair", testReconcileWalkAndRepair},
		{"Replay", testReplay},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := ids.Add(1)
			nonce := time.Now().UnixNano() % 1e9
			id := func(name string) string { return fmt.Sprintf("st%d-%d-%s", nonce, n, name) }
			tc.fn(t, s, id)
		})
	}
}

func tctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func onboard(t *testing.T, s Store, retailerID string) {
	t.Helper()
	require.NoError(t, s.CreateRetailer(tctx(t), catalog.Retailer{ID: retailerID, Shard: 0, TokenHash: []byte("token of " + retailerID)}))
}

func reserve(t *testing.T, s Store, retailerID string) int64 {
	t.Helper()
	gen, err := s.ReserveGeneration(tctx(t), retailerID, "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	return gen
}

// arrive reserves a generation and begins its diff, which must proceed.
func arrive(t *testing.T, s Store, retailerID string) (int64, catalog.DiffDecision) {
	t.Helper()
	gen := reserve(t, s, retailerID)
	d, err := s.BeginDiff(tctx(t), retailerID, gen, "")
	require.NoError(t, err)
	require.True(t, d.Proceed, d.Reason)
	return gen, d
}

// start makes a new generation the latest and starts applying it in chunks.
func start(t *testing.T, s Store, retailerID string, chunks int, c catalog.Counts) int64 {
	t.Helper()
	gen, _ := arrive(t, s, retailerID)
	_, err := s.TakeOver(tctx(t), retailerID, gen)
	require.NoError(t, err)
	require.NoError(t, s.StartApplying(tctx(t), retailerID, gen, c, chunks))
	return gen
}

func applyChunk(t *testing.T, s Store, retailerID string, gen int64, seq int, ops ...message.ChunkOp) catalog.ApplyResult {
	t.Helper()
	m := message.ChunkMessage{RetailerID: retailerID, Generation: gen, Seq: seq,
		Key: keys.Chunk(retailerID, gen, seq), SHA256: strings.Repeat("0", 64)}
	res, err := s.ApplyChunk(tctx(t), m, ops)
	require.NoError(t, err)
	return res
}

// productsOf is the retailer's live catalog: product id -> attributes,
// compared as JSON values (a database may store them normalized).
func productsOf(t *testing.T, s Store, retailerID string) map[string]any {
	t.Helper()
	products, err := s.Products(tctx(t), retailerID, "", 1000, 0, true)
	require.NoError(t, err)
	out := map[string]any{}
	for _, p := range products {
		var v any
		require.NoError(t, json.Unmarshal(p.Attributes, &v), "attributes of %s", p.ProductID)
		out[p.ProductID] = v
	}
	return out
}

func jsonOf(t *testing.T, s string) any {
	var v any
	require.NoError(t, json.Unmarshal([]byte(s), &v))
	return v
}

func status(t *testing.T, s Store, retailerID string, gen int64) catalog.GenerationStatus {
	t.Helper()
	st, err := s.Generation(tctx(t), retailerID, gen)
	require.NoError(t, err)
	return st
}

func testRegistry(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	err := s.CreateRetailer(tctx(t), catalog.Retailer{ID: r, TokenHash: []byte("other")})
	require.ErrorIs(t, err, catalog.ErrConflict, "a second registration")
	got, err := s.Retailer(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, r, got.ID)
	require.Equal(t, catalog.DefaultHoldPolicy, got.Hold, "the default hold policy")
	owner, err := s.RetailerByTokenHash(tctx(t), []byte("token of "+r))
	require.NoError(t, err)
	require.Equal(t, r, owner)
	owner, err = s.RetailerByTokenHash(tctx(t), []byte("no such token "+r))
	require.NoError(t, err)
	require.Empty(t, owner)
	require.GreaterOrEqual(t, s.ShardCount(), 1)
}

func testGenerationsInOrder(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	list, err := s.Generations(tctx(t), r, 10)
	require.NoError(t, err)
	require.Empty(t, list)
	for want := int64(1); want <= 3; want++ {
		require.Equal(t, want, reserve(t, s, r))
	}
	st := status(t, s, r, 3)
	require.Equal(t, catalog.StateAwaitingUpload, st.State)
	require.Equal(t, keys.Upload(r, 3), st.ObjectKey)
	require.Equal(t, "csv", st.Format)
	list, err = s.Generations(tctx(t), r, 2)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, []int64{3, 2}, []int64{list[0].Generation, list[1].Generation}, "newest first")
	for _, tc := range []struct {
		before int64
		limit  int
		want   []int64
	}{{0, 10, []int64{3, 2, 1}}, {3, 10, []int64{2, 1}}, {3, 1, []int64{2}}, {1, 10, nil}, {99, 2, []int64{3, 2}}} {
		list, err = s.GenerationsBefore(tctx(t), r, tc.before, tc.limit)
		require.NoError(t, err)
		var gens []int64
		for _, g := range list {
			gens = append(gens, g.Generation)
		}
		require.Equal(t, tc.want, gens, "before %d, limit %d", tc.before, tc.limit)
	}
	_, err = s.Generation(tctx(t), r, 9)
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

func testLifecycle(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	gen, d := arrive(t, s, r)
	require.Equal(t, catalog.DiffDecision{Proceed: true, Format: "csv", ObjectKey: keys.Upload(r, gen), Attempt: 1, Mode: catalog.ModeFull}, d,
		"a first upload: no baseline, its own upload, its first attempt")
	st := status(t, s, r, gen)
	require.Equal(t, catalog.StateDiffing, st.State)
	require.NotNil(t, st.ReceivedAt)
	taken, err := s.TakeOver(tctx(t), r, gen)
	require.NoError(t, err)
	require.True(t, taken.Proceed)
	require.Empty(t, taken.Stopped)
	counts := catalog.Counts{Inserted: 3, Products: 3}
	require.NoError(t, s.StartApplying(tctx(t), r, gen, counts, 2))
	require.Equal(t, catalog.StateApplying, status(t, s, r, gen).State)
	latest, err := s.IsLatest(tctx(t), r, gen)
	require.NoError(t, err)
	require.True(t, latest)

	res := applyChunk(t, s, r, gen, 0, upsert("a", `{"price":"1"}`), upsert("b", `{"price":"2"}`))
	require.Equal(t, catalog.ApplyResult{Outcome: catalog.ChunkApplied, Written: 2}, res)
	res = applyChunk(t, s, r, gen, 1, upsert("c", `{"price":"3"}`))
	require.Equal(t, catalog.ApplyResult{Outcome: catalog.ChunkApplied, Written: 1, GenerationApplied: true}, res)
	st = status(t, s, r, gen)
	require.Equal(t, catalog.StateApplied, st.State)
	require.NotNil(t, st.AppliedAt)
	require.Equal(t, 2, st.ChunksApplied)
	require.Equal(t, 2, st.ChunksTotal)
	require.EqualValues(t, 3, st.Inserted)
	require.EqualValues(t, 3, st.Products)
	require.Equal(t, map[string]any{"a": jsonOf(t, `{"price":"1"}`), "b": jsonOf(t, `{"price":"2"}`), "c": jsonOf(t, `{"price":"3"}`)}, productsOf(t, s, r))
	p, err := s.Product(tctx(t), r, "b", false)
	require.NoError(t, err)
	require.Equal(t, gen, p.Generation)
	require.Equal(t, jsonOf(t, `{"price":"2"}`), jsonOf(t, string(p.Attributes)))

	d, err = s.BeginDiff(tctx(t), r, gen, "")
	require.NoError(t, err)
	require.False(t, d.Proceed, "a duplicate event of an applied generation does nothing")
	next, d := arrive(t, s, r)
	require.Equal(t, gen, d.Baseline, "the applied generation is the next one's baseline")
	require.EqualValues(t, 3, d.BaselineProducts)
	require.Equal(t, gen+1, next)
}

func testChunkOnce(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	gen := start(t, s, r, 2, catalog.Counts{})
	counted, err := s.ChunkCounted(tctx(t), r, gen, 0)
	require.NoError(t, err)
	require.False(t, counted)
	require.Equal(t, catalog.ChunkApplied, applyChunk(t, s, r, gen, 0, upsert("a", `{}`)).Outcome)
	res := applyChunk(t, s, r, gen, 0, upsert("a", `{"changed":true}`))
	require.Equal(t, catalog.ApplyResult{Outcome: catalog.ChunkDuplicate}, res, "a redelivered chunk writes nothing")
	counted, err = s.ChunkCounted(tctx(t), r, gen, 0)
	require.NoError(t, err)
	require.True(t, counted)
	st := status(t, s, r, gen)
	require.Equal(t, 1, st.ChunksApplied)
	require.Equal(t, catalog.StateApplying, st.State)
	require.Equal(t, map[string]any{"a": map[string]any{}}, productsOf(t, s, r))
}

func testFence(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := start(t, s, r, 2, catalog.Counts{})
	require.Equal(t, catalog.ChunkApplied, applyChunk(t, s, r, g1, 0, upsert("x", `{"v":1}`)).Outcome)
	g2 := start(t, s, r, 1, catalog.Counts{})
	st := status(t, s, r, g1)
	require.Equal(t, catalog.StateSuperseded, st.State, "taking over stops the older generation")
	require.Equal(t, &g2, st.SupersededBy)
	latest, err := s.IsLatest(tctx(t), r, g1)
	require.NoError(t, err)
	require.False(t, latest)
	res := applyChunk(t, s, r, g1, 1, upsert("x", `{"v":"zombie"}`), upsert("y", `{}`))
	require.Equal(t, catalog.ApplyResult{Outcome: catalog.ChunkSuperseded}, res, "a zombie chunk writes nothing (I2, I4)")
	counted, err := s.ChunkCounted(tctx(t), r, g1, 1)
	require.NoError(t, err)
	require.False(t, counted)
	require.Equal(t, map[string]any{"x": jsonOf(t, `{"v":1}`)}, productsOf(t, s, r))
	_, err = s.TakeOver(tctx(t), r, g1)
	require.ErrorIs(t, err, catalog.ErrSuperseded)
}

func testNoResurrection(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := start(t, s, r, 1, catalog.Counts{Products: 1})
	applyChunk(t, s, r, g1, 0, upsert("x", `{"v":1}`))
	g2 := start(t, s, r, 1, catalog.Counts{})
	res := applyChunk(t, s, r, g2, 0, del("x"), del("never-there"))
	require.Equal(t, catalog.ApplyResult{Outcome: catalog.ChunkApplied, Written: 1, GenerationApplied: true}, res)
	_, err := s.Product(tctx(t), r, "x", true)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	res = applyChunk(t, s, r, g1, 1, upsert("x", `{"v":1}`))
	require.Equal(t, catalog.ChunkSuperseded, res.Outcome, "a late write of an older generation")
	_, err = s.Product(tctx(t), r, "x", true)
	require.ErrorIs(t, err, catalog.ErrNotFound, "a deleted product stays deleted (I3)")
	g3 := start(t, s, r, 1, catalog.Counts{})
	res = applyChunk(t, s, r, g3, 0, upsert("x", `{"v":3}`))
	require.EqualValues(t, 1, res.Written, "a newer generation brings it back")
	require.Equal(t, map[string]any{"x": jsonOf(t, `{"v":3}`)}, productsOf(t, s, r))
}

func testOnlyChanges(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := start(t, s, r, 1, catalog.Counts{})
	applyChunk(t, s, r, g1, 0, upsert("same", `{"v":1}`), upsert("changed", `{"v":1}`), upsert("gone", `{}`))
	g2 := start(t, s, r, 1, catalog.Counts{})
	res := applyChunk(t, s, r, g2, 0, upsert("same", `{"v":1}`), upsert("changed", `{"v":2}`), del("gone"), del("gone"))
	require.EqualValues(t, 2, res.Written, "an unchanged row is not written (I6)")
	p, err := s.Product(tctx(t), r, "same", true)
	require.NoError(t, err)
	require.Equal(t, g1, p.Generation, "the unchanged row keeps its generation")
	p, err = s.Product(tctx(t), r, "changed", true)
	require.NoError(t, err)
	require.Equal(t, g2, p.Generation)
}

func testStopped(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := start(t, s, r, 1, catalog.Counts{Products: 1})
	applyChunk(t, s, r, g1, 0, upsert("x", `{"v":"a"}`))
	g2 := start(t, s, r, 2, catalog.Counts{})
	applyChunk(t, s, r, g2, 0, upsert("x", `{"v":"b"}`))
	g3, d := arrive(t, s, r)
	require.Equal(t, g1, d.Baseline)
	require.Empty(t, d.Stopped, "BeginDiff does not stop anything yet")
	require.Equal(t, catalog.StateApplying, status(t, s, r, g2).State, "older work goes on while the new upload is read")
	taken, err := s.TakeOver(tctx(t), r, g3)
	require.NoError(t, err)
	require.Equal(t, g1, taken.Baseline)
	require.Equal(t, []int64{g2}, taken.Stopped, "a generation stopped half way is in the repair set (I5)")
	require.Equal(t, catalog.StateSuperseded, status(t, s, r, g2).State)
}

func testOutOfOrder(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := reserve(t, s, r)
	state, err := s.MarkArrived(tctx(t), r, g1, time.Now(), time.Hour)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, state)
	g2 := reserve(t, s, r)
	d, err := s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	_, err = s.TakeOver(tctx(t), r, g2)
	require.NoError(t, err)
	d, err = s.BeginDiff(tctx(t), r, g1, "")
	require.NoError(t, err)
	require.False(t, d.Proceed, "an older upload arriving last")
	st := status(t, s, r, g1)
	require.Equal(t, catalog.StateSuperseded, st.State)
	require.Equal(t, &g2, st.SupersededBy)
	require.NotNil(t, st.ReceivedAt)
}

func testRejectHoldConfirm(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Reject(tctx(t), r, g1, catalog.Rejection{Code: "duplicate_product_id", Message: "p1 twice", Line: 7})))
	st := status(t, s, r, g1)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, "duplicate_product_id", st.ErrorCode)
	require.Equal(t, 7, st.ErrorLine)
	d, err := s.BeginDiff(tctx(t), r, g1, "")
	require.NoError(t, err)
	require.False(t, d.Proceed, "a rejected generation stays rejected")

	g2, _ := arrive(t, s, r)
	counts := catalog.Counts{Deleted: 80, Unchanged: 20, Products: 20}
	require.NoError(t, errOf(s.Hold(tctx(t), r, g2, "mass_delete", "80 of 100", counts)))
	st = status(t, s, r, g2)
	require.Equal(t, catalog.StateHeld, st.State)
	require.Equal(t, "mass_delete", st.ErrorCode)
	require.EqualValues(t, 80, st.Deleted)
	d, err = s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.False(t, d.Proceed, "a held generation waits for its confirmation")
	require.ErrorIs(t, s.Confirm(tctx(t), r, g1), catalog.ErrConflict, "only a held generation is confirmed")
	require.NoError(t, s.Confirm(tctx(t), r, g2))
	d, err = s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	require.True(t, d.Confirmed)
	require.Equal(t, catalog.StateDiffing, status(t, s, r, g2).State)
	require.ErrorIs(t, s.Confirm(tctx(t), r, 99), catalog.ErrNotFound)
}

func testConfirmLatest(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Hold(tctx(t), r, g1, "empty_snapshot", "empty", catalog.Counts{})))
	reserve(t, s, r) // reserved, not arrived: the hold may still be confirmed
	require.NoError(t, s.Confirm(tctx(t), r, g1))
	arrive(t, s, r)
	require.ErrorIs(t, s.Confirm(tctx(t), r, g1), catalog.ErrConflict, "a newer upload arrived")
}

func testZeroChunks(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1 := start(t, s, r, 0, catalog.Counts{Unchanged: 5, Products: 5})
	st := status(t, s, r, g1)
	require.Equal(t, catalog.StateApplied, st.State, "nothing to send: applied at once")
	_, d := arrive(t, s, r)
	require.Equal(t, g1, d.Baseline)
	require.EqualValues(t, 5, d.BaselineProducts)
}

func testStartApplyingSuperseded(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g1, _ := arrive(t, s, r)
	start(t, s, r, 1, catalog.Counts{})
	require.ErrorIs(t, s.StartApplying(tctx(t), r, g1, catalog.Counts{}, 1), catalog.ErrSuperseded)
	require.Equal(t, catalog.StateSuperseded, status(t, s, r, g1).State)
}

func testProducts(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	g := start(t, s, r, 1, catalog.Counts{})
	applyChunk(t, s, r, g, 0, upsert("b", `{}`), upsert("a", `{}`), upsert("B", `{}`), upsert("a/b c", `{}`), upsert("é", `{}`))
	g2 := start(t, s, r, 1, catalog.Counts{})
	applyChunk(t, s, r, g2, 0, del("b"))
	var got []string
	after := ""
	for {
		page, err := s.Products(tctx(t), r, after, 2, 0, false)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		require.LessOrEqual(t, len(page), 2)
		for _, p := range page {
			got = append(got, p.ProductID)
			after = p.ProductID
		}
	}
	require.Equal(t, []string{"B", "a", "a/b c", "é"}, got, "live products in byte order")
	_, err := s.Product(tctx(t), r, "b", false)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.Replicated(tctx(t), r)
	require.NoError(t, err)

	// A byte bound: the read stops after the product that reaches it.
	for _, c := range []struct{ maxBytes, want int }{{1, 1}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {0, 4}} {
		page, err := s.Products(tctx(t), r, "", 10, c.maxBytes, false) // each "{}": 2 bytes
		require.NoError(t, err)
		require.Len(t, page, c.want, "maxBytes %d", c.maxBytes)
	}

	// The generations the storefront's revalidation compares with.
	latest, applied, err := s.KnownGenerations(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, [2]int64{g2, g2}, [2]int64{latest, applied})
	g3, _ := arrive(t, s, r)
	_, err = s.TakeOver(tctx(t), r, g3)
	require.NoError(t, err)
	latest, applied, err = s.KnownGenerations(tctx(t), r)
	require.NoError(t, err)
	require.Equal(t, [2]int64{g3, g2}, [2]int64{latest, applied}, "taken over, not applied")
}

func testDirectory(t *testing.T, s Store, id func(string) string) {
	r1, r2, p := id("r1"), id("r2"), id("p")
	lookup := func(limit int) []string {
		t.Helper()
		got, err := s.DirectoryRetailers(tctx(t), p, limit)
		require.NoError(t, err)
		return got
	}
	require.Empty(t, lookup(10))
	require.NoError(t, s.UpdateDirectory(tctx(t), r2, 2, []message.ChunkOp{upsert(p, `{}`)}))
	require.NoError(t, s.UpdateDirectory(tctx(t), r2, 1, []message.ChunkOp{del(p)}))
	require.Equal(t, []string{r2}, lookup(10), "an older generation's delete changes nothing")
	require.NoError(t, s.UpdateDirectory(tctx(t), r1, 1, []message.ChunkOp{upsert(p, `{}`)}))
	require.Equal(t, []string{r1, r2}, lookup(10), "retailers in order")
	require.Equal(t, []string{r1}, lookup(1))
	require.NoError(t, s.UpdateDirectory(tctx(t), r1, 2, []message.ChunkOp{upsert(p, `{}`), del(p)}))
	require.Equal(t, []string{r2}, lookup(10), "the last op of a chunk wins")
	require.NoError(t, s.UpdateDirectory(tctx(t), r1, 1, []message.ChunkOp{upsert(p, `{}`)}))
	require.Equal(t, []string{r2}, lookup(10), "a tombstone stays until a newer generation")
}

func testUnfinished(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	held, _ := arrive(t, s, r)
	require.NoError(t, errOf(s.Hold(tctx(t), r, held, "empty_snapshot", "empty", catalog.Counts{})))
	require.NoError(t, s.Confirm(tctx(t), r, held))
	applying := start(t, s, r, 2, catalog.Counts{})
	diffing, _ := arrive(t, s, r)
	reserve(t, s, r) // awaiting its upload: nothing to resume
	all, err := s.Unfinished(tctx(t))
	require.NoError(t, err)
	var mine []int64
	for _, u := range all {
		if u.RetailerID == r {
			mine = append(mine, u.Generation)
			require.Equal(t, keys.Upload(r, u.Generation), u.ObjectKey)
		}
	}
	require.Equal(t, []int64{applying, diffing}, mine, "the held one was superseded by the take-over")
	_ = held
}

func testUnknownRetailer(t *testing.T, s Store, id func(string) string) {
	r := id("nobody")
	_, err := s.Retailer(tctx(t), r)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.ReserveGeneration(tctx(t), r, "csv", time.Now().Add(time.Hour), 0)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.Product(tctx(t), r, "x", false)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.Products(tctx(t), r, "", 10, 0, false)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.BeginDiff(tctx(t), r, 1, "")
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// usageOf is the retailer's usage of today (UTC).
func usageOf(t *testing.T, s Store, retailerID string) usage.Usage {
	t.Helper()
	today := time.Now().UTC()
	all, err := s.Usage(tctx(t), today.AddDate(0, 0, -1), today.AddDate(0, 0, 1))
	require.NoError(t, err)
	var u usage.Usage
	n := 0
	for _, r := range all {
		if r.RetailerID == retailerID {
			require.Equal(t, today.Format(usage.DateLayout), r.Date)
			u.Add(r.Usage)
			n++
		}
	}
	require.LessOrEqual(t, n, 1, "one record per retailer-day")
	return u
}

// testUsage: the counters of DESIGN 10 move with the work, once: an upload
// when its file first arrives, what the diff read and changed when it
// starts applying (not again on a re-run, nor for a confirmed hold already
// counted), a chunk and its rows when it is applied (not for a duplicate
// or superseded delivery); what meters add is summed per retailer-day.
func testUsage(t *testing.T, s Store, id func(string) string) {
	r := id("r")
	onboard(t, s, r)
	require.Equal(t, usage.Usage{}, usageOf(t, s, r))

	g1, _ := arrive(t, s, r)
	_, err := s.BeginDiff(tctx(t), r, g1, "") // a duplicate S3 event
	require.NoError(t, err)
	_, err = s.TakeOver(tctx(t), r, g1)
	require.NoError(t, err)
	c1 := catalog.Counts{Inserted: 3, Products: 3, Bytes: 300}
	require.NoError(t, s.StartApplying(tctx(t), r, g1, c1, 2))
	require.NoError(t, s.StartApplying(tctx(t), r, g1, c1, 2)) // a re-run of the diff
	require.EqualValues(t, 2, applyChunk(t, s, r, g1, 0, upsert("a", `{}`), upsert("b", `{}`)).Written)
	require.Equal(t, catalog.ChunkDuplicate, applyChunk(t, s, r, g1, 0, upsert("a", `{}`), upsert("b", `{}`)).Outcome)
	applyChunk(t, s, r, g1, 1, upsert("c", `{}`))
	want := usage.Usage{Uploads: 1, BytesUploaded: 300, RowsReceived: 3, RowsInserted: 3, Chunks: 2, DBRowsWritten: 2 * 3}
	require.Equal(t, want, usageOf(t, s, r))

	// A held snapshot counts what it read once, its confirmation the changes.
	g2, _ := arrive(t, s, r)
	c2 := catalog.Counts{Deleted: 3, Products: 0, Bytes: 20}
	require.NoError(t, errOf(s.Hold(tctx(t), r, g2, "empty_snapshot", "empty", c2)))
	require.NoError(t, s.Confirm(tctx(t), r, g2))
	d, err := s.BeginDiff(tctx(t), r, g2, "")
	require.NoError(t, err)
	require.True(t, d.Proceed)
	_, err = s.TakeOver(tctx(t), r, g2)
	require.NoError(t, err)
	require.NoError(t, s.StartApplying(tctx(t), r, g2, c2, 1))
	applyChunk(t, s, r, g2, 0, del("a"), del("b"), del("c"))
	want.Uploads, want.BytesUploaded, want.RowsDeleted, want.Chunks, want.DBRowsWritten = 2, 320, 3, 3, 2*6
	require.Equal(t, want, usageOf(t, s, r))

	// A superseded chunk counts nothing; a late older upload counts as one.
	g3 := start(t, s, r, 1, catalog.Counts{Inserted: 1, Products: 1})
	g4 := start(t, s, r, 1, catalog.Counts{Inserted: 1, Products: 1})
	require.Equal(t, catalog.ChunkSuperseded, applyChunk(t, s, r, g3, 0, upsert("d", `{}`)).Outcome)
	applyChunk(t, s, r, g4, 0, upsert("d", `{}`))
	want.Uploads, want.RowsReceived, want.RowsInserted, want.Chunks, want.DBRowsWritten = 4, 5, 5, 4, 2*7
	require.Equal(t, want, usageOf(t, s, r))

	// What meters count in memory is added to the same retailer-day.
	today := time.Now().UTC().Format(usage.DateLayout)
	added := usage.Usage{Reads: 7, ReadBytes: 700, S3ClassA: 2, SQSFIFO: 3}
	added.AddFunction("read", usage.FunctionUsage{Invocations: 7, MBms: 7 * 1024})
	require.NoError(t, s.AddUsage(tctx(t), []usage.DayUsage{{Date: today, RetailerID: r, Usage: added}, {Date: today, RetailerID: r, Usage: added}}))
	want.Reads, want.ReadBytes, want.S3ClassA, want.SQSFIFO = 14, 1400, 4, 6
	want.AddFunction("read", usage.FunctionUsage{Invocations: 14, MBms: 14 * 1024})
	require.Equal(t, want, usageOf(t, s, r))
	require.Error(t, s.AddUsage(tctx(t), []usage.DayUsage{{Date: "yesterday", RetailerID: r}}))
}
