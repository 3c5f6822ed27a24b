package diff

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// spillIDs are product_ids at every byte order edge: equal prefixes (an id
// and its extensions), the lowest and highest bytes an id may hold, multi-
// byte UTF-8 against ASCII, and enough plain ones that a plan has pages.
func spillIDs() []string {
	edges := []string{" ", "!", "~", "\u007f", "\u0080", "\u00ff", "\u0100", "\u07ff", "\u0800", "\uffff", "\U00010000", "\U0010ffff",
		"é", "e", "E", "0", "9", "-", "_", ".", "a", "A", "z"}
	seen := map[string]bool{}
	var ids []string
	addID := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, a := range edges {
		addID(a)
		for _, b := range edges {
			addID(a + b)
			addID(a + b + a)
		}
	}
	for n := 1; n <= 256; n *= 2 {
		addID(strings.Repeat("p", n))
		addID(strings.Repeat("p", n-1) + "\u007f")
		addID(strings.Repeat("\U0010ffff", n/4+1))
	}
	for i := range 2500 {
		addID(fmt.Sprintf("SKU-%d", i)) // SKU-1, SKU-10, SKU-100: prefixes of each other
	}
	return ids
}

// A plan spilled as dozens of sorted runs (a run budget of a few KB) and
// merged is written as exactly the pages and index of the plan sorted in
// memory (catalog.BuildPlanPages), whatever the order its entries arrive
// in; a plan within the budget is written without a file; the spill file
// is unlinked as soon as it is made; past its bytes, the plan is refused
// (errPlanTooLarge).
func TestPlanSpillMergesRunsIntoTheSortedPages(t *testing.T) {
	ids := spillIDs()
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	line := func(i int) []byte {
		return fmt.Appendf(nil, `{"product_id":%q,"op":"update","fields":{"a":{"from":%d,"to":%s}}}`, ids[i], i, strings.Repeat("9", rng.IntN(200)))
	}
	lines := make([][]byte, len(ids))
	var total int64
	for i := range ids {
		lines[i] = line(i)
		total += int64(len(ids[i]) + len(lines[i]))
	}
	var want []catalog.PlanEntry
	for i := range ids {
		want = append(want, catalog.PlanEntry{ProductID: ids[i], Line: lines[i]})
	}
	wantPages, wantIndex, err := catalog.BuildPlanPages(slices.Clone(want))
	require.NoError(t, err)
	require.Greater(t, len(wantPages), 3)

	for _, c := range []struct {
		name    string
		memory  int
		entries int // a prefix of the entries
		runs    bool
	}{
		{"dozens of runs", 4 << 10, len(ids), true},
		{"runs of one entry", 1, len(ids), true},
		{"in memory", 64 << 20, len(ids), false},
		{"a run and the rest held", 4 << 20, len(ids), false},
		{"empty", 4 << 10, 0, false},
		{"one entry", 1, 1, true},
	} {
		dir := t.TempDir()
		if c.name == "a run and the rest held" {
			c.memory = int(total)/2 + 1000*planEntryOverhead
			c.runs = true
		}
		s := &planSpill{dir: dir, memory: c.memory, maxBytes: total}
		for i := range c.entries {
			require.NoError(t, s.add(ids[i], lines[i]), c.name)
		}
		left, err := os.ReadDir(dir)
		require.NoError(t, err)
		require.Empty(t, left, "%s: the spill file is unlinked", c.name)
		runs, _ := s.spilled()
		if c.runs {
			require.Greater(t, runs, 0, c.name)
		} else {
			require.Zero(t, runs, c.name)
			require.Nil(t, s.f, "%s: no file", c.name)
		}
		if c.name == "dozens of runs" {
			require.Greater(t, runs, 24, c.name)
		}
		var pages [][]byte
		n, index, err := s.write(func(n int, page []byte) error {
			require.Equal(t, len(pages), n, c.name)
			pages = append(pages, slices.Clone(page))
			return nil
		})
		require.NoError(t, err, c.name)
		s.close()
		wp, wi := wantPages, wantIndex
		if c.entries < len(ids) {
			wp, wi, err = catalog.BuildPlanPages(slices.Clone(want[:c.entries]))
			require.NoError(t, err)
		}
		require.Equal(t, len(wp), n, c.name)
		require.Equal(t, len(wp), len(pages), c.name)
		for i := range wp {
			require.Equal(t, string(wp[i]), string(pages[i]), "%s: page %d", c.name, i)
		}
		require.JSONEq(t, string(wi), string(index), c.name)
	}

	// Past its bytes the plan is refused, spilled or not.
	for _, memory := range []int{1 << 10, 64 << 20} {
		s := &planSpill{dir: t.TempDir(), memory: memory, maxBytes: total - 1}
		var err error
		for i := 0; i < len(ids) && err == nil; i++ {
			err = s.add(ids[i], lines[i])
		}
		require.True(t, errors.Is(err, errPlanTooLarge), "%v", err)
		s.close()
	}
}
