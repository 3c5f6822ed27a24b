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
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// Collection on the whole stack (DESIGN 14), with a tombstone retention of
// a nanosecond: an upload deletes ten products, POST /v1/admin/gc removes
// their tombstones and directory entries; then a zombie generation older
// than the delete, whose chunks (updates of those ten products) were held
// back, wakes up and is refused by the retailer-level fence, so nothing
// comes back (I3 after collection). The storefront serves exactly the
// newest snapshot, the directory forgets the deleted ids, reconciliation
// is clean, and the next upload brings a collected product back.
func TestCollectionAfterDeletesKeepsTheCatalogExact(t *testing.T) {
	t.Parallel()
	q := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: q.Wrap, TombstoneAfter: time.Nanosecond})
	ctx := context.Background()
	e.Onboard("gc1")
	base := fixtures.Generate("p", 40)
	require.Equal(t, "applied", e.Upload("gc1", base.CSV(nil)).State)

	// The zombie: its chunks update p-00000..09 and stall.
	zombie := base.Clone()
	for i := 0; i < 10; i++ {
		zombie[fmt.Sprintf("p-%05d", i)]["price"] = "zombie"
	}
	var zombieGen atomic.Int64
	q.Hold = func(m message.ChunkMessage) bool { return m.Generation == zombieGen.Load() }
	slot, err := e.API.Reserve(ctx, e.Token("gc1"), "gc1", "")
	require.NoError(t, err)
	zombieGen.Store(slot.Generation)
	require.NoError(t, e.API.Put(ctx, slot, zombie.CSV(nil)))
	require.Eventually(t, func() bool { return q.Len() == 1 }, 30*time.Second, 20*time.Millisecond)
	held := asSQS(q.Take())

	// The next upload deletes them.
	next := base.Clone()
	for i := 0; i < 10; i++ {
		delete(next, fmt.Sprintf("p-%05d", i))
	}
	require.Equal(t, "applied", e.Upload("gc1", next.CSV(nil)).State)
	e.waitDirectory("p-00003", nil)

	// Collection, until the ten tombstones and their entries are gone (the
	// directory follows each chunk just after its shard commit).
	var total ops.GCResult
	require.Eventually(t, func() bool {
		r, err := e.API.Collect(ctx, e.Stack.AdminToken, "gc1")
		require.NoError(t, err)
		total.Tombstones += r.Tombstones
		total.DirectoryEntries += r.DirectoryEntries
		total.ChunkRows += r.ChunkRows
		return total.Tombstones == 10 && total.DirectoryEntries == 10
	}, 30*time.Second, 100*time.Millisecond, "collected so far: %+v", &total)
	require.Positive(t, total.ChunkRows, "the finished generations' chunk progress")
	var rows int
	require.NoError(t, e.Shard("gc1").Pool().QueryRow(ctx,
		`SELECT count(*) FROM products WHERE retailer_id = 'gc1' AND product_id < 'p-00010'`).Scan(&rows))
	require.Zero(t, rows, "no tombstone left: the row fence has nothing to compare with")

	// The zombie wakes up: acknowledged, nothing written.
	resp, err := e.Stack.Apply.HandleSQS(ctx, lambdaevents.SQSEvent{Records: held})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.NoError(t, e.Shard("gc1").Pool().QueryRow(ctx,
		`SELECT count(*) FROM products WHERE retailer_id = 'gc1' AND product_id < 'p-00010'`).Scan(&rows))
	require.Zero(t, rows, "the zombie brought nothing back")
	e.RequireCatalog("gc1", next)
	require.Empty(t, e.directory("p-00003"))
	require.Equal(t, "superseded", e.Status("gc1", slot.Generation).State)
	e.requireNoDivergence("after collection")

	// A collected product comes back with the next upload, as any product.
	again := next.Clone()
	again["p-00003"] = fixtures.Row("back")
	require.Equal(t, "applied", e.Upload("gc1", again.CSV(nil)).State)
	e.RequireCatalog("gc1", again)
	e.waitDirectory("p-00003", []string{"gc1"})
	e.WaitOutboxEmpty(30 * time.Second)
	e.RequireAnalytics("gc1", again, time.Minute)
}

// The scheduled collection on the whole stack (`up --gc-every`, here every
// half second) goes through the reconcile-jobs queue as on AWS: the task
// queues a listing message, the ops poller collects each retailer from its
// own message; the deleted products' tombstones of every retailer go and
// the catalogs stay exact.
func TestScheduledCollectionRunsOverTheQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{GCEvery: 500 * time.Millisecond, TombstoneAfter: time.Nanosecond})
	ctx := context.Background()
	ids := []string{"sgc1", "sgc2", "sgc3"}
	base := fixtures.Generate("p", 20)
	next := base.Clone()
	for i := 0; i < 5; i++ {
		delete(next, fmt.Sprintf("p-%05d", i))
	}
	for _, id := range ids {
		e.Onboard(id)
		require.Equal(t, "applied", e.Upload(id, base.CSV(nil)).State)
		require.Equal(t, "applied", e.Upload(id, next.CSV(nil)).State)
	}
	for _, id := range ids {
		require.Eventually(t, func() bool {
			var rows int
			require.NoError(t, e.Shard(id).Pool().QueryRow(ctx,
				`SELECT count(*) FROM products WHERE retailer_id = $1 AND deleted`, id).Scan(&rows))
			return rows == 0
		}, time.Minute, 100*time.Millisecond, "%s's tombstones are collected", id)
		e.RequireCatalog(id, next)
	}
	e.requireNoDivergence("after the scheduled collections")
}
