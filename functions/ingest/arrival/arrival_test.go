package arrival_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/arrival"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const diffJobs = "https://sqs.example/diff-jobs.fifo"

func sqsEvent(t *testing.T, evs ...lambdaevents.S3Event) lambdaevents.SQSEvent {
	var out lambdaevents.SQSEvent
	for i, ev := range evs {
		body, err := json.Marshal(ev)
		require.NoError(t, err)
		out.Records = append(out.Records, lambdaevents.SQSMessage{MessageId: string(rune('a' + i)), Body: string(body)})
	}
	return out
}

// An upload's event marks its generation received and queues its diff job
// in the retailer's FIFO group (a duplicate event is the same job); an
// upload too late after its slot's expiry ends expired and is not diffed;
// events of unknown retailers, generations and other keys are dropped.
func TestArrival(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store, q := pgstoretest.New(t), inmem.NewQueue()
	for _, id := range []string{"r1", "r2"} {
		require.NoError(t, store.CreateRetailer(ctx, catalog.Retailer{ID: id, TokenHash: []byte(id)}))
	}
	h := arrival.New(arrival.Config{DiffQueueURL: diffJobs, Grace: time.Minute}, store, q, slog.New(slog.DiscardHandler))
	var lines metricstest.Capture
	h.Metrics = metrics.New(&lines, metrics.Options{Function: "arrival"})
	g1, err := store.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
	require.NoError(t, err)
	late, err := store.ReserveGeneration(ctx, "r2", "csv", time.Now().Add(-time.Hour), 0)
	require.NoError(t, err)

	ev := message.NewObjectCreatedEvent("us-east-1", "b", keys.Upload("r1", g1), 10, time.Now())
	ev.Records[0].S3.Object.ETag = "abc"
	resp, err := h.HandleSQS(ctx, sqsEvent(t, ev, ev,
		message.NewObjectCreatedEvent("us-east-1", "b", keys.Upload("r2", late), 10, time.Now()),
		message.NewObjectCreatedEvent("us-east-1", "b", keys.Upload("nobody", 1), 10, time.Now()),
		message.NewObjectCreatedEvent("us-east-1", "b", keys.Upload("r1", 42), 10, time.Now()),
		message.NewObjectCreatedEvent("us-east-1", "b", "snapshots/readme.txt", 10, time.Now()),
		message.NewObjectCreatedEvent("us-east-1", "b", keys.Index("r1", 1), 10, time.Now()),
	))
	require.NoError(t, err)
	require.Empty(t, resp.BatchItemFailures)
	require.NoError(t, lines.Validate())
	require.Equal(t, 2.0, lines.Sum(metrics.UploadsReceived, "retailer_id=r1"), "counted at least once: the duplicate event too")
	require.Equal(t, 1.0, lines.Sum(metrics.Uploads, "State=expired", "retailer_id=r2"))

	st, err := store.Generation(ctx, "r1", g1)
	require.NoError(t, err)
	require.Equal(t, catalog.StateReceived, st.State)
	jobs := q.Take(diffJobs)
	require.Len(t, jobs, 1, "the duplicate event is the same job")
	require.Equal(t, "r1", jobs[0].GroupID)
	var forwarded lambdaevents.S3Event
	require.NoError(t, json.Unmarshal([]byte(jobs[0].Body), &forwarded))
	dj, err := message.DiffJobsFromS3Event(forwarded)
	require.NoError(t, err)
	require.Equal(t, []message.DiffJob{{Bucket: "b", Key: keys.Upload("r1", g1), RetailerID: "r1", Generation: g1,
		Size: 10, ETag: `"abc"`, EventTime: ev.Records[0].EventTime.UTC()}}, dj)

	st, err = store.Generation(ctx, "r2", late)
	require.NoError(t, err)
	require.Equal(t, catalog.StateExpired, st.State)
	require.Equal(t, catalog.CodeUploadExpired, st.ErrorCode)
}
