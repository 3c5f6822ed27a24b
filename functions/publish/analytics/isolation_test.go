package analytics_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// received sets how many times a message was received (its retry delay).
func received(m lambdaevents.SQSMessage, n string) lambdaevents.SQSMessage {
	m.Attributes = map[string]string{"ApproximateReceiveCount": n}
	return m
}

// withObject is m with its envelope naming another change object.
func (f *fixture) withObject(m lambdaevents.SQSMessage, key string) lambdaevents.SQSMessage {
	f.t.Helper()
	var env message.Envelope
	require.NoError(f.t, json.Unmarshal([]byte(m.Body), &env))
	env.Object = key
	b, err := json.Marshal(env)
	require.NoError(f.t, err)
	m.Body = string(b)
	return m
}

// Each event of a batch fails alone (I12): a change object gone, one that
// is not the object the event names, a message that is no change event,
// and an event whose changes the database cannot hold (a product id with
// a NUL byte) are each reported failed with the delay of their own
// receive count, while the other events of the batch, of the same
// retailer, are written and acknowledged.
func TestEachEventOfABatchFailsAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	good1 := f.event(1, 0, day, upsert("a", `{"v":"1"}`))
	gone := received(f.withObject(f.event(1, 1, day, upsert("b", `{"v":"1"}`)), "chunks/r1/1/gone"), "1")
	changed := received(f.event(1, 2, day, upsert("c", `{"v":"1"}`)), "2")
	require.NoError(t, f.blobs.Blobs.Put(ctx, keys.Chunk("r1", 1, 2), []byte("{}\n")))
	poison := lambdaevents.SQSMessage{MessageId: "poison", ReceiptHandle: "rh-poison", Body: `{"id": "r1:1:changes:9", "type":`,
		Attributes: map[string]string{"ApproximateReceiveCount": "3"}}
	unwritable := received(f.event(1, 3, day, upsert("bad\x00id", `{"v":"1"}`), upsert("d", `{"v":"1"}`)), "4")
	good2 := f.event(1, 4, day.Add(time.Hour), upsert("e", `{"v":"1"}`), del("f"))
	good3 := f.event(2, 0, day, upsert("a", `{"v":"2"}`))

	failed := f.handle(good1, gone, changed, poison, unwritable, good2, good3)
	require.ElementsMatch(t, []string{gone.MessageId, changed.MessageId, poison.MessageId, unwritable.MessageId}, failed,
		"the bad events fail, each alone")
	delays := f.vis.Delays()
	require.Equal(t, time.Second, delays[gone.ReceiptHandle])
	require.Equal(t, 2*time.Second, delays[changed.ReceiptHandle])
	require.Equal(t, 4*time.Second, delays[poison.ReceiptHandle])
	require.Equal(t, 8*time.Second, delays[unwritable.ReceiptHandle], "each on its own retry schedule")
	for _, ok := range []lambdaevents.SQSMessage{good1, good2, good3} {
		_, delayed := delays[ok.ReceiptHandle]
		require.False(t, delayed, "%s is not delayed", ok.MessageId)
	}
	require.Equal(t, map[string]string{"a": `{"v":"2"}`, "e": `{"v":"1"}`}, f.latest(), "the good events are written")

	// The same batch again: the good events are recorded and write nothing
	// more; the bad ones fail again, alone.
	files := len(f.files())
	require.ElementsMatch(t, failed, f.handle(good1, gone, changed, poison, unwritable, good2, good3))
	require.Len(t, f.files(), files)
}

// A change object that does not come (S3 hanging on that one key) fails
// its event alone once the batch's read budget is spent (at most half the
// invocation's remaining time), and the others are written within the
// invocation: it does not take them down with a timeout of the whole
// batch.
func TestSlowChangeObjectFailsAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	slowKey := keys.Chunk("r1", 1, 1)
	blobs := &hookedBlobs{failingBlobs: f.blobs, beforeGet: func(ctx context.Context, key string) error {
		if key != slowKey {
			return nil
		}
		<-ctx.Done()
		return ctx.Err()
	}}
	h := f.handler(f.store, blobs)
	good := f.event(1, 0, day, upsert("a", `{"v":"1"}`))
	slow := f.event(1, 1, day, upsert("b", `{"v":"1"}`))
	other := f.event(1, 2, day, upsert("c", `{"v":"1"}`))
	// The invocation's deadline, as Lambda gives it.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	start := time.Now()
	require.Equal(t, []string{slow.MessageId}, handleWith(t, h, ctx, good, slow, other))
	require.Less(t, time.Since(start), 3*time.Second, "done before the invocation's deadline")
	require.Equal(t, map[string]string{"a": `{"v":"1"}`, "c": `{"v":"1"}`}, f.latest())
}
