package systemtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// A start after a crash resumes every unfinished generation (README, "up"),
// the undo of a first upload rejected half applied included: that undo has
// no upload object (its object_key is empty), and Stack.Resume must still send
// its diff job instead of refusing to start. Found by the attack round
// (FINDINGS.md): `up` killed while such an undo applied could never start
// again on its data dir ("key \"\" is not snapshots/{retailer_id}/{generation}/upload").
func TestResumeAfterCrashDuringFirstUndo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	e.refuseTitle("r1", "poison")
	g1 := fixtures.Generate("p", 30)
	g1["p-00015"]["title"] = "poison"
	s1 := e.Upload("r1", g1.CSV(nil))
	require.Equal(t, "rejected", s1.State)
	require.Equal(t, catalog.CodeApplyFailed, s1.Error.Code)
	undo := e.undoOf("r1", s1.Generation)
	require.Equal(t, "applied", undo.State)

	// The crash: the undo was still applying when the process died.
	ctx := context.Background()
	_, err := e.Shard("r1").Pool().Exec(ctx,
		`UPDATE generations SET state = 'applying', applied_at = NULL WHERE retailer_id = 'r1' AND generation = $1`, undo.Generation)
	require.NoError(t, err)

	require.NoError(t, e.Stack.Resume(ctx), "the next start resumes the undo")
	require.Equal(t, "applied", e.Wait("r1", undo.Generation).State)
	e.RequireCatalog("r1", nil)
}

// The same crash when a generation was applied before: the undo's
// object_key is then the baseline's upload key, and Resume sent the diff job
// of the baseline generation (final, a no-op) instead of the undo's, which
// stayed applying until the stuck sweeper (10 minutes by default). A start
// must resume the undo itself.
func TestResumeAfterCrashDuringUndo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	g1 := fixtures.Generate("p", 30)
	require.Equal(t, "applied", e.Upload("r1", g1.CSV(nil)).State)
	e.refuseTitle("r1", "poison")
	g2 := g1.Clone()
	for id := range g2 {
		g2[id]["price"] = "2.00"
	}
	g2["p-00015"]["title"] = "poison"
	s2 := e.Upload("r1", g2.CSV(nil))
	require.Equal(t, "rejected", s2.State)
	undo := e.undoOf("r1", s2.Generation)
	require.Equal(t, "applied", undo.State)

	ctx := context.Background()
	_, err := e.Shard("r1").Pool().Exec(ctx,
		`UPDATE generations SET state = 'applying', applied_at = NULL WHERE retailer_id = 'r1' AND generation = $1`, undo.Generation)
	require.NoError(t, err)

	require.NoError(t, e.Stack.Resume(ctx))
	s, err := e.API.WaitSettled(systemtest.Context(t, 30*time.Second), e.Token("r1"), "r1", undo.Generation, nil)
	require.NoError(t, err, "the undo is resumed at the start, not left to the stuck sweeper")
	require.Equal(t, "applied", s.State)
	e.RequireCatalog("r1", g1)
}

// A restart loses nothing downstream either: the emulator's queues start
// empty, so an event SNS had delivered to a consumer's queue (here a
// webhook waiting for its retry) is gone with them, though its outbox row
// was settled. Resume replays the recent events into the outboxes, and the
// webhook is delivered. Found by the attack round: SIGKILL of `up` during
// a delivery, and the event was never delivered again.
func TestResumeReplaysEventsTheQueuesLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	rc := newHookReceiver(t, 1, false)
	e.setWebhook("r1", rc.srv.URL+"/hooks/catalog")
	s1 := e.Upload("r1", fixtures.Generate("p", 20).CSV(nil))
	require.Equal(t, "applied", s1.State)
	id := message.EventID(message.TypeSnapshotApplied, "r1", s1.Generation, 0)
	require.Eventually(t, func() bool { got, _ := rc.snapshot(); return len(got[id]) >= 1 },
		30*time.Second, 20*time.Millisecond, "the first delivery, which fails")

	// The restart: the queue's copy, waiting for its retry, is lost.
	ctx := context.Background()
	_, err := e.Stack.SQS.PurgeQueue(ctx, &sqs.PurgeQueueInput{QueueUrl: &e.Stack.WebhooksQueue.URL})
	require.NoError(t, err)
	time.Sleep(3 * time.Second) // past the retry's 1 s backoff
	got, _ := rc.snapshot()
	require.Len(t, got[id], 1, "the lost copy is not delivered again by itself")

	require.NoError(t, e.Stack.Resume(ctx))
	require.Eventually(t, func() bool { got, _ := rc.snapshot(); return len(got[id]) >= 2 },
		90*time.Second, 100*time.Millisecond, "the replayed event delivered")
}
