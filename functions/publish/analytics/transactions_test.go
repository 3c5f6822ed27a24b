package analytics_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// hookedBlobs runs beforePut (when set) before each Put of a Parquet file
// and beforeGet before each Get; an error from either is the call's.
type hookedBlobs struct {
	*failingBlobs
	beforePut func(ctx context.Context, key string) error
	beforeGet func(ctx context.Context, key string) error
}

func (b *hookedBlobs) Put(ctx context.Context, key string, body []byte) error {
	if b.beforePut != nil && strings.HasPrefix(key, analytics.Prefix) {
		if err := b.beforePut(ctx, key); err != nil {
			return err
		}
	}
	return b.failingBlobs.Put(ctx, key, body)
}

func (b *hookedBlobs) Get(ctx context.Context, key string) ([]byte, error) {
	if b.beforeGet != nil {
		if err := b.beforeGet(ctx, key); err != nil {
			return nil, err
		}
	}
	return b.failingBlobs.Get(ctx, key)
}

// failingRecords fails RecordVersions while fail is set, as a crash between
// the file's PUT and the record would leave it.
type failingRecords struct {
	analytics.Versions
	fail atomic.Bool
}

func (v *failingRecords) RecordVersions(ctx context.Context, consumer, retailerID string, ids []string, gens []int64) error {
	if v.fail.Load() {
		return errors.New("crashed before the record")
	}
	return v.Versions.RecordVersions(ctx, consumer, retailerID, ids, gens)
}

// handler is a handler of the fixture's queue on other versions and blobs.
func (f *fixture) handler(versions analytics.Versions, blobs analytics.Blobs) *analytics.Handler {
	return analytics.New(analytics.Config{QueueURL: "analytics", Retry: retry.Schedule{Base: time.Second}}, versions, blobs, f.vis,
		slog.New(slog.DiscardHandler))
}

func handleWith(t *testing.T, h *analytics.Handler, ctx context.Context, msgs ...lambdaevents.SQSMessage) []string {
	t.Helper()
	resp, err := h.HandleSQS(ctx, lambdaevents.SQSEvent{Records: msgs})
	require.NoError(t, err)
	var failed []string
	for _, it := range resp.BatchItemFailures {
		failed = append(failed, it.ItemIdentifier)
	}
	return failed
}

// The Parquet PUT is made with no transaction open on the shard, and with
// no connection of the consumer's pool taken: while S3 is slow (here: a
// PUT that waits until the test releases it) the shard serves everyone
// else. Then a crash between the PUT and the record (the record failing)
// fails the batch; its retry, whole or split, writes the same rows again,
// and the latest row per product still equals the catalog.
func TestParquetWriteHoldsNoTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	entered, release := make(chan string, 10), make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce) // a failed test ends its batch before its databases are emptied
	blobs := &hookedBlobs{failingBlobs: f.blobs, beforePut: func(ctx context.Context, key string) error {
		entered <- key
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	h := f.handler(f.store, blobs)
	g1 := f.event(1, 0, day, upsert("a", `{"v":"1"}`), upsert("b", `{"v":"1"}`))
	done := make(chan []string, 1)
	go func() { done <- handleWith(t, h, context.Background(), g1) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the Parquet file was never written")
	}
	require.Empty(t, pgstoretest.OpenTransactions(t, f.store.Shards[0].Pool()), "no transaction open on the shard while the PUT waits")
	require.Zero(t, f.store.Shards[0].Pool().Stat().AcquiredConns(), "no connection of the shard's pool held while the PUT waits")
	releaseOnce()
	require.Empty(t, <-done)
	require.Equal(t, map[string]string{"a": `{"v":"1"}`, "b": `{"v":"1"}`}, f.latest())

	// The crash: the files are written, the record fails.
	crashing := &failingRecords{Versions: f.store}
	h = f.handler(crashing, f.blobs)
	g2a := f.event(2, 0, day, upsert("a", `{"v":"2"}`))
	g2b := f.event(2, 1, day.Add(time.Hour), del("b"), upsert("c", `{"v":"2"}`))
	crashing.fail.Store(true)
	require.ElementsMatch(t, []string{g2a.MessageId, g2b.MessageId}, handleWith(t, h, context.Background(), g2a, g2b),
		"not recorded: both retried")
	filesAfterCrash := len(f.files())
	require.Equal(t, 1+2+2, filesAfterCrash,
		"the written files stay, the crash came after them: the batch's two (two days), then each event's, written alone after it")
	crashing.fail.Store(false)
	// The retry, split (the queue rarely gives back the same batch): the
	// same rows again, taken once; here into the files each event wrote
	// alone, since each is the same event with the same rows.
	require.Empty(t, handleWith(t, h, context.Background(), g2b))
	require.Empty(t, handleWith(t, h, context.Background(), g2a))
	require.Equal(t, map[string]string{"a": `{"v":"2"}`, "c": `{"v":"2"}`}, f.latest())
	require.Equal(t, filesAfterCrash, len(f.files()))
	// Recorded now: a replay writes nothing.
	require.Empty(t, handleWith(t, h, context.Background(), g2a, g2b, g1))
	require.Equal(t, filesAfterCrash, len(f.files()))

	// The same batch back whole after a crash writes the same file again.
	g3 := f.event(3, 0, day, upsert("a", `{"v":"3"}`))
	crashing.fail.Store(true)
	require.Equal(t, []string{g3.MessageId}, handleWith(t, h, context.Background(), g3))
	crashing.fail.Store(false)
	require.Empty(t, handleWith(t, h, context.Background(), g3))
	require.Equal(t, filesAfterCrash+1, len(f.files()), "one file for g3, written twice")
	require.Equal(t, `{"v":"3"}`, f.latest()["a"])
}

// Two batches of one retailer at once, both past their version read
// before either records: of one generation they write identical rows, of
// two generations the higher wins by generation whatever the order of
// the files and of the records (a late record of the older one does not
// lower the version).
func TestConcurrentBatchesOfOneRetailer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// Each PUT waits until both batches have made theirs, then for its turn.
	var mu sync.Mutex
	arrived := map[string]chan struct{}{} // file key -> released
	both := make(chan struct{})
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // a failed test ends its batches before its databases are emptied
	blobs := &hookedBlobs{failingBlobs: f.blobs, beforePut: func(ctx context.Context, key string) error {
		mu.Lock()
		ch := make(chan struct{})
		arrived[key] = ch
		if len(arrived) == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-stop:
			return errors.New("test over")
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	h := f.handler(f.store, blobs)
	run := func(msgs ...lambdaevents.SQSMessage) chan []string {
		done := make(chan []string, 1)
		go func() { done <- handleWith(t, h, context.Background(), msgs...) }()
		return done
	}
	waitBoth := func() []string {
		t.Helper()
		mu.Lock()
		bothIn := both
		mu.Unlock()
		select {
		case <-bothIn:
		case <-time.After(10 * time.Second):
			t.Fatal("the two batches did not both reach their PUT")
		}
		mu.Lock()
		defer mu.Unlock()
		keys := make([]string, 0, len(arrived))
		for k := range arrived {
			keys = append(keys, k)
		}
		return keys
	}

	// One generation in both (the same events, delivered twice, in batches
	// of other compositions).
	e1 := f.event(1, 0, day, upsert("a", `{"v":"1"}`), del("b"))
	e2 := f.event(1, 1, day, upsert("c", `{"v":"1"}`))
	d1, d2 := run(e1), run(e1, e2)
	keys := waitBoth()
	require.Len(t, keys, 2, "two files, one per batch")
	for _, k := range keys {
		close(arrived[k])
	}
	require.Empty(t, <-d1)
	require.Empty(t, <-d2)
	require.Equal(t, map[string]string{"a": `{"v":"1"}`, "c": `{"v":"1"}`}, f.latest(), "the same rows twice, taken once")

	// Two generations: the newer batch's file and record go first, the
	// older's after it.
	mu.Lock()
	arrived, both = map[string]chan struct{}{}, make(chan struct{})
	mu.Unlock()
	older := f.event(2, 0, day, upsert("a", `{"v":"2"}`), upsert("b", `{"v":"2"}`))
	newer := f.event(3, 0, day, upsert("a", `{"v":"3"}`), del("b"))
	dOld := run(older)
	// The older batch reads its versions first.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(arrived) == 1 }, 10*time.Second, 5*time.Millisecond)
	mu.Lock()
	var oldKey string
	for k := range arrived {
		oldKey = k
	}
	mu.Unlock()
	dNew := run(newer)
	keys = waitBoth()
	for _, k := range keys {
		if k != oldKey {
			close(arrived[k])
		}
	}
	require.Empty(t, <-dNew)
	close(arrived[oldKey])
	require.Empty(t, <-dOld)
	require.Equal(t, map[string]string{"a": `{"v":"3"}`, "c": `{"v":"1"}`}, f.latest(), "generation 3 wins, though generation 2's file came last")
	newerAgain, err := f.store.NewerVersions(context.Background(), analytics.Consumer, "r1", []string{"a", "b"}, []int64{3, 3})
	require.NoError(t, err)
	require.Equal(t, []bool{false, false}, newerAgain, "generation 2's late record did not lower the version")
}
