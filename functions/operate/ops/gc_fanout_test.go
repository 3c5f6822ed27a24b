package ops_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// jobRunner consumes the reconcile-jobs queue as the event source does on
// AWS (a batch of one): each message delivered with its receive count, one
// whose handling failed delivered again (the next round, its visibility
// timeout past), one received maxReceives times moved to the dead-letter
// queue.
type jobRunner struct {
	t        *testing.T
	f        *fixture
	h        *ops.Handler
	pending  []*pendingJob
	receives map[string]int // receives by retailer id ("" for the others)
	dead     []string
}

type pendingJob struct {
	body     string
	receives int
}

const maxReceives = 5 // reconcile-jobs' redrive count (infra, the local stack)

func newJobRunner(t *testing.T, f *fixture, h *ops.Handler) *jobRunner {
	return &jobRunner{t: t, f: f, h: h, receives: map[string]int{}}
}

// round delivers every message waiting once and returns how many there were.
func (r *jobRunner) round() int {
	r.t.Helper()
	for _, m := range r.f.queue.Take(queues.Reconcile) {
		r.pending = append(r.pending, &pendingJob{body: m.Body})
	}
	n := len(r.pending)
	var left []*pendingJob
	for i, p := range r.pending {
		p.receives++
		var job struct {
			RetailerID string `json:"retailer_id"`
		}
		require.NoError(r.t, json.Unmarshal([]byte(p.body), &job))
		r.receives[job.RetailerID]++
		resp, err := r.h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{{
			MessageId: fmt.Sprint(i), Body: p.body, Attributes: map[string]string{"ApproximateReceiveCount": strconv.Itoa(p.receives)}}}})
		require.NoError(r.t, err)
		switch {
		case len(resp.BatchItemFailures) == 0:
		case p.receives >= maxReceives:
			r.dead = append(r.dead, p.body)
		default:
			left = append(left, p)
		}
	}
	r.pending = left
	return n
}

// drain delivers rounds until the queue is empty.
func (r *jobRunner) drain() {
	r.t.Helper()
	for i := 0; r.round() > 0; i++ {
		require.Less(r.t, i, 50, "the queue never empties")
	}
}

// flakyStore fails the collection of one retailer every time and counts
// the collections of the forwarding records.
type flakyStore struct {
	*pgstore.Stores
	fail        string
	mu          sync.Mutex
	moveRecords int
}

func (s *flakyStore) Collect(ctx context.Context, retailerID string, p catalog.CollectPolicy, progress func(catalog.Collected)) (catalog.Collected, error) {
	if retailerID == s.fail {
		return catalog.Collected{}, errors.New("shard unreachable")
	}
	return s.Stores.Collect(ctx, retailerID, p, progress)
}

func (s *flakyStore) CollectMoveRecords(ctx context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	s.moveRecords++
	s.mu.Unlock()
	return s.Stores.CollectMoveRecords(ctx, before)
}

// logLines parses JSON log lines.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m), l)
		out = append(out, m)
	}
	return out
}

// The scheduled collection (the "gc" task) only queues its first listing
// message; the reconcile-jobs queue does the rest: a listing message per
// page of retailers (here pages of 2), one message per retailer, and after
// the last page one that collects the old shards' forwarding records,
// once. A retailer whose collection keeps failing is given up on its third
// delivery with an ERROR naming it, without holding up the others; one
// switching shards is delivered again and collected then; nothing reaches
// the dead-letter queue.
func TestScheduledCollectionFansOutOverTheQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	ids := []string{"r1", "r2", "r3", "r4", "r5"}
	for _, id := range ids {
		f.onboard(id)
		f.upload(id, catalogCSV)
		f.upload(id, "product_id,price\na,1\n") // b and c deleted
	}
	// r4 is switching shards when the run first reaches it.
	_, r4shard, err := f.store.ForRetailer(ctx, "r4")
	require.NoError(t, err)
	_, err = r4shard.Pool().Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('r4', 'mv_r4', 'source', 'frozen', 1)`)
	require.NoError(t, err)
	// A forwarding record of a retailer that moved out of shard 0.
	_, err = f.store.Shards[0].Pool().Exec(ctx, `INSERT INTO shard_moves (retailer_id, move_id, role, state, other_shard) VALUES ('gone', 'mv_gone', 'source', 'moved', 1)`)
	require.NoError(t, err)
	f.now = f.now.Add(20 * 24 * time.Hour)

	var logs bytes.Buffer
	store := &flakyStore{Stores: f.store, fail: "r3"}
	h := ops.New(ops.Config{AdminToken: adminToken, Queues: queues, ListPage: 2, Now: func() time.Time { return f.now }},
		store, f.blobs, f.queue, slog.New(slog.NewJSONHandler(&logs, nil)))
	require.NoError(t, h.RunTask(ctx, ops.TaskGC))
	msgs := f.queue.Messages(queues.Reconcile)
	require.Len(t, msgs, 1, "the task queues the first listing message only")
	for _, id := range ids {
		_, err := f.store.CatalogRow(ctx, id, "b")
		require.NoError(t, err, "nothing collected by the task itself")
	}

	r := newJobRunner(t, f, h)
	released := false
	for i := 0; r.round() > 0; i++ {
		require.Less(t, i, 50, "the queue never empties")
		if !released && r.receives["r4"] > 0 {
			// The move's switch ends before the next delivery.
			_, err = r4shard.Pool().Exec(ctx, `DELETE FROM shard_moves WHERE retailer_id = 'r4'`)
			require.NoError(t, err)
			released = true
		}
	}
	require.Empty(t, r.dead, "nothing reaches the dead-letter queue")
	require.Equal(t, 3, r.receives["r3"], "the failing retailer is given up on its third delivery")
	require.Equal(t, 2, r.receives["r4"], "the moving retailer is delivered again")
	for _, id := range []string{"r1", "r2", "r5"} {
		require.Equal(t, 1, r.receives[id], id)
	}
	require.Equal(t, 4, r.receives[""], "three listing pages (2, 2, 1) and the forwarding records")

	for _, id := range ids {
		for _, p := range []string{"b", "c"} {
			_, err := f.store.CatalogRow(ctx, id, p)
			if id == "r3" {
				require.NoError(t, err, "r3's tombstone of %s is left to the next run", p)
			} else {
				require.Error(t, err, "%s's tombstone of %s is collected", id, p)
			}
		}
		require.Equal(t, map[string]string{"a": `{"price":"1"}`}, f.catalogOf(id))
	}
	require.Equal(t, 1, store.moveRecords, "the forwarding records are collected once a run")
	var left int
	require.NoError(t, f.store.Shards[0].Pool().QueryRow(ctx, `SELECT count(*) FROM shard_moves WHERE retailer_id = 'gone'`).Scan(&left))
	require.Zero(t, left)

	var collected []string
	var tombstones float64
	var gaveUp, summary, retried []map[string]any
	for _, l := range logLines(t, &logs) {
		switch l["msg"] {
		case "collected":
			collected = append(collected, l["retailer_id"].(string))
			tombstones += l["tombstones"].(float64)
			require.NotEmpty(t, l["run_id"])
		case "collection gave up on a retailer; the next run collects it":
			gaveUp = append(gaveUp, l)
		case "collection queued every retailer":
			summary = append(summary, l)
		case "job left for a later delivery":
			retried = append(retried, l)
		}
	}
	require.ElementsMatch(t, []string{"r1", "r2", "r4", "r5"}, collected)
	require.EqualValues(t, 8, tombstones)
	require.Len(t, gaveUp, 1)
	require.Equal(t, "ERROR", gaveUp[0]["level"])
	require.Equal(t, "r3", gaveUp[0]["retailer_id"])
	require.Contains(t, gaveUp[0]["err"], "shard unreachable")
	require.Len(t, retried, 1)
	require.Equal(t, "WARN", retried[0]["level"])
	require.Equal(t, "r4", retried[0]["retailer_id"])
	require.Contains(t, retried[0]["err"], "being moved to another shard")
	require.Len(t, summary, 1)
	require.EqualValues(t, 5, summary[0]["retailers"])
	require.EqualValues(t, 1, summary[0]["move_records"])
	require.Equal(t, gaveUp[0]["run_id"], summary[0]["run_id"])
}

// A reconcile-jobs message of a kind no consumer knows is dropped with an
// ERROR (no retry loop). (One with no kind is reconciliation's, as every
// message was before collection took the queue too: reconciliation still
// sends them so, and the reconcile tests consume them.)
func TestReconcileJobsKinds(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)
	var logs bytes.Buffer
	h := ops.New(ops.Config{AdminToken: adminToken, Queues: queues, Now: func() time.Time { return f.now }},
		f.store, f.blobs, f.queue, slog.New(slog.NewJSONHandler(&logs, nil)))
	resp, err := h.HandleSQS(context.Background(), lambdaevents.SQSEvent{Records: []lambdaevents.SQSMessage{
		{MessageId: "1", Body: `{"kind":"vacuum","run_id":"gc-0000000000000000"}`},
	}})
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.Contains(t, logs.String(), `unknown kind \"vacuum\"`)
	require.Empty(t, f.queue.Messages(queues.Reconcile))
}
