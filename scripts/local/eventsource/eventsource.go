// Package eventsource is the local face of the Lambda SQS event source
// mapping: it polls an SQS queue and invokes a Lambda SQS handler with
// events.SQSEvent batches, with the semantics of an event source mapping that
// has ReportBatchItemFailures on and a maximum concurrency:
//
//   - up to BatchSize messages per invocation, with all system attributes
//     (ApproximateReceiveCount, SentTimestamp, MessageGroupId,
//     MessageDeduplicationId, SequenceNumber, ...) and message attributes;
//   - never more than Concurrency invocations at once;
//   - each invocation gets a context with the HandlerTimeout deadline (the
//     Lambda timeout); an invocation that errors, panics or overruns its
//     deadline is a failure of the whole batch: nothing is deleted and every
//     message comes back after the visibility timeout;
//   - otherwise every message not listed in BatchItemFailures is deleted; a
//     failure naming no message of the batch (empty or unknown id) fails the
//     whole batch, as on AWS.
//
// As on AWS, successful messages are deleted even when an earlier message of
// the same FIFO group failed: a FIFO handler must report every message after
// its first failure as failed too, to keep group order.
//
// Unlike Lambda, a handler that ignores its context cannot be killed: its
// slot stays taken until it returns, and its result is discarded when the
// deadline has passed.
package eventsource

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Handler is a Lambda SQS handler.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// Options configures Run.
type Options struct {
	// QueueURL is the queue to poll (required).
	QueueURL string
	// QueueARN is put into each message's EventSourceARN; when empty it is
	// arn:aws:sqs:us-east-1:000000000000:NAME, NAME being the last segment
	// of QueueURL. Its region becomes the messages' AWSRegion.
	QueueARN string
	// BatchSize is the maximum number of messages per invocation, 1-10;
	// 0 means 10. With a BatchWindow it may be up to 10,000 (a standard
	// queue's limit on AWS).
	BatchSize int
	// BatchWindow is the mapping's MaximumBatchingWindowInSeconds: once a
	// first message is received, receiving goes on until BatchSize
	// messages are gathered or the window has passed (0-300s; 0 sends each
	// receive's messages at once).
	BatchWindow time.Duration
	// Concurrency is the maximum number of concurrent invocations (the
	// function's reserved concurrency or the mapping's maximum
	// concurrency); 0 means 1. There is one poller per slot, so messages are
	// only received when a slot is free to process them.
	Concurrency int
	// VisibilityTimeout is requested on every receive (whole seconds,
	// rounded up); it must be at least HandlerTimeout. 0 means six times
	// HandlerTimeout, the AWS recommendation.
	VisibilityTimeout time.Duration
	// HandlerTimeout is the deadline of each invocation's context, like the
	// Lambda timeout (required).
	HandlerTimeout time.Duration
	// WaitTime is the long-poll wait of each receive (whole seconds, rounded
	// up, at most 20s); 0 means 1s. Run returns at most about this long
	// after ctx is done (plus the time in-flight invocations need).
	WaitTime time.Duration
	// Logger receives invocation failures and polling errors. Nil discards.
	Logger *slog.Logger
}

// Region is the region of the default EventSourceARN.
const Region = "us-east-1"

const (
	defaultAccount   = "000000000000"
	deleteTimeout    = 10 * time.Second
	maxPollBackoff   = 5 * time.Second
	receiveSlackTime = 10 * time.Second
)

// Run polls opts.QueueURL and invokes handler until ctx is done, then waits
// for the invocations in flight to finish and returns nil. Messages received
// but not yet handed to the handler when ctx ends are made visible again at
// once. Invalid options are reported as an error right away; errors of SQS
// calls are logged and retried with backoff.
func Run(ctx context.Context, client *sqs.Client, opts Options, handler Handler) error {
	cfg, err := opts.normalize()
	if err != nil {
		return err
	}
	if client == nil || handler == nil {
		return errors.New("eventsource: nil client or handler")
	}
	p := &poller{client: client, opts: cfg, handler: handler}
	var wg sync.WaitGroup
	for i := 0; i < cfg.Concurrency; i++ {
		wg.Add(1)
		go func(worker int) {
			defer wg.Done()
			p.work(ctx, worker)
		}(i)
	}
	cfg.Logger.Debug("eventsource: polling", "queue", cfg.QueueURL, "concurrency", cfg.Concurrency, "batch", cfg.BatchSize)
	wg.Wait()
	return nil
}

func (o Options) normalize() (Options, error) {
	if o.QueueURL == "" {
		return o, errors.New("eventsource: Options.QueueURL is required")
	}
	if o.BatchSize == 0 {
		o.BatchSize = 10
	}
	if o.BatchWindow < 0 || o.BatchWindow > 300*time.Second {
		return o, fmt.Errorf("eventsource: BatchWindow %s out of range 0-300s", o.BatchWindow)
	}
	if maxBatch := 10; o.BatchSize < 1 || o.BatchSize > maxBatch && (o.BatchWindow == 0 || o.BatchSize > 10000) {
		if o.BatchWindow > 0 {
			maxBatch = 10000
		}
		return o, fmt.Errorf("eventsource: BatchSize %d out of range 1-%d", o.BatchSize, maxBatch)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.Concurrency < 1 {
		return o, fmt.Errorf("eventsource: negative Concurrency %d", o.Concurrency)
	}
	if o.HandlerTimeout <= 0 {
		return o, errors.New("eventsource: Options.HandlerTimeout is required")
	}
	if o.VisibilityTimeout == 0 {
		o.VisibilityTimeout = 6 * o.HandlerTimeout
	}
	if o.VisibilityTimeout < o.HandlerTimeout {
		return o, fmt.Errorf("eventsource: VisibilityTimeout %s is shorter than HandlerTimeout %s: messages would be redelivered while still being handled", o.VisibilityTimeout, o.HandlerTimeout)
	}
	if o.VisibilityTimeout > 12*time.Hour {
		return o, fmt.Errorf("eventsource: VisibilityTimeout %s over 12h", o.VisibilityTimeout)
	}
	if o.WaitTime == 0 {
		o.WaitTime = time.Second
	}
	if o.WaitTime < 0 || o.WaitTime > 20*time.Second {
		return o, fmt.Errorf("eventsource: WaitTime %s out of range 0-20s", o.WaitTime)
	}
	if o.QueueARN == "" {
		name := o.QueueURL[strings.LastIndexByte(o.QueueURL, '/')+1:]
		o.QueueARN = "arn:aws:sqs:" + Region + ":" + defaultAccount + ":" + name
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// region returns the region of an ARN, Region when it has none.
func region(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) > 3 && parts[3] != "" {
		return parts[3]
	}
	return Region
}

type poller struct {
	client  *sqs.Client
	opts    Options
	handler Handler
}

// work is one concurrency slot: receive a batch, invoke, settle, repeat.
func (p *poller) work(ctx context.Context, worker int) {
	log := p.opts.Logger.With("queue_arn", p.opts.QueueARN, "worker", worker)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		msgs, err := p.receive(ctx)
		if err != nil {
			log.Warn("eventsource: receive failed; retrying", "error", err, "backoff", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, maxPollBackoff)
			continue
		}
		backoff = 100 * time.Millisecond
		if len(msgs) == 0 {
			continue
		}
		msgs = p.gather(ctx, msgs, log)
		if ctx.Err() != nil {
			p.release(msgs, log)
			return
		}
		p.invoke(ctx, msgs, log)
	}
}

// receive long-polls for a batch. The call is not cut short when ctx ends
// (that could lose a batch in flight until its visibility timeout); it ends
// within WaitTime anyway.
func (p *poller) receive(ctx context.Context) ([]types.Message, error) {
	return p.receiveUpTo(ctx, min(10, p.opts.BatchSize), seconds(p.opts.WaitTime))
}

// receiveUpTo long-polls for at most max messages (1-10), waiting up to
// waitSeconds (0: a short poll).
func (p *poller) receiveUpTo(ctx context.Context, max int, waitSeconds int32) ([]types.Message, error) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Duration(waitSeconds)*time.Second+receiveSlackTime)
	defer cancel()
	out, err := p.client.ReceiveMessage(rctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.opts.QueueURL),
		MaxNumberOfMessages:         int32(max),
		VisibilityTimeout:           seconds(p.opts.VisibilityTimeout),
		WaitTimeSeconds:             waitSeconds,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return nil, fmt.Errorf("eventsource: receive from %s: %w", p.opts.QueueURL, err)
	}
	return out.Messages, nil
}

// gather goes on receiving, after a first batch, until BatchSize messages
// are in hand or BatchWindow has passed since the first arrived.
func (p *poller) gather(ctx context.Context, msgs []types.Message, log *slog.Logger) []types.Message {
	if p.opts.BatchWindow <= 0 {
		return msgs
	}
	deadline := time.Now().Add(p.opts.BatchWindow)
	for len(msgs) < p.opts.BatchSize && ctx.Err() == nil {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		// Whole seconds only, so as not to overrun the window; under a
		// second, short polls a tenth of a second apart.
		more, err := p.receiveUpTo(ctx, min(10, p.opts.BatchSize-len(msgs)), int32(min(wait, 20*time.Second)/time.Second))
		if err != nil {
			log.Warn("eventsource: receive failed while gathering a batch", "error", err)
			break
		}
		msgs = append(msgs, more...)
		if len(more) == 0 && wait < time.Second {
			time.Sleep(min(wait, 100*time.Millisecond))
		}
	}
	return msgs
}

// invoke runs the handler on one batch and settles the batch.
func (p *poller) invoke(ctx context.Context, msgs []types.Message, log *slog.Logger) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, len(msgs))}
	byID := make(map[string]types.Message, len(msgs))
	for i, m := range msgs {
		ev.Records[i] = p.convert(m)
		byID[aws.ToString(m.MessageId)] = m
	}

	// Like Lambda, a running invocation is not interrupted when polling
	// stops; only its own timeout applies.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.opts.HandlerTimeout)
	defer cancel()
	// Each invocation has its own request id, as on Lambda (every log line
	// of the handler carries it).
	requestID := newRequestID()
	hctx = lambdacontext.NewContext(hctx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
	log = log.With("request_id", requestID)
	start := time.Now()
	resp, err := p.call(hctx, ev)
	if err == nil && hctx.Err() != nil {
		err = fmt.Errorf("handler returned after its %s timeout: %w", p.opts.HandlerTimeout, hctx.Err())
	}
	if err != nil {
		log.Error("eventsource: invocation failed; the whole batch will be redelivered",
			"messages", len(msgs), "duration", time.Since(start), "error", err)
		return
	}

	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if _, ok := byID[f.ItemIdentifier]; !ok {
			log.Error("eventsource: BatchItemFailures names a message not in the batch; the whole batch will be redelivered",
				"itemIdentifier", f.ItemIdentifier)
			return
		}
		failed[f.ItemIdentifier] = true
	}
	var done []types.Message
	for _, m := range msgs {
		if !failed[aws.ToString(m.MessageId)] {
			done = append(done, m)
		}
	}
	if len(failed) > 0 {
		log.Info("eventsource: partial batch failure", "failed", len(failed), "succeeded", len(done))
	}
	p.delete(done, log)
}

// newRequestID is a random id in the form of Lambda's (a UUID).
func newRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// call invokes the handler, turning a panic into an error.
func (p *poller) call(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", r, debug.Stack())
		}
	}()
	return p.handler(ctx, ev)
}

// delete removes successfully handled messages from the queue.
func (p *poller) delete(msgs []types.Message, log *slog.Logger) {
	p.inBatches(msgs, log, slog.LevelError, "deleting handled messages failed; they will be redelivered",
		func(ctx context.Context, chunk []types.Message) ([]types.BatchResultErrorEntry, error) {
			entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
			for i, m := range chunk {
				entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprintf("m%d", i)), ReceiptHandle: m.ReceiptHandle}
			}
			out, err := p.client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.opts.QueueURL), Entries: entries})
			if err != nil {
				return nil, err
			}
			return out.Failed, nil
		})
}

// release makes received but unprocessed messages visible again at once.
func (p *poller) release(msgs []types.Message, log *slog.Logger) {
	p.inBatches(msgs, log, slog.LevelWarn, "releasing unprocessed messages failed; they come back after the visibility timeout",
		func(ctx context.Context, chunk []types.Message) ([]types.BatchResultErrorEntry, error) {
			entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
			for i, m := range chunk {
				entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(fmt.Sprintf("m%d", i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0}
			}
			out, err := p.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(p.opts.QueueURL), Entries: entries})
			if err != nil {
				return nil, err
			}
			return out.Failed, nil
		})
}

// inBatches settles msgs with send, ten at a time (the most one SQS batch
// call takes; a batch gathered over a window holds more), and logs at level
// what failed (the whole call, or single entries) with the message failed.
func (p *poller) inBatches(msgs []types.Message, log *slog.Logger, level slog.Level, failed string,
	send func(ctx context.Context, chunk []types.Message) ([]types.BatchResultErrorEntry, error)) {
	if len(msgs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	for chunk := range slices.Chunk(msgs, 10) {
		failures, err := send(ctx, chunk)
		if err != nil {
			log.Log(ctx, level, "eventsource: "+failed, "messages", len(chunk), "error", err)
			continue
		}
		for _, f := range failures {
			log.Log(ctx, level, "eventsource: "+failed, "messages", 1,
				"entry", aws.ToString(f.Id), "code", aws.ToString(f.Code), "message", aws.ToString(f.Message))
		}
	}
}

// convert turns an SQS message into the record Lambda would deliver.
func (p *poller) convert(m types.Message) events.SQSMessage {
	rec := events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             make(map[string]string, len(m.Attributes)),
		MessageAttributes:      make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes)),
		EventSourceARN:         p.opts.QueueARN,
		EventSource:            "aws:sqs",
		AWSRegion:              region(p.opts.QueueARN),
	}
	for k, v := range m.Attributes {
		rec.Attributes[k] = v
	}
	for k, v := range m.MessageAttributes {
		rec.MessageAttributes[k] = events.SQSMessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
	}
	return rec
}

func seconds(d time.Duration) int32 {
	return int32(math.Ceil(d.Seconds()))
}
