package ops_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

func event(t *testing.T, name string) json.RawMessage {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	require.NoError(t, err)
	return b
}

// One Lambda takes the three kinds of event it is sent (saved examples in
// testdata): a schedule's task, reconcile-jobs messages, an admin route.
func TestInvokeRoutesEachKindOfEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.onboard("r1")
	f.upload("r1", catalogCSV)

	_, err := f.ops.Invoke(ctx, event(t, "scheduled_reconcile.json"))
	require.NoError(t, err)
	require.Len(t, f.queue.Messages(queues.Reconcile), 1, "the scheduled run queued its listing")

	require.NoError(t, f.store.CreateReconcileRun(ctx, catalog.ReconcileRun{ID: "rc-00000000000000aa", RetailerID: "r1", Total: 1}))
	out, err := f.ops.Invoke(ctx, event(t, "sqs_reconcile_job.json"))
	require.NoError(t, err)
	require.Empty(t, out.(lambdaevents.SQSEventResponse).BatchItemFailures)
	rep, err := f.store.ReconcileReport(ctx, "rc-00000000000000aa", 10)
	require.NoError(t, err)
	require.NotNil(t, rep.Run.FinishedAt)
	require.Equal(t, 1, rep.Checked)

	out, err = f.ops.Invoke(ctx, event(t, "apigw_why.json"))
	require.NoError(t, err)
	resp := out.(lambdaevents.APIGatewayV2HTTPResponse)
	require.Equal(t, 200, resp.StatusCode, resp.Body)
	require.Contains(t, resp.Body, `"verdict":"current"`)

	_, err = f.ops.Invoke(ctx, json.RawMessage(`{"ops_task":"dance"}`))
	require.ErrorContains(t, err, `unknown task "dance"`)
	_, err = f.ops.Invoke(ctx, json.RawMessage(`{"detail-type":"something else"}`))
	require.Error(t, err)
}
