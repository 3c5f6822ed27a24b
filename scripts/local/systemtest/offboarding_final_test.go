package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// appliedNow lists the generations of a retailer that are applied at this
// moment (read with the admin token, newest 100).
func appliedNow(t *testing.T, e *systemtest.Env, retailer string) map[int64]bool {
	t.Helper()
	list, err := e.API.List(context.Background(), e.Stack.AdminToken, retailer, 100)
	require.NoError(t, err)
	out := map[int64]bool{}
	for _, s := range list {
		if s.State == "applied" {
			out[s.Generation] = true
		}
	}
	return out
}

// requireOffboarded waits for a retailer's offboarding generation to apply
// and for every queue to drain, then requires: the catalog empty on the
// storefront, no generation applied after the DELETE answered (applied
// holds those applied then), and a second DELETE answering the same
// generation, applied.
func requireOffboarded(t *testing.T, e *systemtest.Env, retailer string, off apiclient.Offboarding, applied map[int64]bool) {
	t.Helper()
	ctx := systemtest.Context(t, 2*time.Minute)
	admin := e.Stack.AdminToken
	s, err := e.API.WaitSettled(ctx, admin, retailer, off.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State, "%s: the offboarding generation %d: %+v", retailer, off.Generation, s)
	for _, q := range []stack.Queue{e.Stack.ArrivalQueue, e.Stack.DiffQueue, e.Stack.SmallQueue} {
		e.WaitDrained(q)
	}
	list, err := e.API.List(ctx, admin, retailer, 100)
	require.NoError(t, err)
	require.Equal(t, off.Generation, list[0].Generation, "%s: the offboarding is the newest generation", retailer)
	for _, g := range list {
		if g.State == "applied" && g.Generation != off.Generation {
			require.True(t, applied[g.Generation], "%s: generation %d applied after DELETE answered", retailer, g.Generation)
		}
		require.True(t, apiclient.Settled(g.State) || g.State == "expired", "%s: generation %d is %s", retailer, g.Generation, g.State)
	}
	require.Empty(t, e.Catalog(retailer), "%s: the catalog is gone from the storefront", retailer)
	again, err := e.API.Offboard(ctx, admin, retailer)
	require.NoError(t, err)
	require.Equal(t, off.Generation, again.Generation, "%s: a second DELETE answers the same generation", retailer)
	require.Equal(t, "applied", again.State)
}

// Defect 1 (an attack on the running system): reservations, with the
// retailer's token and with the admin's, each followed at once by an
// upload through its URL, race a DELETE of the retailer, round after
// round. Once DELETE has answered: no reservation succeeds, no upload
// through any URL handed out is applied (those made before are superseded
// by the offboarding), the offboarding generation ends applied, the
// catalog is empty on the storefront, and a second DELETE answers the same
// generation. (Before the shard decided, in 2 of 6 tries a reservation got
// a generation newer than the offboarding's, which it superseded, and the
// retailer's upload through it was applied and served.)
func TestOffboardingRacingReservations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ReservationsPerHour: 1000})
	const rounds, reservers = 8, 4
	base := fixtures.Generate("p", 30)
	next := fixtures.Generate("q", 10)
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			t.Parallel()
			e := e.For(t)
			r := fmt.Sprintf("race%d", round)
			token := e.Onboard(r)
			require.Equal(t, "applied", e.Upload(r, base.CSV(nil)).State)
			ctx := systemtest.Context(t, 2*time.Minute)
			admin := e.Stack.AdminToken

			var answered atomic.Bool
			var mu sync.Mutex
			var slots []apiclient.Slot
			var wg sync.WaitGroup
			for i := range reservers {
				tok := token
				if i%2 == 1 {
					tok = admin // past the token check: only the offboarding stops it
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					for after := 0; after < 2; {
						late := answered.Load()
						if late {
							after++
						}
						slot, err := e.API.Reserve(ctx, tok, r, "")
						if err != nil {
							var apiErr *apiclient.APIError
							if !errors.As(err, &apiErr) || (apiErr.Status != http.StatusConflict && apiErr.Status != http.StatusUnauthorized) {
								t.Errorf("%s: reservation: %v", r, err)
								return
							}
							continue
						}
						if late {
							t.Errorf("%s: generation %d reserved after DELETE answered", r, slot.Generation)
						}
						mu.Lock()
						slots = append(slots, slot)
						mu.Unlock()
						if err := e.API.Put(ctx, slot, next.CSV(nil)); err != nil {
							t.Errorf("%s: upload to generation %d: %v", r, slot.Generation, err)
						}
					}
				}()
			}
			time.Sleep(time.Duration(rand.IntN(40)) * time.Millisecond)
			off, err := e.API.Offboard(ctx, admin, r)
			require.NoError(t, err)
			answered.Store(true)
			applied := appliedNow(t, e, r)
			wg.Wait()
			for _, s := range slots {
				require.Less(t, s.Generation, off.Generation, "%s: a reservation that succeeded came before the offboarding", r)
			}
			requireOffboarded(t, e, r, off, applied)
		})
	}
}

// Confirming a held upload races a DELETE, round after round: the
// confirmation answers 409 retailer_offboarded, or it came first and the
// offboarding supersedes the confirmed hold; never is a confirmed hold
// applied after DELETE answered, and the offboarding still empties the
// catalog. (Before, a confirmation after DELETE answered succeeded when
// the offboarding's empty object had not arrived yet, and the hold could
// take over and apply.)
func TestConfirmRacingOffboarding(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	const rounds = 6
	base := fixtures.Generate("p", 120)
	kept := fixtures.Generate("p", 10) // deletes 110 of 120: held mass_delete
	var refused atomic.Int32
	for round := range rounds {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			t.Parallel()
			e := e.For(t)
			r := fmt.Sprintf("confirm%d", round)
			token := e.Onboard(r)
			require.Equal(t, "applied", e.Upload(r, base.CSV(nil)).State)
			held := e.Upload(r, kept.CSV(nil))
			require.Equal(t, "held", held.State)
			ctx := systemtest.Context(t, 2*time.Minute)

			confirmer := token
			if round%2 == 1 {
				confirmer = e.Stack.AdminToken // past the token check: only the offboarding stops it
			}
			confirmed := make(chan error, 1)
			go func() {
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
				_, err := e.API.Confirm(ctx, confirmer, r, held.Generation)
				confirmed <- err
			}()
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			off, err := e.API.Offboard(ctx, e.Stack.AdminToken, r)
			require.NoError(t, err)
			applied := appliedNow(t, e, r)
			if err := <-confirmed; err != nil {
				var apiErr *apiclient.APIError
				require.ErrorAs(t, err, &apiErr)
				if apiErr.Status == http.StatusConflict {
					require.Equal(t, "retailer_offboarded", apiErr.Code)
				} else {
					requireHTTPStatus(t, err, http.StatusUnauthorized) // after DELETE answered: the token is revoked
				}
				refused.Add(1)
			}
			// A confirmation after DELETE answered, with the admin's token.
			_, err = e.API.Confirm(ctx, e.Stack.AdminToken, r, held.Generation)
			var apiErr *apiclient.APIError
			require.ErrorAs(t, err, &apiErr)
			require.Equal(t, http.StatusConflict, apiErr.Status)
			require.Equal(t, "retailer_offboarded", apiErr.Code, "a confirmation after DELETE answered")
			requireOffboarded(t, e, r, off, applied)
			s, err := e.API.Status(ctx, e.Stack.AdminToken, r, held.Generation)
			require.NoError(t, err)
			if !applied[held.Generation] {
				require.Equal(t, "superseded", s.State)
				require.Equal(t, off.Generation, *s.SupersededBy)
			}
		})
	}
	t.Cleanup(func() { t.Logf("confirmations refused: %d of %d", refused.Load(), rounds) })
}
