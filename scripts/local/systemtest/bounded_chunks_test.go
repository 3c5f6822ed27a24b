package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// requireNoDeadLetters checks that no message of the stack ended in a DLQ.
func (e *env) requireNoDeadLetters() {
	e.T.Helper()
	for _, q := range []stack.Queue{e.Stack.DiffQueue, e.Stack.SmallQueue, e.Stack.LargeQueue} {
		out, err := e.Stack.SQS.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &q.DLQURL,
			AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
				types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		require.NoError(e.T, err)
		for name, v := range out.Attributes {
			require.Equal(e.T, "0", v, "%s of the DLQ of %s", name, q.Name)
		}
	}
}

// requireChunksWithin checks that every chunk object of a generation holds
// at most budget bytes, and returns how many there are.
func (e *env) requireChunksWithin(retailer string, gen int64, budget int) int {
	e.T.Helper()
	ctx := context.Background()
	keys, err := e.Stack.Blobs.List(ctx, fmt.Sprintf("chunks/%s/%d/", retailer, gen))
	require.NoError(e.T, err)
	for _, key := range keys {
		size, err := e.Stack.Blobs.Size(ctx, key)
		require.NoError(e.T, err)
		require.LessOrEqual(e.T, size, int64(budget), "chunk object %s", key)
	}
	return len(keys)
}

// Issue 9, defect 2: CSV attributes repeat the header's names in every
// row, so a ~1 MB file whose header has a 1,000,000-character column and
// 6,000 short rows made ~1 GB chunks (6 GB in all); apply ran out of
// memory and the chunk went to the DLQ. A column name is now at most
// 1,024 bytes (that file is rejected invalid_attribute_name on line 1), so
// the same ~1 MB header is 1,000 names of 1,000 bytes, and ~1 MB of rows
// is 60 rows. Every product's canonical attributes are over
// attributes_too_large's 256 KiB: the snapshot ends rejected with that
// reason and its first lines, nothing in a DLQ, the catalog kept. (Chunks
// that could still be large are bounded in bytes:
// TestAttributeBombDoesNotStopOthers.)
func TestLongHeaderRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("wide")
	before := fixtures.Generate("w", 10)
	require.Equal(t, "applied", e.Upload("wide", before.CSV(nil)).State)

	var b strings.Builder
	b.WriteString("product_id")
	for i := range 1000 {
		fmt.Fprintf(&b, ",%04d%s", i, strings.Repeat("h", 996))
	}
	b.WriteString("\n")
	for i := range 60 {
		fmt.Fprintf(&b, "p%04d%s\n", i, strings.Repeat(",", 1000))
	}
	require.Less(t, b.Len(), 1_100_000, "a ~1 MB file")
	s := e.Upload("wide", []byte(b.String()))
	require.Equal(t, "rejected", s.State, "%+v", s)
	require.NotNil(t, s.Error)
	require.Equal(t, "attributes_too_large", s.Error.Code, s.Error.Message)
	require.NotNil(t, s.Error.Line)
	require.Equal(t, 2, *s.Error.Line)
	e.RequireCatalog("wide", before)

	// The header of one 1,000,000-character name.
	b.Reset()
	b.WriteString("product_id," + strings.Repeat("h", 1_000_000) + "\n")
	for i := range 6000 {
		fmt.Fprintf(&b, "p%04d,v\n", i)
	}
	s = e.Upload("wide", []byte(b.String()))
	require.Equal(t, "rejected", s.State, "%+v", s)
	require.Equal(t, "invalid_attribute_name", s.Error.Code, s.Error.Message)
	require.Equal(t, 1, *s.Error.Line)
	require.LessOrEqual(t, len(s.Error.Message), 512)
	e.RequireCatalog("wide", before)
	e.requireNoDeadLetters()
}

// Issue 9: one retailer uploads an attribute bomb (rows whose attributes
// grow 6x when escaped, just under 256 KiB each) while another uploads an
// ordinary snapshot. The bomb's chunks stay within the byte budget, and
// the other retailer's upload applies as usual, its catalog exact.
func TestAttributeBombDoesNotStopOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("bomb")
	e.Onboard("calm")

	// 40,000 control characters: 240,000 bytes of "\u0001" in canonical JSON.
	bomb := fixtures.Catalog{}
	for i := range 90 {
		bomb[fmt.Sprintf("b%03d", i)] = map[string]string{"title": fmt.Sprintf("%d", i),
			"blob": strings.Repeat("\x01", 40_000)}
	}
	calm := fixtures.Generate("c", 2000)

	ctx := systemtest.Context(t, 3*time.Minute)
	var wg sync.WaitGroup
	var bombStatus apiclient.Status
	wg.Add(1)
	go func() {
		defer wg.Done()
		gen, err := e.API.Upload(ctx, e.Token("bomb"), "bomb", "", bomb.CSV([]string{"title", "blob"}))
		if err == nil {
			bombStatus, err = e.API.WaitSettled(ctx, e.Token("bomb"), "bomb", gen, nil)
		}
		if err != nil {
			t.Errorf("bomb upload: %v", err)
		}
	}()
	s := e.Upload("calm", calm.CSV(nil))
	require.Equal(t, "applied", s.State)
	e.RequireCatalog("calm", calm)
	wg.Wait()

	require.Equal(t, "applied", bombStatus.State, "%+v", bombStatus)
	chunks := e.requireChunksWithin("bomb", bombStatus.Generation, catalog.DefaultChunkBytes)
	require.Equal(t, bombStatus.Chunks.Total, chunks)
	require.Greater(t, chunks, 1, "90 products of 240 KB: more than one chunk of 8 MiB")
	e.RequireCatalog("bomb", bomb)
	e.requireNoDeadLetters()
}

// Issue 9, defect 2: a failing message failed every later message of its
// batch, other retailers' groups included, which then waited for the
// visibility timeout. Now it fails only the later messages of its own
// FIFO group: in one batch holding retailer a's chunks (the first of which
// fails) and retailer b's, b's are applied by that same invocation.
func TestFailingMessageFailsOnlyItsGroup(t *testing.T) {
	t.Parallel()
	gate := &systemtest.HeldQueue{Hold: func(message.ChunkMessage) bool { return true }}
	var mu sync.Mutex
	type invocation struct {
		ids    []string // message ids of the batch, in order
		bodies map[string]message.ChunkMessage
		failed map[string]bool
	}
	var invocations []invocation
	entered, blocker := make(chan struct{}), make(chan struct{})
	e := newEnv(t, stack.Options{
		ChunkRows: 10, InflightCap: 1, ApplyConcurrency: 1, LargeThreshold: 1 << 30,
		WrapDiffQueue: gate.Wrap,
		WrapApply: func(next eventsource.Handler) eventsource.Handler {
			return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
				inv := invocation{bodies: map[string]message.ChunkMessage{}, failed: map[string]bool{}}
				blocked := false
				for _, r := range ev.Records {
					var m message.ChunkMessage
					require.NoError(t, jsonParse(r.Body, &m))
					inv.ids = append(inv.ids, r.MessageId)
					inv.bodies[r.MessageId] = m
					blocked = blocked || m.RetailerID == "c"
				}
				if blocked {
					close(entered)
					<-blocker // holds the only apply slot while the batch under test is queued
				}
				resp, err := next(ctx, ev)
				for _, f := range resp.BatchItemFailures {
					inv.failed[f.ItemIdentifier] = true
				}
				mu.Lock()
				invocations = append(invocations, inv)
				mu.Unlock()
				return resp, err
			}
		},
	})
	ctx := systemtest.Context(t, 2*time.Minute)
	for _, id := range []string{"a", "b", "c"} {
		e.Onboard(id)
	}
	gens := map[string]int64{}
	for _, id := range []string{"a", "b", "c"} {
		rows := 20
		if id == "c" {
			rows = 1
		}
		gen, err := e.API.Upload(ctx, e.Token(id), id, "", fixtures.Generate(id, rows).CSV(nil))
		require.NoError(t, err)
		gens[id] = gen
	}
	require.Eventually(t, func() bool { return gate.Len() == 5 }, time.Minute, 20*time.Millisecond, "the diffs' chunks")
	held := gate.Take()
	gate.Hold = nil
	byRetailer := map[string][]systemtest.HeldMessage{}
	for _, m := range held {
		byRetailer[m.Chunk.RetailerID] = append(byRetailer[m.Chunk.RetailerID], m)
	}
	send := func(m systemtest.HeldMessage) {
		require.NoError(t, gate.Next.Send(ctx, m.QueueURL, m.Body, m.GroupID, m.DedupID))
	}
	// c's chunk takes the only apply slot and holds it.
	send(byRetailer["c"][0])
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("c's chunk never reached the apply handler")
	}
	// a's first chunk points at an object with another checksum: it fails.
	bad := byRetailer["a"][0]
	bad.Chunk.SHA256 = strings.Repeat("0", 64)
	body, err := json.Marshal(bad.Chunk)
	require.NoError(t, err)
	bad.Body = string(body)
	send(bad)
	send(byRetailer["b"][0])
	send(byRetailer["a"][1])
	send(byRetailer["b"][1])
	close(blocker)

	sb := e.Wait("b", gens["b"])
	require.Equal(t, "applied", sb.State)
	mu.Lock()
	defer mu.Unlock()
	var mixed *invocation
	for i, inv := range invocations {
		for _, id := range inv.ids {
			if inv.bodies[id].RetailerID == "a" && inv.bodies[id].Seq == 0 {
				mixed = &invocations[i]
			}
		}
	}
	require.NotNil(t, mixed, "a's failing chunk was handled")
	sawB := false
	for _, id := range mixed.ids {
		m := mixed.bodies[id]
		switch {
		case m.RetailerID == "a":
			require.True(t, mixed.failed[id], "a's chunk %d: the failed one and the later one of its group", m.Seq)
		case m.RetailerID == "b":
			sawB = true
			require.False(t, mixed.failed[id], "b's chunk %d shares the batch, not the group", m.Seq)
		}
	}
	require.True(t, sawB, "the batch held b's chunks too: %v", mixed.ids)
	require.NotEqual(t, "applied", e.Status("a", gens["a"]).State)
}
