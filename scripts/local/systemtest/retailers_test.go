package systemtest_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// Defect 6: a retailer rotates its token: the old one gets 401 at once, on
// every route; the new one works; an upload URL handed out before the
// rotation stays valid until it expires. The admin recovers a lost token.
func TestTokenRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	old := e.Onboard("r1")
	ctx := systemtest.Context(t, time.Minute)
	slot, err := e.API.Reserve(ctx, old, "r1", "")
	require.NoError(t, err)

	fresh, err := e.API.RotateToken(ctx, old, "r1")
	require.NoError(t, err)
	require.NotEqual(t, old, fresh)
	_, err = e.API.Reserve(ctx, old, "r1", "")
	requireHTTPStatus(t, err, http.StatusUnauthorized)
	_, err = e.API.Status(ctx, old, "r1", slot.Generation)
	requireHTTPStatus(t, err, http.StatusUnauthorized)
	_, err = e.API.RotateToken(ctx, old, "r1")
	requireHTTPStatus(t, err, http.StatusUnauthorized)

	c := fixtures.Generate("p", 30)
	require.NoError(t, e.API.Put(ctx, slot, c.CSV(nil)), "the URL handed out before the rotation")
	s, err := e.API.WaitSettled(ctx, fresh, "r1", slot.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State)

	recovered, err := e.API.RecoverToken(ctx, e.Stack.AdminToken, "r1")
	require.NoError(t, err)
	_, err = e.API.Status(ctx, fresh, "r1", slot.Generation)
	requireHTTPStatus(t, err, http.StatusUnauthorized)
	_, err = e.API.Status(ctx, recovered, "r1", slot.Generation)
	require.NoError(t, err)
	_, err = e.API.RecoverToken(ctx, recovered, "r1")
	requireHTTPStatus(t, err, http.StatusForbidden)
}

// Defect 6: offboarding a retailer revokes its token at once, stops its
// pending work (a generation half applied, an unused slot), removes its
// catalog from the storefront and the product directory, refuses anything
// new, and touches nothing of another retailer, even one sharing product ids.
func TestOffboarding(t *testing.T) {
	t.Parallel()
	held := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: held.Wrap})
	token := e.Onboard("gone")
	e.Onboard("stays")
	ctx := systemtest.Context(t, 2*time.Minute)
	shared := fixtures.Generate("p", 40)
	require.Equal(t, "applied", e.Upload("gone", shared.CSV(nil)).State)
	require.Equal(t, "applied", e.Upload("stays", shared.CSV(nil)).State)

	// Pending work: a generation whose chunks after the first are stalled.
	next := shared.Clone()
	for _, id := range next.IDs() {
		next[id]["price"] = "pending"
	}
	next["only-gone"] = fixtures.Row("x")
	slot, err := e.API.Reserve(ctx, token, "gone", "")
	require.NoError(t, err)
	held.Hold = func(m message.ChunkMessage) bool { return m.Generation == slot.Generation && m.Seq > 0 }
	require.NoError(t, e.API.Put(ctx, slot, next.CSV(nil)))
	e.WaitFor("gone", slot.Generation, "one chunk applied", func(s apiclient.Status) bool { return s.State == "applying" && s.Chunks.Applied == 1 })
	unused, err := e.API.Reserve(ctx, token, "gone", "")
	require.NoError(t, err)

	off, err := e.API.Offboard(ctx, e.Stack.AdminToken, "gone")
	require.NoError(t, err)
	require.Equal(t, "gone", off.RetailerID)
	_, err = e.API.Reserve(ctx, token, "gone", "")
	requireHTTPStatus(t, err, http.StatusUnauthorized)
	_, err = e.API.Reserve(ctx, e.Stack.AdminToken, "gone", "")
	requireHTTPStatus(t, err, http.StatusConflict)

	admin := e.Stack.AdminToken
	s, err := e.API.WaitSettled(ctx, admin, "gone", off.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State, "%+v", s)
	require.NoError(t, held.Release(ctx))
	for _, g := range []int64{slot.Generation, unused.Generation} {
		s, err := e.API.WaitSettled(ctx, admin, "gone", g, nil)
		require.NoError(t, err)
		require.Equal(t, "superseded", s.State, "generation %d", g)
		require.Equal(t, off.Generation, *s.SupersededBy)
	}
	e.WaitDrained(e.Stack.SmallQueue)
	require.Empty(t, e.Catalog("gone"), "removed from the storefront")
	_, err = e.API.Product(ctx, "gone", "p-00001")
	requireHTTPStatus(t, err, http.StatusNotFound)
	// An upload to a URL handed out before changes nothing.
	require.NoError(t, e.API.Put(ctx, unused, next.CSV(nil)))
	e.WaitDrained(e.Stack.ArrivalQueue)
	e.WaitDrained(e.Stack.DiffQueue)
	require.Empty(t, e.Catalog("gone"))

	// The directory: a shared id now names only the other retailer; an id
	// only the offboarded retailer had is gone.
	var p struct {
		RetailerID string `json:"retailer_id"`
	}
	require.NoError(t, e.API.Do(ctx, http.MethodGet, "/v1/products/p-00001", "", nil, &p))
	require.Equal(t, "stays", p.RetailerID)
	err = e.API.Do(ctx, http.MethodGet, "/v1/products/only-gone", "", nil, nil)
	requireHTTPStatus(t, err, http.StatusNotFound)
	e.RequireCatalog("stays", shared)

	again, err := e.API.Offboard(ctx, admin, "gone")
	require.NoError(t, err)
	require.Equal(t, off.Generation, again.Generation)
	_, err = e.API.CreateRetailer(ctx, admin, "gone")
	requireHTTPStatus(t, err, http.StatusConflict)
}
