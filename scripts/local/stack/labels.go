package stack

import (
	"context"
	"net/http"
	"runtime/pprof"

	"github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/functions/publish/relay"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
)

// ProfileLabel is the runtime/pprof label naming which part of the stack a
// goroutine runs: each function's invocations (arrival, diff, apply,
// relay, analytics, webhooks, ops, upload, read), the meters, and the
// stand-ins (LabelS3, LabelPollers, LabelAPIServer). Goroutines inherit
// their creator's labels, so what an invocation starts counts as its
// function's. A CPU profile of the stack's process is split by it
// (`scripts/bench e2e`).
const ProfileLabel = "function"

// The stand-ins' label values: the S3 stand-in's server (and the bucket
// notifications it sends), the event-source pollers (receiving and
// deleting messages, as Lambda's event-source mappings do), and the API's
// HTTP server before a request reaches its route (API Gateway's part).
const (
	LabelS3        = "s3 stand-in"
	LabelPollers   = "event-source pollers"
	LabelAPIServer = "api server"
)

// labelled runs each invocation of h under ProfileLabel=function.
func labelled(function string, h eventsource.Handler) eventsource.Handler {
	return func(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
		pprof.Do(ctx, pprof.Labels(ProfileLabel, function), func(ctx context.Context) {
			resp, err = h(ctx, ev)
		})
		return resp, err
	}
}

// labelledHTTP serves each request of h under ProfileLabel=function.
func labelledHTTP(function string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pprof.Do(r.Context(), pprof.Labels(ProfileLabel, function), func(ctx context.Context) {
			h.ServeHTTP(w, r.WithContext(ctx))
		})
	})
}

// relayFastPath is the relay as the diff's and the apply's Flusher: its
// publishing right after their commits runs under ProfileLabel=relay,
// inside their invocations (on AWS it is their Lambdas' CPU).
type relayFastPath struct{ r *relay.Relay }

// Flush publishes retailerID's pending events.
func (f relayFastPath) Flush(ctx context.Context, retailerID string) {
	pprof.Do(ctx, pprof.Labels(ProfileLabel, "relay"), func(ctx context.Context) { f.r.Flush(ctx, retailerID) })
}
