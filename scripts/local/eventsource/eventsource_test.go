package eventsource_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
)

// One fauxqs for the whole package; every test uses queues of its own.
var client *sqs.Client

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a first install may be slow
	e, err := sqsemulator.Start(ctx, sqsemulator.Options{Progress: os.Stderr})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start fauxqs:", err)
		os.Exit(1)
	}
	client, err = sqsemulator.NewSQSClient(context.Background(), e.Endpoint())
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	_ = e.Stop()
	os.Exit(code)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func queue(t *testing.T, name string, maxReceives int) string {
	t.Helper()
	q, _, err := sqsemulator.EnsureQueue(context.Background(), client, name, 30*time.Second, maxReceives)
	require.NoError(t, err)
	return q
}

func sendN(t *testing.T, q string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String(b),
			MessageAttributes: map[string]types.MessageAttributeValue{
				"retailer": {DataType: aws.String("String"), StringValue: aws.String("r1")},
				"blob":     {DataType: aws.String("Binary"), BinaryValue: []byte{1, 2, 3}},
			}}
		if strings.HasSuffix(q, ".fifo") {
			in.MessageGroupId = aws.String("g1")
			in.MessageDeduplicationId = aws.String(b)
		}
		_, err := client.SendMessage(context.Background(), in)
		require.NoError(t, err)
	}
}

// sendNumbered sends n messages, prefix0 to prefix(n-1).
func sendNumbered(t *testing.T, q, prefix string, n int) {
	t.Helper()
	bodies := make([]string, n)
	for i := range bodies {
		bodies[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	sendN(t, q, bodies...)
}

// run starts Run in the background; the returned stop cancels it and
// returns how long Run took to return.
func run(t *testing.T, opts eventsource.Options, h eventsource.Handler) (stop func() time.Duration) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = logger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eventsource.Run(ctx, client, opts, h) }()
	var once sync.Once
	var took time.Duration
	stop = func() time.Duration {
		once.Do(func() {
			start := time.Now()
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(15 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			took = time.Since(start)
		})
		return took
	}
	t.Cleanup(func() { stop() })
	return stop
}

// queueEmpty reports whether the queue holds no message, visible or not.
func queueEmpty(t *testing.T, q string) bool {
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	require.NoError(t, err)
	return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
}

// recorder is a handler that remembers every record it saw.
type recorder struct {
	mu      sync.Mutex
	seen    []events.SQSMessage
	batches [][]string
}

func (r *recorder) add(ev events.SQSEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var bodies []string
	for _, m := range ev.Records {
		r.seen = append(r.seen, m)
		bodies = append(bodies, m.Body)
	}
	r.batches = append(r.batches, bodies)
}

func (r *recorder) count(body string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.seen {
		if m.Body == body {
			n++
		}
	}
	return n
}

func TestPartialBatchFailure(t *testing.T) {
	t.Parallel()
	q := queue(t, "partial", 10)
	sendN(t, q, "m1", "m2", "m3")

	var rec recorder
	stop := run(t, eventsource.Options{QueueURL: q, BatchSize: 10, Concurrency: 1,
		VisibilityTimeout: time.Second, HandlerTimeout: time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			_, hasDeadline := ctx.Deadline()
			require.True(t, hasDeadline)
			lc, ok := lambdacontext.FromContext(ctx)
			require.True(t, ok, "each invocation has a Lambda context")
			require.Len(t, lc.AwsRequestID, 36, "with a request id like Lambda's")
			rec.add(ev)
			var resp events.SQSEventResponse
			for _, m := range ev.Records {
				if m.Body == "m2" && m.Attributes["ApproximateReceiveCount"] == "1" {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
			}
			return resp, nil
		})
	require.Eventually(t, func() bool { return rec.count("m2") == 2 && queueEmpty(t, q) }, 10*time.Second, 20*time.Millisecond)
	stop()
	require.Equal(t, 1, rec.count("m1"))
	require.Equal(t, 1, rec.count("m3"))
	require.Equal(t, 2, rec.count("m2"))
	t.Logf("batches: %v", rec.batches)

	// The record looks like what Lambda delivers.
	m := rec.seen[0]
	require.Equal(t, "aws:sqs", m.EventSource)
	require.Equal(t, "arn:aws:sqs:us-east-1:000000000000:partial", m.EventSourceARN)
	require.Equal(t, "us-east-1", m.AWSRegion)
	require.NotEmpty(t, m.MessageId)
	require.NotEmpty(t, m.ReceiptHandle)
	sum := md5.Sum([]byte(m.Body))
	require.Equal(t, hex.EncodeToString(sum[:]), m.Md5OfBody)
	require.NotEmpty(t, m.Md5OfMessageAttributes)
	for _, a := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
		require.NotEmpty(t, m.Attributes[a], a)
	}
	require.Equal(t, "r1", aws.ToString(m.MessageAttributes["retailer"].StringValue))
	require.Equal(t, "String", m.MessageAttributes["retailer"].DataType)
	require.Equal(t, []byte{1, 2, 3}, m.MessageAttributes["blob"].BinaryValue)
}

func TestFIFOAttributesAndOrder(t *testing.T) {
	t.Parallel()
	q := queue(t, "ordered.fifo", 10)
	sendN(t, q, "f1", "f2", "f3")
	var rec recorder
	run(t, eventsource.Options{QueueURL: q, QueueARN: "arn:aws:sqs:eu-west-1:123456789012:apply-small.fifo",
		BatchSize: 10, Concurrency: 4, HandlerTimeout: time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			rec.add(ev)
			return events.SQSEventResponse{}, nil
		})
	require.Eventually(t, func() bool { return rec.count("f3") == 1 && queueEmpty(t, q) }, 10*time.Second, 20*time.Millisecond)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var order []string
	for _, m := range rec.seen {
		order = append(order, m.Body)
		require.Equal(t, "g1", m.Attributes["MessageGroupId"])
		require.Equal(t, m.Body, m.Attributes["MessageDeduplicationId"])
		require.NotEmpty(t, m.Attributes["SequenceNumber"])
		require.Equal(t, "arn:aws:sqs:eu-west-1:123456789012:apply-small.fifo", m.EventSourceARN)
		require.Equal(t, "eu-west-1", m.AWSRegion)
	}
	require.Equal(t, []string{"f1", "f2", "f3"}, order)
	t.Logf("FIFO batches with 4 pollers: %v", rec.batches)
}

func TestErrorOrPanicRedeliversWholeBatch(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"error", "panic", "timeout", "unknown-item"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			q := queue(t, "fail-"+mode, 10)
			sendN(t, q, "a", "b")
			var rec recorder
			var calls atomic.Int32
			run(t, eventsource.Options{QueueURL: q, BatchSize: 10, VisibilityTimeout: time.Second, HandlerTimeout: 300 * time.Millisecond},
				func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
					rec.add(ev)
					first := false
					for _, m := range ev.Records {
						first = first || m.Attributes["ApproximateReceiveCount"] == "1"
					}
					calls.Add(1)
					if !first {
						return events.SQSEventResponse{}, nil
					}
					switch mode {
					case "error":
						return events.SQSEventResponse{}, errors.New("boom")
					case "panic":
						panic("boom")
					case "timeout":
						<-ctx.Done()
						time.Sleep(50 * time.Millisecond) // returns "success" too late
						return events.SQSEventResponse{}, nil
					default:
						return events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{{ItemIdentifier: "no-such-id"}}}, nil
					}
				})
			require.Eventually(t, func() bool { return rec.count("a") == 2 && rec.count("b") == 2 && queueEmpty(t, q) },
				10*time.Second, 20*time.Millisecond, "batches: %v", rec.batches)
		})
	}
}

func TestConcurrencyCap(t *testing.T) {
	t.Parallel()
	q := queue(t, "capped", 10)
	sendNumbered(t, q, "c", 12)

	var cur, peak, handled atomic.Int32
	run(t, eventsource.Options{QueueURL: q, BatchSize: 1, Concurrency: 3, HandlerTimeout: 2 * time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			n := cur.Add(1)
			defer cur.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			require.Len(t, ev.Records, 1)
			time.Sleep(150 * time.Millisecond)
			handled.Add(1)
			return events.SQSEventResponse{}, nil
		})
	require.Eventually(t, func() bool { return handled.Load() == 12 && queueEmpty(t, q) }, 15*time.Second, 20*time.Millisecond)
	require.Equal(t, int32(3), peak.Load(), "peak concurrency")
}

func TestRunReturnsPromptlyOnCancel(t *testing.T) {
	t.Parallel()
	q := queue(t, "idle", 10)
	stop := run(t, eventsource.Options{QueueURL: q, Concurrency: 4, HandlerTimeout: time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			return events.SQSEventResponse{}, nil
		})
	time.Sleep(300 * time.Millisecond) // let the pollers block in a long poll
	took := stop()
	require.Less(t, took, 2*time.Second)
	t.Logf("Run returned %s after cancel", took)
}

// Cancel waits for the invocation in flight, which completes and is deleted.
func TestCancelWaitsForInFlight(t *testing.T) {
	t.Parallel()
	q := queue(t, "inflight", 10)
	sendN(t, q, "slow")
	started := make(chan struct{})
	var finished atomic.Bool
	stop := run(t, eventsource.Options{QueueURL: q, HandlerTimeout: 5 * time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			close(started)
			time.Sleep(500 * time.Millisecond)
			require.NoError(t, ctx.Err(), "Run's cancel must not cancel a running invocation")
			finished.Store(true)
			return events.SQSEventResponse{}, nil
		})
	<-started
	stop()
	require.True(t, finished.Load())
	require.True(t, queueEmpty(t, q))
}

func TestInvalidOptions(t *testing.T) {
	t.Parallel()
	h := func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		return events.SQSEventResponse{}, nil
	}
	for name, o := range map[string]eventsource.Options{
		"no queue":          {HandlerTimeout: time.Second},
		"batch 11":          {QueueURL: "q", BatchSize: 11, HandlerTimeout: time.Second},
		"batch 10001":       {QueueURL: "q", BatchSize: 10001, BatchWindow: time.Second, HandlerTimeout: time.Second},
		"window 301s":       {QueueURL: "q", BatchSize: 100, BatchWindow: 301 * time.Second, HandlerTimeout: time.Second},
		"no timeout":        {QueueURL: "q"},
		"visibility < time": {QueueURL: "q", HandlerTimeout: 2 * time.Second, VisibilityTimeout: time.Second},
		"wait 21s":          {QueueURL: "q", HandlerTimeout: time.Second, WaitTime: 21 * time.Second},
	} {
		require.Error(t, eventsource.Run(context.Background(), client, o, h), name)
	}
}

// With a batching window, messages that arrive within it go to one
// invocation, more than ten of them (the analytics consumer's batches).
func TestBatchWindowGathers(t *testing.T) {
	t.Parallel()
	q := queue(t, "window", 10)
	sendNumbered(t, q, "w", 25)
	var rec recorder
	stop := run(t, eventsource.Options{QueueURL: q, BatchSize: 100, BatchWindow: 1500 * time.Millisecond, Concurrency: 1,
		HandlerTimeout: 5 * time.Second},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			rec.add(ev)
			return events.SQSEventResponse{}, nil
		})
	require.Eventually(t, func() bool { return queueEmpty(t, q) }, 15*time.Second, 20*time.Millisecond)
	stop()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Len(t, rec.seen, 25)
	require.Len(t, rec.batches, 1, "one invocation for the window: %v", rec.batches)
}

// A batch gathered over a window and cut short by a stop is released at
// once, all of it: more than the ten messages one SQS call takes.
func TestStopReleasesAGatheredBatch(t *testing.T) {
	t.Parallel()
	q := queue(t, "release", 10)
	sendNumbered(t, q, "r", 23)
	var invoked atomic.Bool
	stop := run(t, eventsource.Options{QueueURL: q, BatchSize: 100, BatchWindow: 3 * time.Second, Concurrency: 1,
		HandlerTimeout: 5 * time.Second, VisibilityTimeout: 5 * time.Minute},
		func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			invoked.Store(true)
			return events.SQSEventResponse{}, nil
		})
	count := func(attr types.QueueAttributeName) string {
		out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q),
			AttributeNames: []types.QueueAttributeName{attr}})
		require.NoError(t, err)
		return out.Attributes[string(attr)]
	}
	require.Eventually(t, func() bool { return count(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible) == "23" },
		5*time.Second, 20*time.Millisecond, "the poller gathers every message")
	stop()
	require.False(t, invoked.Load(), "stopped inside the window")
	require.Equal(t, "23", count(types.QueueAttributeNameApproximateNumberOfMessages), "released, not left for the 5-minute visibility timeout")
}
