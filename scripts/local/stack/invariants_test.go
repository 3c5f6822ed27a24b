package stack_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/queue"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// I1: a sequence of generations with inserts, updates, deletes and a column
// reorder ends with the catalog equal to the newest snapshot; the reorder
// changes nothing.
func TestI1LatestWins(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 100})
	e.onboard("r1")
	g1 := fixtures.Generate("p", 500)
	s := e.upload("r1", g1.CSV(nil))
	require.Equal(t, "applied", s.State)
	require.EqualValues(t, 500, s.Changes.Inserted)
	require.Equal(t, 5, s.Chunks.Total)
	e.requireCatalog("r1", g1)

	g2 := g1.Clone()
	for i := 0; i < 30; i++ {
		g2[fmt.Sprintf("p-%05d", i)]["price"] = "1.00"
		delete(g2, fmt.Sprintf("p-%05d", 100+i))
		g2[fmt.Sprintf("q-%05d", i)] = map[string]string{"title": "new", "brand": "b", "price": "2", "availability": "x", "description": ""}
	}
	s = e.upload("r1", fixtures.Gzip(g2.JSONL()))
	require.Equal(t, "applied", s.State)
	require.EqualValues(t, 30, s.Changes.Inserted)
	require.EqualValues(t, 30, s.Changes.Updated)
	require.EqualValues(t, 30, s.Changes.Deleted)
	require.EqualValues(t, 440, s.Changes.Unchanged)
	e.requireCatalog("r1", g2)

	s = e.upload("r1", g2.CSV([]string{"price", "description", "availability", "title", "brand"}))
	require.Equal(t, "applied", s.State)
	require.Zero(t, s.Changes.Inserted+s.Changes.Updated+s.Changes.Deleted, "a column reorder changes nothing")
	require.Zero(t, s.Chunks.Total)
	e.requireCatalog("r1", g2)
}

// I1: the same S3 event delivered twice yields one generation's work.
func TestI1DuplicateS3Event(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 50})
	e.onboard("r1")
	g1 := fixtures.Generate("p", 200)
	s := e.upload("r1", g1.CSV(nil))
	require.Equal(t, "applied", s.State)
	e.sendS3Event("r1", s.Generation)
	e.sendS3Event("r1", s.Generation)
	time.Sleep(1500 * time.Millisecond)
	s2 := e.status("r1", s.Generation)
	require.Equal(t, s, s2, "status unchanged by duplicate events")
	var chunks int
	require.NoError(t, e.st.Stores.Shards[e.shardOf("r1")].Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM applied_chunks WHERE retailer_id = 'r1'`).Scan(&chunks))
	require.Equal(t, 4, chunks)
	e.requireCatalog("r1", g1)
}

// I2, I3, I4: a zombie apply of generation 7 after generation 8 is applied
// has its updates, inserts and deletes all refused.
func TestI2ZombieApplyRefused(t *testing.T) {
	t.Parallel()
	q := &capturedQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: func(next queue.Sender) queue.Sender { q.next = next; return q }})
	e.onboard("r1")
	base := fixtures.Generate("p", 30)
	s := e.upload("r1", base.CSV(nil))
	require.Equal(t, "applied", s.State)

	// Generation "7": updates p-00000..04, deletes p-00010..14, inserts z-*; its chunks stall.
	zombie := base.Clone()
	for i := 0; i < 5; i++ {
		zombie[fmt.Sprintf("p-%05d", i)]["price"] = "zombie"
		delete(zombie, fmt.Sprintf("p-%05d", 10+i))
		zombie[fmt.Sprintf("z-%d", i)] = fixtures.Row("zombie")
	}
	var zombieGen atomic.Int64
	q.hold = func(m events.ChunkMessage) bool { return m.Generation == zombieGen.Load() }
	slot, err := e.api.Reserve(context.Background(), e.token("r1"), "r1", "")
	require.NoError(t, err)
	zombieGen.Store(slot.Generation)
	require.NoError(t, e.api.Put(context.Background(), slot, zombie.CSV(nil)))
	require.Eventually(t, func() bool { return len(q.held) == 2 }, 30*time.Second, 20*time.Millisecond)
	held := q.take()

	// Generation "8" changes something else and is applied.
	next := base.Clone()
	next["p-00020"]["price"] = "eight"
	s8 := e.upload("r1", next.CSV(nil))
	require.Equal(t, "applied", s8.State)

	// The zombie wakes up: every chunk is acknowledged, nothing written.
	resp, err := e.st.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: held})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	e.requireCatalog("r1", next)
	s7 := e.status("r1", slot.Generation)
	require.Equal(t, "superseded", s7.State)
	require.Equal(t, s8.Generation, *s7.SupersededBy)
}

// I4, I5: generation 8 arrives while 7 is half applied, 8 is itself stopped
// half way, then 9 reverts every row to 6's values: the catalog equals 9.
func TestI5StoppedGenerationsRepaired(t *testing.T) {
	t.Parallel()
	q := &capturedQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: func(next queue.Sender) queue.Sender { q.next = next; return q }})
	e.onboard("r1")
	g6 := fixtures.Generate("p", 40)
	require.Equal(t, "applied", e.upload("r1", g6.CSV(nil)).State)

	var stalled atomic.Int64
	// Hold every chunk but the first of the stalled generation.
	q.hold = func(m events.ChunkMessage) bool { return m.Generation == stalled.Load() && m.Seq > 0 }
	halfApply := func(c fixtures.Catalog) int64 {
		slot, err := e.api.Reserve(context.Background(), e.token("r1"), "r1", "")
		require.NoError(t, err)
		stalled.Store(slot.Generation)
		require.NoError(t, e.api.Put(context.Background(), slot, c.CSV(nil)))
		require.Eventually(t, func() bool {
			s := e.status("r1", slot.Generation)
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
	require.Equal(t, "superseded", e.status("r1", gen7).State)
	require.NotEqual(t, g6, e.catalog("r1"), "the stopped generations did write")

	stalled.Store(0)
	s9 := e.upload("r1", g6.CSV(nil))
	require.Equal(t, "applied", s9.State)
	require.Zero(t, s9.Changes.Inserted+s9.Changes.Updated+s9.Changes.Deleted, "9 equals the baseline 6")
	e.requireCatalog("r1", g6)
	require.Equal(t, "superseded", e.status("r1", gen8).State)

	// The stalled chunks of 7 and 8 wake up late and write nothing.
	resp, err := e.st.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: q.take()})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	e.requireCatalog("r1", g6)
}

// I1: uploads finishing out of order: the older one ends superseded, even arriving last.
func TestI1OutOfOrderUploads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.onboard("r1")
	ctx := context.Background()
	older, err := e.api.Reserve(ctx, e.token("r1"), "r1", "")
	require.NoError(t, err)
	newer, err := e.api.Reserve(ctx, e.token("r1"), "r1", "")
	require.NoError(t, err)
	require.Greater(t, newer.Generation, older.Generation)
	want := fixtures.Generate("new", 20)
	require.NoError(t, e.api.Put(ctx, newer, want.CSV(nil)))
	require.Equal(t, "applied", e.wait("r1", newer.Generation).State)
	require.NoError(t, e.api.Put(ctx, older, fixtures.Generate("old", 20).CSV(nil)))
	s := e.wait("r1", older.Generation)
	require.Equal(t, "superseded", s.State)
	require.Equal(t, newer.Generation, *s.SupersededBy)
	e.requireCatalog("r1", want)
}

// flakyQueue fails the first send of chunk failSeq: a crash between writing
// the chunk object and sending its message.
type flakyQueue struct {
	next    queue.Sender
	failSeq int
	failed  atomic.Bool
}

func (q *flakyQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	var m events.ChunkMessage
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
	e.onboard("r1")
	want := fixtures.Generate("p", 55)
	s := e.upload("r1", want.CSV(nil))
	require.True(t, q.failed.Load())
	require.Equal(t, "applied", s.State)
	require.Equal(t, 6, s.Chunks.Total)
	require.Equal(t, 6, s.Chunks.Applied)
	e.requireCatalog("r1", want)
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
	e.onboard("r1")
	want := fixtures.Generate("p", 35)
	s := e.upload("r1", want.CSV(nil))
	require.Equal(t, "applied", s.State)
	require.Equal(t, 4, s.Chunks.Applied)
	e.requireCatalog("r1", want)
}

// I1 with the same chunk delivered twice in a row and twice at once.
func TestI1ChunkDeliveredTwice(t *testing.T) {
	t.Parallel()
	q := &capturedQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: func(next queue.Sender) queue.Sender { q.next = next; return q }})
	e.onboard("r1")
	q.hold = func(events.ChunkMessage) bool { return true }
	want := fixtures.Generate("p", 30)
	gen, err := e.api.Upload(context.Background(), e.token("r1"), "r1", "", want.CSV(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.status("r1", gen).State == "applying" && len(q.held) == 3 }, 30*time.Second, 20*time.Millisecond)
	msgs := q.take()
	apply := func(m lambdaevents.SQSMessage) {
		resp, err := e.st.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{m}})
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
	s := e.status("r1", gen)
	require.Equal(t, "applied", s.State)
	require.Equal(t, 3, s.Chunks.Applied)
	e.requireCatalog("r1", want)
}

// I6: an identical snapshot writes nothing: no chunk, no row version, no event.
func TestI6OnlyChangesWritten(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10})
	e.onboard("r1")
	c := fixtures.Generate("p", 50)
	require.Equal(t, "applied", e.upload("r1", c.CSV(nil)).State)
	shard := e.st.Stores.Shards[e.shardOf("r1")]
	ctx := context.Background()
	var before, eventsBefore int64
	require.NoError(t, shard.Pool().QueryRow(ctx, `SELECT sum(xmin::text::bigint), (SELECT count(*) FROM outbox) FROM products`).Scan(&before, &eventsBefore))

	c2 := c.Clone()
	c2["p-00003"]["price"] = "3.33"
	s2 := e.upload("r1", fixtures.Gzip(c2.JSONL()))
	require.EqualValues(t, 1, s2.Changes.Updated)
	require.EqualValues(t, 49, s2.Changes.Unchanged)
	require.Equal(t, 1, s2.Chunks.Total)
	var changedRows, eventsAfter int64
	require.NoError(t, shard.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE generation = $1), (SELECT count(*) FROM outbox) FROM products`, s2.Generation).Scan(&changedRows, &eventsAfter))
	require.EqualValues(t, 1, changedRows, "only the changed row carries the new generation")
	require.EqualValues(t, eventsBefore+1, eventsAfter, "one change event")
}

// I7: bad files are rejected whole with a reason and a line; the catalog keeps
// the previous generation.
func TestI7BadSnapshotsRejectedWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.onboard("r1")
	good := fixtures.Generate("p", 20)
	require.Equal(t, "applied", e.upload("r1", good.CSV(nil)).State)
	gz := fixtures.Gzip(good.CSV(nil))
	cases := []struct {
		name, code string
		data       []byte
		line       int
	}{
		{"malformed csv", "malformed_csv", []byte("product_id,title\na,1\nb,\"open\n"), 3},
		{"duplicate id", "duplicate_product_id", []byte("product_id,title\na,1\nb,2\na,3\n"), 4},
		{"missing column", "missing_product_id_column", []byte("sku,title\na,1\n"), 1},
		{"missing id", "missing_product_id", []byte("product_id,title\na,1\n,2\n"), 3},
		{"bad json", "malformed_json", []byte("{\"product_id\":\"a\"}\n{\"product_id\":\n"), 2},
		{"invalid utf8", "invalid_utf8", []byte("product_id,title\na,\xff\xfe\n"), 2},
		{"truncated gzip", "bad_gzip", gz[:len(gz)/2], 0},
	}
	for _, c := range cases {
		s := e.upload("r1", c.data)
		require.Equal(t, "rejected", s.State, c.name)
		require.NotNil(t, s.Error, c.name)
		require.Equal(t, c.code, s.Error.Code, c.name)
		require.NotEmpty(t, s.Error.Message, c.name)
		if c.line > 0 {
			require.NotNil(t, s.Error.Line, c.name)
			require.Equal(t, c.line, *s.Error.Line, c.name)
		}
	}
	e.requireCatalog("r1", good)
}

// I8: an empty file and a mass delete are held until confirmed.
func TestI8HeldUntilConfirmed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.onboard("r1")
	ctx := context.Background()
	full := fixtures.Generate("p", 200)
	require.Equal(t, "applied", e.upload("r1", full.CSV(nil)).State)

	empty := e.upload("r1", []byte{})
	require.Equal(t, "held", empty.State)
	require.Equal(t, "empty_snapshot", empty.Error.Code)
	e.requireCatalog("r1", full)

	few := fixtures.Catalog{}
	for _, id := range full.IDs()[:80] {
		few[id] = full[id]
	}
	held := e.upload("r1", few.CSV(nil))
	require.Equal(t, "held", held.State)
	require.Equal(t, "mass_delete", held.Error.Code)
	require.EqualValues(t, 120, held.Changes.Deleted)
	e.requireCatalog("r1", full)
	require.Equal(t, "held", e.status("r1", empty.Generation).State, "a held upload does not supersede another")

	_, err := e.api.Confirm(ctx, e.token("r1"), "r1", empty.Generation)
	requireStatus(t, err, 409)
	_, err = e.api.Confirm(ctx, e.token("r1"), "r1", held.Generation)
	require.NoError(t, err)
	s, err := e.api.WaitApplied(ctxFor(t, time.Minute), e.token("r1"), "r1", held.Generation, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State)
	e.requireCatalog("r1", few)
	require.Equal(t, "superseded", e.status("r1", empty.Generation).State, "the applied upload supersedes the older held one")
	_, err = e.api.Confirm(ctx, e.token("r1"), "r1", held.Generation)
	requireStatus(t, err, 409)
}

// I9: a 200,000-row retailer interleaved with many small ones: at most 20 of
// its chunks in flight at any time, and the small ones are not starved.
func TestI9Fairness(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	t.Parallel()
	var mu sync.Mutex
	inflight := map[string]int{}
	maxInflight := map[string]int{}
	e := newEnv(t, stack.Options{
		ApplyConcurrency: 32, LargeThreshold: 50000, HandlerTimeout: 60 * time.Second, VisibilityTimeout: 70 * time.Second,
		ApplyObserve: func(m events.ChunkMessage, start bool) {
			mu.Lock()
			defer mu.Unlock()
			if start {
				inflight[m.RetailerID]++
				maxInflight[m.RetailerID] = max(maxInflight[m.RetailerID], inflight[m.RetailerID])
			} else {
				inflight[m.RetailerID]--
			}
		},
	})
	e.onboard("big")
	big := fixtures.Generate("b", 200000)
	ctx := ctxFor(t, 5*time.Minute)
	bigGen, err := e.api.Upload(ctx, e.token("big"), "big", "csv", big.CSV(nil))
	require.NoError(t, err)

	small := map[string]fixtures.Catalog{}
	var smallGens sync.Map
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("small%d", i)
		e.onboard(id)
		small[id] = fixtures.Generate(id, 100)
		wg.Add(1)
		go func() {
			defer wg.Done()
			gen, err := e.api.Upload(ctx, e.token(id), id, "", small[id].CSV(nil))
			require.NoError(t, err)
			smallGens.Store(id, gen)
		}()
	}
	wg.Wait()
	for id := range small {
		gen, _ := smallGens.Load(id)
		require.Equal(t, "applied", e.wait(id, gen.(int64)).State)
	}
	s := e.wait("big", bigGen)
	require.Equal(t, "applied", s.State)
	require.Equal(t, 40, s.Chunks.Total)
	mu.Lock()
	t.Logf("max chunks in flight for the big retailer: %d", maxInflight["big"])
	require.LessOrEqual(t, maxInflight["big"], 20)
	require.Greater(t, maxInflight["big"], 1, "a big retailer is applied in parallel")
	mu.Unlock()
	require.Len(t, e.catalog("big"), 200000)
	for id, c := range small {
		e.requireCatalog(id, c)
	}
}
