package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

func changesOf(st apiclient.Status) int64 {
	return st.Changes.Inserted + st.Changes.Updated + st.Changes.Deleted
}

// recordingQueue passes every message on and keeps the chunk messages it
// sent, with their queue and group, so that a test can deliver one again.
type recordingQueue struct {
	next queue.Sender
	mu   sync.Mutex
	sent []sentChunk
}

type sentChunk struct {
	queueURL, body, group string
	msg                   message.ChunkMessage
}

func (q *recordingQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	var m message.ChunkMessage
	if err := jsonParse(body, &m); err == nil && m.Key != "" {
		q.mu.Lock()
		q.sent = append(q.sent, sentChunk{queueURL, body, groupID, m})
		q.mu.Unlock()
	}
	return q.next.Send(ctx, queueURL, body, groupID, dedupID)
}

// TestMeteredCountersEqualWhatHappened runs a scripted day on the local
// stack (three retailers: first loads, changes, a rejected file, storefront
// reads, a chunk delivered twice) and checks the cost report's counters
// against what the test did and what the status API says: uploads and
// reads equal what the test did (reads exactly, once the meters have
// written: the bound the report states is what a stopped Lambda environment
// may lose), rows changed per retailer equal the sum of its uploads'
// changes, rows received and chunks those of the uploads the diff read, and
// the duplicate delivery of a chunk counts nothing twice.
func TestMeteredCountersEqualWhatHappened(t *testing.T) {
	t.Parallel()
	rec := &recordingQueue{}
	var applies sync.Map // "retailer/gen/seq" -> times applied (ended)
	e := newEnv(t, stack.Options{
		ChunkRows:     40,
		WrapDiffQueue: func(next queue.Sender) queue.Sender { rec.next = next; return rec },
		ApplyObserve: func(m message.ChunkMessage, start bool) {
			if !start {
				k := fmt.Sprintf("%s/%d/%d", m.RetailerID, m.Generation, m.Seq)
				n, _ := applies.LoadOrStore(k, new(int))
				*n.(*int)++ // one poller goroutine per chunk at a time (FIFO group)
			}
		},
	})
	ctx := systemtest.Context(t, 3*time.Minute)

	type want struct {
		uploads, bytes, received, changed, chunks, reads int64
	}
	wants := map[string]*want{}
	var statuses []apiclient.Status
	upload := func(r string, data []byte, readWhole bool) apiclient.Status {
		t.Helper()
		st := e.Upload(r, data)
		w := wants[r]
		w.uploads++
		if readWhole {
			w.bytes += int64(len(data))
		}
		statuses = append(statuses, st)
		return st
	}

	small, big, mixed := "m-small", "m-big", "m-mixed"
	for _, r := range []string{small, big, mixed} {
		e.Onboard(r)
		wants[r] = &want{}
	}

	// small: 30 products, then 3 changed, 2 gone, 4 new.
	s1 := fixtures.Generate("s", 30)
	require.Equal(t, "applied", upload(small, s1.CSV(nil), true).State)
	s2 := s1.Clone()
	for _, id := range s1.IDs()[:3] {
		s2[id]["price"] = "0.99"
	}
	for _, id := range s1.IDs()[3:5] {
		delete(s2, id)
	}
	for i := range 4 {
		s2[fmt.Sprintf("s-new-%d", i)] = fixtures.Row("new")
	}
	require.Equal(t, "applied", upload(small, s2.JSONL(), true).State)

	// big: 200 products in 5 chunks, then 10% changed.
	b1 := fixtures.Generate("b", 200)
	require.Equal(t, "applied", upload(big, b1.CSV(nil), true).State)
	b2 := b1.Clone()
	for _, id := range b1.IDs()[:20] {
		b2[id]["availability"] = "discontinued"
	}
	require.Equal(t, "applied", upload(big, b2.CSV(nil), true).State)

	// mixed: 50 products, then a malformed file (rejected: read in part).
	m1 := fixtures.Generate("x", 50)
	require.Equal(t, "applied", upload(mixed, m1.CSV(nil), true).State)
	require.Equal(t, "rejected", upload(mixed, []byte("title,price\nno id column,1\n"), false).State)

	// The status API's changes, rows and chunks for each retailer.
	for _, st := range statuses {
		w := wants[st.RetailerID]
		w.changed += st.Changes.Inserted + st.Changes.Updated + st.Changes.Deleted
		if st.State == "applied" {
			w.received += st.Changes.Inserted + st.Changes.Updated + st.Changes.Unchanged
			w.chunks += int64(st.Chunks.Total)
		}
	}
	require.Equal(t, changesOf(statuses[1]), int64(3+4+2), "the scripted changes of small's second upload")

	// A chunk of big's second upload delivered again (as SQS may, after a
	// visibility timeout): applied once, acknowledged twice.
	var dup sentChunk
	rec.mu.Lock()
	for _, s := range rec.sent {
		if s.msg.RetailerID == big && s.msg.Generation == 2 {
			dup = s
		}
	}
	rec.mu.Unlock()
	require.NotEmpty(t, dup.body, "no chunk message of big's second upload was recorded")
	require.NoError(t, rec.next.Send(ctx, dup.queueURL, dup.body, dup.group, "redelivery-"+dup.msg.Key))
	dupKey := fmt.Sprintf("%s/%d/%d", big, dup.msg.Generation, dup.msg.Seq)
	require.Eventually(t, func() bool {
		n, ok := applies.Load(dupKey)
		return ok && *n.(*int) >= 2
	}, time.Minute, 20*time.Millisecond, "the redelivered chunk was not handled")

	// Storefront reads: products and pages that answer; misses are not a
	// retailer's reads.
	e.syncReplicas()
	read := func(r, path string, n int) {
		for range n {
			a := e.get(path)
			require.Equal(t, http.StatusOK, a.status, path)
		}
		wants[r].reads += int64(n)
	}
	read(small, "/v1/retailers/m-small/products/s-00010", 7)
	read(small, "/v1/retailers/m-small/products?limit=5", 3)
	read(big, "/v1/retailers/m-big/products/b-00100", 25)
	read(big, "/v1/products/b-00101", 2)
	read(mixed, "/v1/retailers/m-mixed/products?limit=50", 1)
	require.Equal(t, http.StatusNotFound, e.get("/v1/retailers/m-small/products/nope").status)

	// Reads wait in memory for at most metering.StorefrontFlushEvery; the
	// stack writes them on its own, the test does not wait for that.
	require.NoError(t, e.Stack.FlushUsage(ctx))
	today := time.Now().UTC()
	body, err := e.API.Costs(ctx, e.Stack.AdminToken, today.AddDate(0, 0, -1).Format(usage.DateLayout), today.AddDate(0, 0, 1).Format(usage.DateLayout), "json")
	require.NoError(t, err)
	var rep costs.Report
	require.NoError(t, json.Unmarshal(body, &rep))
	require.Contains(t, fmt.Sprint(rep.Notes), "Storefront reads are counted in memory", "the report states how exact reads are")

	got := map[string]costs.RetailerTotal{}
	for _, rt := range rep.Retailers {
		got[rt.RetailerID] = rt
	}
	for r, w := range wants {
		u := got[r].Usage
		require.Equal(t, w.uploads, u.Uploads, "%s: uploads", r)
		require.Equal(t, w.bytes, u.BytesUploaded, "%s: bytes of the files read whole", r)
		require.Equal(t, w.received, u.RowsReceived, "%s: rows received", r)
		require.Equal(t, w.changed, u.RowsChanged(), "%s: rows changed = the status API's changes", r)
		require.Equal(t, w.chunks, u.Chunks, "%s: chunks, each once (big had one delivered twice)", r)
		require.Equal(t, w.reads, u.Reads, "%s: storefront reads", r)
		require.Equal(t, 2*w.changed, u.DBRowsWritten, "%s: product and outbox rows written", r)
		require.Equal(t, w.uploads, u.Functions["arrival"].Invocations, "%s: one arrival an upload", r)
		require.Equal(t, w.uploads, u.Functions["diff"].Invocations, "%s: one diff invocation an upload", r)
		require.Positive(t, u.Functions["apply"].MBms, "%s: apply time", r)
		require.Equal(t, w.reads, u.Functions["read"].Invocations, "%s: one read invocation a read", r)
		require.Positive(t, u.S3ClassA+u.S3ClassB, "%s: S3 requests", r)
		require.Positive(t, u.SQSFIFO, "%s: FIFO requests", r)
		require.Positive(t, u.SNSPublishes, "%s: change events published", r)
		require.Positive(t, got[r].TotalUSD, "%s: priced", r)
	}
	// The duplicate's Lambda time and FIFO requests are real usage; its
	// rows and chunk are not counted again (checked above).
	require.Greater(t, got[big].Usage.Functions["apply"].Invocations, wants[big].chunks-1)
}
