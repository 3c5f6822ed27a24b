package systemtest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// Deltas sent one after another, each PUT answered before the next is
// reserved, while S3's notifications come late (two seconds): every delta
// is applied, in order, none superseded as a slot still awaiting its file,
// and the catalog has every change. So does a full snapshot followed at
// once by a delta. Before, a reservation superseded each older slot whose
// notification had not yet come, and its changes were lost.
func TestDeltasInARowWithLateNotifications(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{NotifyDelay: 2 * time.Second})
	e.Onboard("acme")
	ctx := systemtest.Context(t, 3*time.Minute)
	want := fixtures.Catalog{"A": {"price": "1"}, "B": {"price": "2"}}
	put := func(mode string, data []byte) int64 {
		slot, err := e.API.ReserveWith(ctx, e.Token("acme"), "acme", "", apiclient.ReserveOptions{Mode: mode})
		require.NoError(t, err)
		require.NoError(t, e.API.Put(ctx, slot, data))
		return slot.Generation
	}
	gens := []int64{put("", []byte("product_id,price\nA,1\nB,2\n"))}
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("N%d", i)
		gens = append(gens, put("delta", []byte(fmt.Sprintf("product_id,price\n%s,%d\nA,%d\n", id, i, 10+i))))
		want[id] = map[string]string{"price": fmt.Sprint(i)}
		want["A"]["price"] = fmt.Sprint(10 + i)
	}
	for _, g := range gens {
		st := e.Wait("acme", g)
		require.Equal(t, "applied", st.State, "generation %d: %+v", g, st.Error)
	}
	e.RequireCatalog("acme", want)
}
