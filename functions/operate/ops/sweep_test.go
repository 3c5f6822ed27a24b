package ops_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
)

// withMetrics gives the fixture's ops handler a metrics capture.
func (f *fixture) withMetrics() *metricstest.Capture {
	var out metricstest.Capture
	f.ops.Metrics = metrics.New(&out, metrics.Options{Function: "ops"})
	f.t.Cleanup(func() { require.NoError(f.t, out.Validate()) })
	return &out
}

// sweepLater sweeps as if idle past StallAfter since the last sweep.
func (f *fixture) sweepLater() ops.SweepResult {
	f.t.Helper()
	f.now = f.now.Add(11 * time.Minute)
	res, err := f.ops.Sweep(context.Background())
	require.NoError(f.t, err)
	return res
}

func (f *fixture) state(id string, gen int64) catalog.State {
	f.t.Helper()
	st, err := f.store.Generation(context.Background(), id, gen)
	require.NoError(f.t, err)
	return st.State
}

// A generation whose diff job was lost (in a dead-letter queue) is
// re-driven: its diff job sent again; once it ran, the catalog is the snapshot.
func TestSweepRedrivesALostDiffJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	lines := f.withMetrics()
	f.onboard("r1")
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, catalogCSV) // received; its job never ran

	res, err := f.ops.Sweep(context.Background())
	require.NoError(t, err)
	require.Zero(t, res.Redriven, "not idle long enough")
	require.Equal(t, ops.SweepResult{Redriven: 1}, f.sweepLater())
	jobs := f.queue.Take(queues.DiffJobs)
	require.Len(t, jobs, 1)
	require.Equal(t, "r1", jobs[0].GroupID, "in the retailer's diff group")
	var ev struct {
		Records []struct {
			S3 struct{ Object struct{ Key string } }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(jobs[0].Body), &ev))
	require.Equal(t, keys.Upload("r1", gen), ev.Records[0].S3.Object.Key)

	f.diffed("r1", gen)
	f.applyChunks()
	require.Equal(t, catalog.StateApplied, f.state("r1", gen))
	require.Equal(t, map[string]string{"a": `{"price":"1"}`, "b": `{"price":"2"}`, "c": `{"price":"3"}`}, f.catalogOf("r1"))
	require.Equal(t, 1.0, lines.Sum(metrics.GenerationsRedriven, "retailer_id=r1"))
	require.Zero(t, lines.Sum(metrics.GenerationsStuck))
	require.Len(t, lines.Lines(), 3, "one re-drive and a stuck count per sweep")
}

// A generation whose chunks stopped coming gets the missing ones again,
// from their objects, with a deduplication id of their own.
func TestSweepResendsMissingChunks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, catalogCSV)
	f.diffed("r1", gen)
	chunks := f.queue.Take(queues.ApplySmall)
	require.Len(t, chunks, 2)
	var first message.ChunkMessage
	require.NoError(t, json.Unmarshal([]byte(chunks[0].Body), &first))
	require.NoError(t, f.apply.Apply(context.Background(), first)) // the second is lost

	require.Equal(t, ops.SweepResult{Redriven: 1}, f.sweepLater())
	resent := f.queue.Messages(queues.ApplySmall)
	require.Len(t, resent, 1)
	require.JSONEq(t, chunks[1].Body, resent[0].Body, "the chunk's message as the diff sent it")
	require.Equal(t, chunks[1].GroupID, resent[0].GroupID)
	require.Equal(t, chunks[1].DedupID+":redrive-1", resent[0].DedupID)
	f.applyChunks()
	require.Equal(t, catalog.StateApplied, f.state("r1", gen))
	require.Zero(t, f.sweepLater().Redriven, "nothing left to re-drive")
}

// Chunk objects that were never written mean the diff stopped half way:
// its job is sent again.
func TestSweepRerunsADiffThatStoppedHalfWay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, catalogCSV)
	f.diffed("r1", gen)
	f.queue.Take(queues.ApplySmall)
	gone := &missingObject{Blobs: f.blobs, key: keys.Chunk("r1", gen, 1)}
	f.ops = ops.New(ops.Config{AdminToken: adminToken, Queues: queues, Now: func() time.Time { return f.now }},
		f.store, gone, f.queue, slog.New(slog.DiscardHandler))
	f.sweepLater()
	require.Len(t, f.queue.Take(queues.DiffJobs), 1)
	require.Empty(t, f.queue.Messages(queues.ApplySmall))
}

// missingObject is a blob store in which one object was never written.
type missingObject struct {
	*inmem.Blobs
	key string
}

func (m *missingObject) Get(ctx context.Context, key string) ([]byte, error) {
	if key == m.key {
		return nil, blob.ErrNotFound
	}
	return m.Blobs.Get(ctx, key)
}

// After MaxRedrives re-drives a generation that still has not moved ends
// rejected (diff_failed before it applies), counted by GenerationsFailed;
// why says the pipeline could not finish it (I10). (Until I10 it was left
// stuck for an operator; only an offboarding still is.) It never took
// over, so nothing is undone.
func TestSweepRejectsAfterMaxRedrives(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	lines := f.withMetrics()
	f.onboard("r1")
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, catalogCSV)
	for i := 1; i <= 3; i++ {
		require.Equal(t, ops.SweepResult{Redriven: 1}, f.sweepLater(), "re-drive %d", i)
		f.queue.Take(queues.DiffJobs) // lost again
	}
	require.Equal(t, ops.SweepResult{Rejected: 1}, f.sweepLater())
	require.Empty(t, f.queue.Messages(queues.DiffJobs), "nothing to undo: it never took over")
	require.Equal(t, 3.0, lines.Sum(metrics.GenerationsRedriven))
	require.Equal(t, 1.0, lines.Sum(metrics.GenerationsFailed, "Code=diff_failed"))
	last := lines.Lines()[len(lines.Lines())-1]
	require.Equal(t, 0.0, last[metrics.GenerationsStuck])
	w := f.why("r1", "")
	require.Equal(t, ops.VerdictRejected, w.Verdict)
	require.Contains(t, describe(w), "diff_failed: its diff made no progress")
	require.Contains(t, describe(w), "the pipeline could not finish it")
	require.Equal(t, ops.SweepResult{}, f.sweepLater(), "it is final")
}

// The scheduled task runs the sweep.
func TestSweepTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.ops = ops.New(ops.Config{Queues: queues, Now: func() time.Time { return time.Now().Add(time.Hour) }},
		f.store, f.blobs, f.queue, slog.New(slog.DiscardHandler))
	f.onboard("r1")
	gen := f.reserve("r1", time.Hour)
	f.arrive("r1", gen, catalogCSV)
	_, err := f.ops.Invoke(context.Background(), json.RawMessage(`{"ops_task":"sweep"}`))
	require.NoError(t, err)
	jobs := f.queue.Take(queues.DiffJobs)
	require.Len(t, jobs, 1)
	require.True(t, strings.Contains(jobs[0].Body, keys.Upload("r1", gen)))
}
