package systemtest_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// I4, I5: generation 8 arrives while 7 is half applied, 8 is itself stopped
// half way, then 9 reverts every row to 6's values: the catalog equals 9.
func TestI5StoppedGenerationsRepaired(t *testing.T) {
	t.Parallel()
	q := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: q.Wrap})
	e.Onboard("r1")
	g6 := fixtures.Generate("p", 40)
	require.Equal(t, "applied", e.Upload("r1", g6.CSV(nil)).State)

	var stalled atomic.Int64
	// Hold every chunk but the first of the stalled generation.
	q.Hold = func(m message.ChunkMessage) bool { return m.Generation == stalled.Load() && m.Seq > 0 }
	halfApply := func(c fixtures.Catalog) int64 {
		slot, err := e.API.Reserve(context.Background(), e.Token("r1"), "r1", "")
		require.NoError(t, err)
		stalled.Store(slot.Generation)
		require.NoError(t, e.API.Put(context.Background(), slot, c.CSV(nil)))
		require.Eventually(t, func() bool {
			s := e.Status("r1", slot.Generation)
			return s.State == "applying" && s.Chunks.Applied == 1
		}, 30*time.Second, 20*time.Millisecond)
		return slot.Generation
	}
	g7 := g6.Clone()
	for i := 0; i < 40; i += 2 {
		g7[fmt.Sprintf("p-%05d", i)]["price"] = "seven"
	}
	for i := 0; i < 5; i++ {
		delete(g7, fmt.Sprintf("p-%05d", 30+i))
	}
	gen7 := halfApply(g7)
	g8 := g6.Clone()
	for i := 1; i < 40; i += 2 {
		g8[fmt.Sprintf("p-%05d", i)]["title"] = "eight"
	}
	g8["new-8"] = fixtures.Row("eight")
	gen8 := halfApply(g8)
	require.Equal(t, "superseded", e.Status("r1", gen7).State)
	require.NotEqual(t, g6, e.Catalog("r1"), "the stopped generations did write")

	stalled.Store(0)
	s9 := e.Upload("r1", g6.CSV(nil))
	require.Equal(t, "applied", s9.State)
	require.Zero(t, s9.Changes.Inserted+s9.Changes.Updated+s9.Changes.Deleted, "9 equals the baseline 6")
	e.RequireCatalog("r1", g6)
	require.Equal(t, "superseded", e.Status("r1", gen8).State)

	// The stalled chunks of 7 and 8 wake up late and write nothing.
	resp, err := e.Stack.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: asSQS(q.Take())})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	e.RequireCatalog("r1", g6)
}
