package systemtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// Defect 6: a snapshot that renames its columns rewrites every row; it is
// held (mass_update) instead of applied, the catalog keeps the previous
// generation, and the confirmation applies it. A price change of every row
// under the same names is not held; a retailer's own threshold is used.
func TestRenamedHeaderHeld(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 500})
	e.Onboard("r1")
	ctx := systemtest.Context(t, 2*time.Minute)
	base := fixtures.Generate("p", 200)
	require.Equal(t, "applied", e.Upload("r1", base.CSV(nil)).State)

	repriced := base.Clone()
	for _, a := range repriced {
		a["price"] = "1.00"
	}
	s := e.Upload("r1", repriced.CSV(nil))
	require.Equal(t, "applied", s.State, "the same names: every price changed is a normal day")
	require.EqualValues(t, 200, s.Changes.Updated)

	renamed := fixtures.Catalog{}
	for id, a := range repriced {
		renamed[id] = map[string]string{"Title": a["title"], "Brand": a["brand"], "Price": a["price"],
			"Availability": a["availability"], "Description": a["description"]}
	}
	held := e.Upload("r1", renamed.CSV([]string{"Title", "Brand", "Price", "Availability", "Description"}))
	// Every attribute every product had is gone: attribute_dropped, which
	// comes before mass_update (DESIGN 13).
	require.Equal(t, "held", held.State)
	require.Equal(t, "attribute_dropped", held.Error.Code)
	require.Contains(t, held.Error.Message, `attribute "availability"`)
	require.EqualValues(t, 200, held.Changes.Updated)
	e.RequireCatalog("r1", repriced)

	_, err := e.API.Confirm(ctx, e.Token("r1"), "r1", held.Generation)
	require.NoError(t, err)
	s, err = e.API.WaitApplied(ctx, e.Token("r1"), "r1", held.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State)
	e.RequireCatalog("r1", renamed)

	// A new column on every product (nothing removed): mass_update; with
	// hold_update_pct 100 the same kind of rewrite goes through.
	cols := []string{"Title", "Brand", "Price", "Availability", "Description"}
	colored := renamed.Clone()
	for _, a := range colored {
		a["Color"] = "red"
	}
	held = e.Upload("r1", colored.CSV(append(cols, "Color")))
	require.Equal(t, "held", held.State)
	require.Equal(t, "mass_update", held.Error.Code)
	require.Contains(t, held.Error.Message, "new: Color")
	all := 100.0
	_, err = e.API.PutSettings(ctx, e.Token("r1"), "r1", nil, &all)
	require.NoError(t, err)
	sized := renamed.Clone()
	for _, a := range sized {
		a["Size"] = "M"
	}
	require.Equal(t, "applied", e.Upload("r1", sized.CSV(append(cols, "Size"))).State)
	e.RequireCatalog("r1", sized)
}

// Defect 5 (DESIGN 4): a rejected file's status lists its problems, up to
// the first 100, each with code, line and message, duplicates included, on
// the status and the list routes.
func TestRejectionProblemsInStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	var b strings.Builder
	b.WriteString("product_id,title\n")
	for i := 0; i < 150; i++ {
		if i%2 == 0 {
			fmt.Fprintf(&b, "p%d,ok\n", i)
		} else {
			fmt.Fprintf(&b, "p%d,too,many\n", i)
		}
	}
	b.WriteString("p0,again\n")
	s := e.Upload("r1", []byte(b.String()))
	require.Equal(t, "rejected", s.State)
	require.Len(t, s.Error.Problems, 76, "75 bad rows and a duplicate")
	require.Equal(t, s.Error.Code, s.Error.Problems[0].Code)
	require.Equal(t, 3, *s.Error.Line)
	require.Equal(t, 3, s.Error.Problems[0].Line)
	last := s.Error.Problems[75]
	require.Equal(t, "duplicate_product_id", last.Code)
	require.Equal(t, 152, last.Line)
	require.False(t, s.Error.MoreProblems)
	list, err := e.API.List(systemtest.Context(t, time.Minute), e.Token("r1"), "r1", 1)
	require.NoError(t, err)
	require.Equal(t, s.Error.Problems, list[0].Error.Problems)
}
