package diff_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/blob"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/diff"
)

// replacingBlobs replaces the upload with other bytes right after the
// diff's first open of it (between pass 1 and pass 2).
type replacingBlobs struct {
	*fixture
	key   string
	with  []byte
	opens int
}

func (b *replacingBlobs) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	obj, err := b.blobs.Open(ctx, key, ifMatch)
	if key == b.key {
		if b.opens++; b.opens == 1 {
			require.NoError(b.t, b.blobs.Put(ctx, key, b.with))
		}
	}
	return obj, err
}

func (b *replacingBlobs) Put(ctx context.Context, key string, body []byte) error {
	return b.blobs.Put(ctx, key, body)
}

func (b *replacingBlobs) Create(ctx context.Context, key string) (blob.Writer, error) {
	return b.blobs.Create(ctx, key)
}

// The diff pins the version it first reads: an upload replaced between its
// two passes ends the generation rejected (upload_changed), with nothing
// sent, instead of a retry that can never succeed; a re-run, reading the
// pinned version only, rejects it too.
func TestUploadReplacedBetweenPasses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g := f.upload(csvOf(12, "1"))
	key := events.UploadKey("r1", g)
	f.h = diff.New(diff.Config{ChunkRows: 5, InflightCap: 20, LargeThreshold: 1000, SmallQueueURL: "small", LargeQueueURL: "large"},
		f.store, &replacingBlobs{fixture: f, key: key, with: csvOf(12, "2")}, f.queue, slog.New(slog.DiscardHandler))
	f.diff(g)
	st := f.status(g)
	require.Equal(t, catalog.StateRejected, st.State)
	require.Equal(t, catalog.CodeUploadChanged, st.ErrorCode)
	require.Empty(t, f.take())
}

// An event announcing another version of an upload being applied is
// refused: nothing is read or sent again.
func TestEventOfAnotherVersionRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 1000)
	g := f.upload(csvOf(12, "1"))
	obj, err := f.blobs.Open(context.Background(), events.UploadKey("r1", g), "")
	require.NoError(t, err)
	obj.Body.Close()
	job := events.DiffJob{RetailerID: "r1", Generation: g, Key: events.UploadKey("r1", g), ETag: obj.ETag}
	require.NoError(t, f.h.Diff(context.Background(), job))
	require.Len(t, f.take(), 3)
	require.Equal(t, catalog.StateApplying, f.status(g).State)

	job.ETag = `"another"`
	require.NoError(t, f.h.Diff(context.Background(), job))
	require.Empty(t, f.take())
	require.Equal(t, catalog.StateApplying, f.status(g).State)
}
