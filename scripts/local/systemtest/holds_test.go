package systemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// I8: an empty file and a mass delete are held until confirmed.
func TestI8HeldUntilConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	ctx := context.Background()
	full := fixtures.Generate("p", 200)
	require.Equal(t, "applied", e.Upload("r1", full.CSV(nil)).State)

	empty := e.Upload("r1", []byte{})
	require.Equal(t, "held", empty.State)
	require.Equal(t, "empty_snapshot", empty.Error.Code)
	e.RequireCatalog("r1", full)

	few := fixtures.Catalog{}
	for _, id := range full.IDs()[:80] {
		few[id] = full[id]
	}
	held := e.Upload("r1", few.CSV(nil))
	require.Equal(t, "held", held.State)
	require.Equal(t, "mass_delete", held.Error.Code)
	require.EqualValues(t, 120, held.Changes.Deleted)
	e.RequireCatalog("r1", full)
	require.Equal(t, "held", e.Status("r1", empty.Generation).State, "a held upload does not supersede another")

	_, err := e.API.Confirm(ctx, e.Token("r1"), "r1", empty.Generation)
	requireStatus(t, err, 409)
	_, err = e.API.Confirm(ctx, e.Token("r1"), "r1", held.Generation)
	require.NoError(t, err)
	s, err := e.API.WaitApplied(systemtest.Context(t, time.Minute), e.Token("r1"), "r1", held.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State)
	e.RequireCatalog("r1", few)
	require.Equal(t, "superseded", e.Status("r1", empty.Generation).State, "the applied upload supersedes the older held one")
	_, err = e.API.Confirm(ctx, e.Token("r1"), "r1", held.Generation)
	requireStatus(t, err, 409)
}
