package systemtest_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// flakyQueue fails the first send of chunk failSeq: a crash between writing
// the chunk object and sending its message.
type flakyQueue struct {
	next    queue.Sender
	failSeq int
	failed  atomic.Bool
}

func (q *flakyQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	var m message.ChunkMessage
	if jsonParse(body, &m) == nil && m.Seq == q.failSeq && q.failed.CompareAndSwap(false, true) {
		return errors.New("crash after writing the chunk object")
	}
	return q.next.Send(ctx, queueURL, body, groupID, dedupID)
}

// I1: a crash between writing a chunk object and sending its message: the
// diff job is redelivered and the generation completes, each chunk once.
func TestI1CrashBetweenChunkWriteAndSend(t *testing.T) {
	t.Parallel()
	q := &flakyQueue{failSeq: 2}
	e := newEnv(t, stack.Options{ChunkRows: 10,
		WrapDiffQueue: func(next queue.Sender) queue.Sender { q.next = next; return q }})
	e.Onboard("r1")
	want := fixtures.Generate("p", 55)
	s := e.Upload("r1", want.CSV(nil))
	require.True(t, q.failed.Load())
	require.Equal(t, "applied", s.State)
	require.Equal(t, 6, s.Chunks.Total)
	require.Equal(t, 6, s.Chunks.Applied)
	e.RequireCatalog("r1", want)
}

// I1: a crash between the database commit and the message delete: the chunk
// comes back, is recognised as applied, and counted once.
func TestI1CrashBetweenCommitAndDelete(t *testing.T) {
	t.Parallel()
	var crashes atomic.Int32
	e := newEnv(t, stack.Options{ChunkRows: 10,
		WrapApply: func(next eventsource.Handler) eventsource.Handler {
			return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
				resp, err := next(ctx, ev)
				if err == nil && crashes.Add(1) <= 2 {
					return resp, errors.New("crash after commit, before delete")
				}
				return resp, err
			}
		}})
	e.Onboard("r1")
	want := fixtures.Generate("p", 35)
	s := e.Upload("r1", want.CSV(nil))
	require.Equal(t, "applied", s.State)
	require.Equal(t, 4, s.Chunks.Applied)
	e.RequireCatalog("r1", want)
}

// I1 with the same chunk delivered twice in a row and twice at once.
func TestI1ChunkDeliveredTwice(t *testing.T) {
	t.Parallel()
	q := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: q.Wrap})
	e.Onboard("r1")
	q.Hold = func(message.ChunkMessage) bool { return true }
	want := fixtures.Generate("p", 30)
	gen, err := e.API.Upload(context.Background(), e.Token("r1"), "r1", "", want.CSV(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.Status("r1", gen).State == "applying" && q.Len() == 3 }, 30*time.Second, 20*time.Millisecond)
	msgs := asSQS(q.Take())
	apply := func(m lambdaevents.SQSMessage) {
		resp, err := e.Stack.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{m}})
		require.NoError(t, err)
		require.Empty(t, resp.BatchItemFailures)
	}
	apply(msgs[0])
	apply(msgs[0]) // twice in a row
	var wg sync.WaitGroup
	for _, m := range []lambdaevents.SQSMessage{msgs[1], msgs[1], msgs[1], msgs[2], msgs[2]} {
		wg.Add(1)
		go func() { defer wg.Done(); apply(m) }() // twice at once
	}
	wg.Wait()
	s := e.Status("r1", gen)
	require.Equal(t, "applied", s.State)
	require.Equal(t, 3, s.Chunks.Applied)
	e.RequireCatalog("r1", want)
}
