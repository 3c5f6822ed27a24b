package systemtest_test

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// refuseTitle makes the retailer's shard refuse, for good, any product row
// whose title is title (a CHECK constraint added behind the pipeline's
// back), as it refuses a value it cannot hold.
func (e *env) refuseTitle(retailer, title string) {
	e.T.Helper()
	_, err := e.Shard(retailer).Pool().Exec(context.Background(), fmt.Sprintf(
		`ALTER TABLE products ADD CONSTRAINT refuse_%s CHECK (attributes->>'title' IS DISTINCT FROM '%s') NOT VALID`, title, title))
	require.NoError(e.T, err)
}

// undoOf finds the rollback the pipeline reserved to undo gen (I10) and
// waits until it has applied.
func (e *env) undoOf(retailer string, gen int64) apiclient.Status {
	e.T.Helper()
	var undo int64
	require.Eventually(e.T, func() bool {
		list, err := e.API.List(context.Background(), e.Token(retailer), retailer, 20)
		require.NoError(e.T, err)
		for _, s := range list {
			if s.Undoes != nil && *s.Undoes == gen {
				undo = s.Generation
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "no undo of generation %d", gen)
	return e.Wait(retailer, undo)
}

// I10: the shard refuses one chunk of a three-chunk update on every try.
// The generation ends rejected (apply_failed), and the two chunks it did
// write are undone: the catalog is the previous generation's again,
// exactly, through a rollback generation that went through the normal
// diff, chunks and fences, within 60 s of the rejection.
func TestI10RefusedChunkIsUndone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.Onboard("r1")
	g1 := fixtures.Generate("p", 30)
	s1 := e.Upload("r1", g1.CSV(nil))
	require.Equal(t, "applied", s1.State)
	e.refuseTitle("r1", "poison")

	g2 := g1.Clone()
	for id := range g2 {
		g2[id]["price"] = "2.00"
	}
	g2["p-00015"]["title"] = "poison" // in the second of three chunks
	s2 := e.Upload("r1", g2.CSV(nil))
	require.Equal(t, "rejected", s2.State)
	require.NotNil(t, s2.Error)
	require.Equal(t, catalog.CodeApplyFailed, s2.Error.Code)
	require.Contains(t, s2.Error.Message, "chunk 2 of 3 was refused by the database on each of 3 tries")
	require.Contains(t, s2.Error.Message, "refuse_poison")
	rejectedAt := time.Now()
	require.Equal(t, 2, s2.Chunks.Applied, "two of its chunks were written before it ended")

	undo := e.undoOf("r1", s2.Generation)
	require.Equal(t, "applied", undo.State)
	require.Equal(t, catalog.ModeRollback, undo.Mode)
	require.Equal(t, &s1.Generation, undo.SourceGeneration)
	require.Less(t, time.Since(rejectedAt), 60*time.Second, "the catalog returns within 60 s of the rejection")
	e.RequireCatalog("r1", g1)

	// The pipeline goes on: the next upload applies on top of the undo.
	g3 := g1.Clone()
	g3["p-00001"]["price"] = "3.00"
	require.Equal(t, "applied", e.Upload("r1", g3.CSV(nil)).State)
	e.RequireCatalog("r1", g3)
}

// I10: a first upload refused half way is undone to the empty catalog.
func TestI10RefusedFirstUploadIsUndoneToEmpty(t *testing.T) {
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
	require.Equal(t, int64(0), *undo.SourceGeneration, "back to no catalog at all")
	e.RequireCatalog("r1", nil)
}

// slowUploads is a diff.Blobs whose uploads trickle: every read of an
// upload (snapshots/) of the retailer waits, as a file too big for the
// diff's budget would.
type slowUploads struct {
	diff.Blobs
	retailer string
	opened   atomic.Int32
}

func (s *slowUploads) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	obj, err := s.Blobs.Open(ctx, key, ifMatch)
	if err != nil || !strings.HasPrefix(key, "snapshots/"+s.retailer+"/") {
		return obj, err
	}
	s.opened.Add(1)
	obj.Body = struct {
		io.Reader
		io.Closer
	}{&trickle{ctx: ctx, r: obj.Body}, obj.Body}
	return obj, nil
}

// trickle reads one byte at a time, 100 ms apart, until its context ends.
type trickle struct {
	ctx context.Context
	r   io.Reader
}

func (t *trickle) Read(p []byte) (int, error) {
	select {
	case <-t.ctx.Done():
		return 0, t.ctx.Err()
	case <-time.After(100 * time.Millisecond):
	}
	return t.r.Read(p[:min(len(p), 1)])
}

// I10: a diff that runs past its budget on every attempt ends the
// generation rejected (diff_failed) after its last attempt, rather than
// being retried for ever; it never took over, so the catalog keeps the
// previous generation and there is nothing to undo.
func TestI10DiffOverItsBudgetEnds(t *testing.T) {
	t.Parallel()
	slow := &slowUploads{retailer: "slow"}
	e := newEnv(t, stack.Options{HandlerTimeout: 2 * time.Second, VisibilityTimeout: 3 * time.Second, DiffAttempts: 3,
		WrapDiffBlobs: func(b diff.Blobs) diff.Blobs { slow.Blobs = b; return slow }})
	e.Onboard("slow")
	e.Onboard("fast")
	g1 := fixtures.Generate("p", 5)
	require.Equal(t, "applied", e.Upload("fast", g1.CSV(nil)).State, "another retailer is not held up")

	start := time.Now()
	s := e.Upload("slow", g1.CSV(nil))
	require.Equal(t, "rejected", s.State)
	require.Equal(t, catalog.CodeDiffFailed, s.Error.Code)
	require.Contains(t, s.Error.Message, "the diff failed on each of its 3 attempts")
	require.Contains(t, s.Error.Message, "did not finish within its time budget")
	require.EqualValues(t, 3, slow.opened.Load(), "three attempts read the upload")
	require.Less(t, time.Since(start), 2*time.Minute)
	e.RequireCatalog("slow", nil)
}
