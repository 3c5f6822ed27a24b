package systemtest_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// directory returns the retailers the product directory lists for a product id.
func (e *env) directory(productID string) []string {
	e.T.Helper()
	got, err := e.Stack.Stores.Control.DirectoryRetailers(context.Background(), productID, 100)
	require.NoError(e.T, err)
	return got
}

// waitDirectory waits until the directory lists want for a product: it
// follows each chunk just after the chunk's shard commit, so a generation
// can read applied a moment before its last chunk's entries are in.
func (e *env) waitDirectory(productID string, want []string) {
	e.T.Helper()
	require.Eventually(e.T, func() bool { return slices.Equal(e.directory(productID), want) },
		30*time.Second, 20*time.Millisecond, "directory entry of %s never became %v", productID, want)
}

// chunkOps reads the ops of a held chunk message.
func (e *env) chunkOps(msg lambdaevents.SQSMessage) (message.ChunkMessage, []message.ChunkOp) {
	e.T.Helper()
	var m message.ChunkMessage
	require.NoError(e.T, jsonParse(msg.Body, &m))
	body, err := e.Stack.Blobs.Get(context.Background(), m.Key)
	require.NoError(e.T, err)
	ops, err := message.ReadChunk(bytes.NewReader(body))
	require.NoError(e.T, err)
	return m, ops
}

// commitOnly writes a held chunk to its shard the way the apply function
// does, and stops there: a crash between the shard commit and the directory
// update.
func (e *env) commitOnly(msg lambdaevents.SQSMessage) catalog.ApplyResult {
	e.T.Helper()
	m, ops := e.chunkOps(msg)
	res, err := e.Stack.Stores.Shards[e.ShardOf(m.RetailerID)].ApplyChunk(context.Background(), m, ops)
	require.NoError(e.T, err)
	return res
}

// deliver hands a chunk message to the apply function, which must not fail it.
func (e *env) deliver(msg lambdaevents.SQSMessage) {
	e.T.Helper()
	resp, err := e.Stack.Apply.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{msg}})
	require.NoError(e.T, err)
	require.Empty(e.T, resp.BatchItemFailures)
}

// A failed directory update fails the message; its redelivery (a duplicate
// for the shard) completes the directory.
func TestDirectoryUpdateFailureRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ChunkRows: 10, HandlerTimeout: 2 * time.Second, VisibilityTimeout: 2 * time.Second})
	ctx := context.Background()
	_, err := e.Stack.Stores.Control.Pool().Exec(ctx, `
		CREATE SEQUENCE directory_failures;
		CREATE FUNCTION fail_directory() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('directory_failures') <= 2 THEN RAISE EXCEPTION 'injected directory failure'; END IF;
			RETURN NULL;
		END $$;
		CREATE TRIGGER fail_directory BEFORE INSERT ON product_directory
			FOR EACH STATEMENT EXECUTE FUNCTION fail_directory();`)
	require.NoError(t, err)
	e.Onboard("r1")
	want := fixtures.Generate("p", 35)
	s := e.Upload("r1", want.CSV(nil))
	require.Equal(t, "applied", s.State)
	require.Equal(t, 4, s.Chunks.Applied)
	// The chunks are counted on the shard; the two failed messages come back
	// after their visibility timeout and complete the directory.
	require.Eventually(t, func() bool {
		for id := range want {
			if len(e.directory(id)) != 1 {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "every product reached the directory")
	var calls int64
	require.NoError(t, e.Stack.Stores.Control.Pool().QueryRow(ctx, `SELECT last_value FROM directory_failures`).Scan(&calls))
	require.GreaterOrEqual(t, calls, int64(6), "4 chunks, 2 injected failures, and their retries")
	require.Equal(t, 200, e.get("/v1/products/p-00034").status)
}

// A crash between the shard commit and the directory update: the
// redelivered chunk is a duplicate for the shard and still updates the
// directory, even when a newer generation has taken over meanwhile.
func TestDirectoryAfterCrashBeforeUpdate(t *testing.T) {
	t.Parallel()
	q := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: q.Wrap})
	e.Onboard("r1")
	q.Hold = func(m message.ChunkMessage) bool { return m.Generation == 1 }
	c1 := fixtures.Generate("p", 25)
	gen1, err := e.API.Upload(context.Background(), e.Token("r1"), "r1", "", c1.CSV(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return q.Len() == 3 }, 30*time.Second, 20*time.Millisecond)
	msgs := asSQS(q.Take())
	for _, m := range msgs {
		require.Equal(t, catalog.ChunkApplied, e.commitOnly(m).Outcome)
	}
	require.Equal(t, "applied", e.Status("r1", gen1).State)
	require.Empty(t, e.directory("p-00001"), "the crash left the directory behind the shard")
	requireError(t, e.get("/v1/products/p-00001"), 404, "product_not_found")

	// The first chunk comes back: a duplicate for the shard, an update for the directory.
	e.deliver(msgs[0])
	first, _ := e.chunkOps(msgs[0])
	_, ops := e.chunkOps(msgs[0])
	require.Equal(t, int64(1), first.Generation)
	for _, op := range ops {
		require.Equal(t, []string{"r1"}, e.directory(op.ProductID))
	}

	// Generation 2 takes over before the other two come back; it changes
	// one product only, so its own chunk does not mention the others.
	q.Hold = nil
	c2 := c1.Clone()
	c2["p-00024"] = fixtures.Row("changed by generation 2")
	s := e.Upload("r1", c2.CSV(nil))
	require.Equal(t, "applied", s.State)
	require.Equal(t, int64(1), s.Changes.Updated)
	require.Empty(t, e.directory("p-00012"))

	// Their generation is superseded, but they were committed: the late
	// redeliveries still bring the directory in line.
	e.deliver(msgs[1])
	e.deliver(msgs[2])
	for id := range c2 {
		require.Equal(t, []string{"r1"}, e.directory(id), id)
	}
	p := decode[struct {
		RetailerID string `json:"retailer_id"`
		Generation int64  `json:"generation"`
	}](t, e.get("/v1/products/p-00024"))
	require.Equal(t, "r1", p.RetailerID)
	require.Equal(t, int64(2), p.Generation)
	require.Equal(t, 200, e.get("/v1/products/p-00012").status)
}

// A zombie: generation 2's chunk is committed, then its worker stalls before
// the directory update; generation 3 deletes the product; the stalled
// update arrives last and must not bring the directory entry back (nor may a
// chunk of 2 that was never committed add anything).
func TestDirectoryZombieAfterDelete(t *testing.T) {
	t.Parallel()
	q := &systemtest.HeldQueue{}
	e := newEnv(t, stack.Options{ChunkRows: 10, WrapDiffQueue: q.Wrap})
	e.Onboard("r1")
	c1 := fixtures.Generate("p", 15)
	require.Equal(t, "applied", e.Upload("r1", c1.CSV(nil)).State)
	e.waitDirectory("p-00003", []string{"r1"})

	// Generation 2: changes p-00003 and inserts 15 products: two chunks, held.
	q.Hold = func(m message.ChunkMessage) bool { return m.Generation == 2 }
	c2 := c1.Clone()
	c2["p-00003"] = fixtures.Row("changed by generation 2")
	for i := range 15 {
		c2[fmt.Sprintf("q-%02d", i)] = fixtures.Row("new in generation 2")
	}
	gen2, err := e.API.Upload(context.Background(), e.Token("r1"), "r1", "", c2.CSV(nil))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return q.Len() == 2 }, 30*time.Second, 20*time.Millisecond)
	held := asSQS(q.Take())
	var zombie, never lambdaevents.SQSMessage
	for _, m := range held {
		_, ops := e.chunkOps(m)
		hasTarget := false
		for _, op := range ops {
			hasTarget = hasTarget || op.ProductID == "p-00003"
		}
		if hasTarget {
			zombie = m
		} else {
			never = m
		}
	}
	require.NotEmpty(t, zombie.Body)
	require.NotEmpty(t, never.Body)
	require.Equal(t, catalog.ChunkApplied, e.commitOnly(zombie).Outcome)
	require.Equal(t, "applying", e.Status("r1", gen2).State)

	// Generation 3 deletes p-00003 and repairs what 2 wrote.
	q.Hold = nil
	c3 := c1.Clone()
	delete(c3, "p-00003")
	require.Equal(t, "applied", e.Upload("r1", c3.CSV(nil)).State)
	e.waitDirectory("p-00003", []string{})

	// The zombie's directory update arrives after the delete: fenced.
	e.deliver(zombie)
	e.deliver(never)
	require.Empty(t, e.directory("p-00003"), "a late older write revived a deleted directory entry")
	for i := range 15 {
		require.Empty(t, e.directory(fmt.Sprintf("q-%02d", i)))
	}
	var gen int64
	var deleted bool
	require.NoError(t, e.Stack.Stores.Control.Pool().QueryRow(context.Background(),
		`SELECT generation, deleted FROM product_directory WHERE product_id = 'p-00003' AND retailer_id = 'r1'`).Scan(&gen, &deleted))
	require.Equal(t, int64(3), gen)
	require.True(t, deleted)
	requireError(t, e.get("/v1/products/p-00003"), 404, "product_not_found")
	requireError(t, e.get("/v1/retailers/r1/products/p-00003"), 404, "product_not_found")
	require.Equal(t, 200, e.get("/v1/products/p-00004").status)
}
