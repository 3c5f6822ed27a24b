package catalog_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// The plan closes a chunk at the row limit or before the op that would take
// it over the byte budget, counting unrecorded rows at the small size; a
// single op over the budget gets a chunk of its own.
func TestPlanChunks(t *testing.T) {
	t.Parallel()
	l := catalog.ChunkLimits{Rows: 4, Bytes: 1000} // small size 250
	lines := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i + 2)
		}
		return out
	}
	require.Empty(t, catalog.PlanChunks(l, nil, nil, nil, message.DeleteLineLen))
	require.Equal(t, []int{4, 4, 2}, catalog.PlanChunks(l, lines(10), nil, nil, message.DeleteLineLen), "small rows: the row limit")

	sizes := catalog.NewRowSizes(l)
	sizes.Add(2, 100) // small: not recorded
	sizes.Add(3, 600)
	sizes.Add(5, 5000) // over the budget alone
	sizes.Add(7, 400)
	require.Equal(t, 3, sizes.Large())
	// line 2 (250) + 3 (600) = 850; 4 (250) would make 1100: close.
	// 4 (250); 5 (5000) alone; 6 (250) + 7 (400) + 8 (250) = 900; 9 (250) over: close; 9, 10, 11.
	require.Equal(t, []int{2, 1, 1, 3, 3}, catalog.PlanChunks(l, lines(10), sizes, nil, message.DeleteLineLen))

	// Deletes follow the upserts, at their own size.
	del := []string{"a", "b", "c", "d", "e"}
	require.Equal(t, []int{4, 4, 2}, catalog.PlanChunks(l, lines(5), nil, del, message.DeleteLineLen))
	long := fmt.Sprintf("%0900d", 0) // a delete line of ~934 bytes
	require.Equal(t, []int{1, 1, 1}, catalog.PlanChunks(l, nil, nil, []string{long, long, long}, message.DeleteLineLen))
}

// Every chunk of a random plan holds at most the row limit and, unless it
// is a single op, at most the byte budget; the ops are all there, in order.
func TestPlanChunksProperty(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		l := catalog.ChunkLimits{Rows: 1 + rng.IntN(50), Bytes: 200 + rng.IntN(20000)}
		sizes := catalog.NewRowSizes(l)
		var lines []int32
		actual := map[int32]int{}
		line := int32(1)
		for range rng.IntN(300) {
			line += 1 + int32(rng.IntN(3))
			size := 1 + rng.IntN(l.Bytes/l.Rows+1)
			if rng.IntN(4) == 0 {
				size = rng.IntN(3 * l.Bytes)
			}
			sizes.Add(line, size)
			actual[line] = size
			if rng.IntN(3) > 0 { // upserted
				lines = append(lines, line)
			}
		}
		var dels []string
		for range rng.IntN(100) {
			dels = append(dels, fmt.Sprintf("%0*d", rng.IntN(400), 7))
		}
		plan := catalog.PlanChunks(l, lines, sizes, dels, message.DeleteLineLen)
		total, at := 0, 0
		for _, n := range plan {
			require.Positive(t, n)
			require.LessOrEqual(t, n, l.Rows)
			bytes := 0
			for i := at; i < at+n; i++ {
				if i < len(lines) {
					bytes += actual[lines[i]]
				} else {
					bytes += message.DeleteLineLen(dels[i-len(lines)])
				}
			}
			if n > 1 {
				require.LessOrEqual(t, bytes, l.Bytes)
			}
			at += n
			total += n
		}
		require.Equal(t, len(lines)+len(dels), total)
	}
}
