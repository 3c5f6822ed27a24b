package ops

import (
	"context"
	"encoding/json"
	"fmt"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// Tasks the schedules start, named by the "ops_task" member of the
// scheduled event's input (infra sets it on each schedule).
const (
	TaskReconcile = "reconcile" // the daily reconciliation of every retailer
	TaskSweep     = "sweep"     // the stuck-generation sweeper
	TaskGC        = "gc"        // the daily collection of every retailer, over reconcile-jobs (DESIGN 14)
)

// TaskMoves (move.go) runs the moves of retailers between shards.

// ScheduledEvent is the input a schedule sends the ops function.
type ScheduledEvent struct {
	Task string `json:"ops_task"`
}

// Invoke is the Lambda entry: one function takes three kinds of event,
// told apart by their shape: a scheduled task ({"ops_task": ...}), a batch
// of reconcile-jobs messages (SQS records: reconciliation's and
// collection's), and an admin route (API
// Gateway's HTTP API, payload 2.0).
func (h *Handler) Invoke(ctx context.Context, event json.RawMessage) (any, error) {
	var probe struct {
		Task    string `json:"ops_task"`
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
		RequestContext json.RawMessage `json:"requestContext"`
	}
	if err := json.Unmarshal(event, &probe); err != nil {
		return nil, fmt.Errorf("ops: event is not a JSON object: %w", err)
	}
	switch {
	case probe.Task != "":
		return nil, h.RunTask(ctx, probe.Task)
	case len(probe.Records) > 0 && probe.Records[0].EventSource == "aws:sqs":
		var ev lambdaevents.SQSEvent
		if err := json.Unmarshal(event, &ev); err != nil {
			return nil, fmt.Errorf("ops: SQS event: %w", err)
		}
		return h.HandleSQS(ctx, ev)
	case probe.RequestContext != nil:
		var req lambdaevents.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(event, &req); err != nil {
			return nil, fmt.Errorf("ops: API Gateway request: %w", err)
		}
		return httpapi.LambdaHandler(h)(ctx, req)
	}
	return nil, fmt.Errorf("ops: an event it does not know: neither ops_task, SQS records nor an HTTP request")
}

// RunTask runs a scheduled task.
func (h *Handler) RunTask(ctx context.Context, task string) error {
	switch task {
	case TaskReconcile:
		return h.ScheduledReconcile(ctx)
	case TaskSweep:
		_, err := h.Sweep(ctx)
		return err
	case TaskGC:
		_, err := h.StartCollection(ctx)
		return err
	case TaskMoves:
		return h.RunMoves(ctx)
	}
	return fmt.Errorf("ops: unknown task %q", task)
}
