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

// I2, I3, I4: a zombie apply of generation 7 after generation 8 is applied
// has its updates, inserts and deletes all refused.
func TestI2ZombieApplyRefused(t *testing.T) {
	t.Parallel()
	q := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: q.Wrap})
	e.Onboard("r1")
	base := fixtures.Generate("p", 30)
	s := e.Upload("r1", base.CSV(nil))
	require.Equal(t, "applied", s.State)

	// Generation "7": updates p-00000..04, deletes p-00010..14, inserts z-*; its chunks stall.
	zombie := base.Clone()
	for i := 0; i < 5; i++ {
		zombie[fmt.Sprintf("p-%05d", i)]["price"] = "zombie"
		delete(zombie, fmt.Sprintf("p-%05d", 10+i))
		zombie[fmt.Sprintf("z-%d", i)] = fixtures.Row("zombie")
	}
	var zombieGen atomic.Int64
	q.Hold = func(m message.ChunkMessage) bool { return m.Generation == zombieGen.Load() }
	slot, err := e.API.Reserve(context.Background(), e.Token("r1"), "r1", "")
	require.NoError(t, err)
	zombieGen.Store(slot.Generation)
	require.NoError(t, e.API.Put(context.Background(), slot, zombie.CSV(nil)))
	require.Eventually(t, func() bool { return q.Len() == 2 }, 30*time.Second, 20*time.Millisecond)
	held := asSQS(q.Take())

	// Generation "8" changes something else and is applied.
	next := base.Clone()
	next["p-00020"]["price"] = "eight"
	s8 := e.Upload("r1", next.CSV(nil))
	require.Equal(t, "applied", s8.State)

	// The zombie wakes up: every chunk is acknowledged, nothing written.
	resp, err := e.Stack.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: held})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	e.RequireCatalog("r1", next)
	s7 := e.Status("r1", slot.Generation)
	require.Equal(t, "superseded", s7.State)
	require.Equal(t, s8.Generation, *s7.SupersededBy)
}
