// Package sqsemulator runs the SQS/SNS emulator of the local stack — npm
// fauxqs (https://github.com/kibertoad/fauxqs), version FauxqsVersion, on
// Node 20 — as a child process listening on 127.0.0.1, and builds
// aws-sdk-go-v2 clients pointed at it.
//
// fauxqs speaks the SQS JSON protocol of the current SDK, with real FIFO
// semantics (message groups, deduplication ids, sequence numbers), visibility
// timeouts, long polling and redrive to dead-letter queues. It keeps all state
// in memory: queues and messages do not survive a restart, so the local stack
// recreates its queues (EnsureQueue) on every start.
//
// The child is started in its own process group; Stop kills the group, and on
// Linux the kernel kills the child when the parent dies (Pdeathsig).
package sqsemulator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	"github.com/retailcatalog/catalog/functions/ports/queue"
)

// Region is the AWS region used by the emulator's clients, ARNs and URLs.
const Region = "us-east-1"

// AccountID is the account fauxqs puts into every ARN and queue URL.
const AccountID = "000000000000"

// startTimeout is generous: loading fauxqs takes 0.5s on an idle machine but
// tens of seconds on a busy 2-CPU one.
const startTimeout = 2 * time.Minute

// Options configures Start.
type Options struct {
	// Port is the TCP port on 127.0.0.1; 0 lets the emulator pick a free one.
	Port int
	// Progress receives human-readable progress lines (install, start,
	// stop). May be nil.
	Progress io.Writer
	// Logs receives the child's stdout and stderr, including fauxqs'
	// request log (JSON lines, on only when Logs is set). May be nil.
	Logs io.Writer
}

// Emulator is a running fauxqs child process.
type Emulator struct {
	cmd      *exec.Cmd
	port     int
	progress io.Writer
	done     chan struct{} // closed when the child has exited
	werr     error         // cmd.Wait result, valid after done is closed
	stderr   *tailBuffer

	stopOnce sync.Once
	stopErr  error
}

// Start installs fauxqs when needed (see EnsureInstalled), starts it on
// 127.0.0.1 and waits until the endpoint answers an SQS ListQueues call made
// with the SDK. The caller must call Stop.
func Start(ctx context.Context, opts Options) (*Emulator, error) {
	progress := opts.Progress
	if progress == nil {
		progress = io.Discard
	}
	dir, err := EnsureInstalled(ctx, progress)
	if err != nil {
		return nil, err
	}
	if err := checkNode(ctx); err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("sqsemulator: node: %w", err)
	}
	logs := opts.Logs
	if logs == nil {
		logs = io.Discard
	}

	cmd := exec.Command(node, filepath.Join(dir, launcherName),
		strconv.Itoa(opts.Port), strconv.FormatBool(opts.Logs != nil))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_ENV=production")
	cmd.SysProcAttr = sysProcAttr()
	stderr := &tailBuffer{max: 8 << 10}
	cmd.Stderr = io.MultiWriter(logs, stderr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("sqsemulator: stdout pipe: %w", err)
	}
	fmt.Fprintf(progress, "sqsemulator: starting fauxqs@%s (%s %s)\n", FauxqsVersion, node, filepath.Join(dir, launcherName))
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sqsemulator: start node: %w", err)
	}
	e := &Emulator{cmd: cmd, progress: progress, done: make(chan struct{}), stderr: stderr}

	// The first stdout line announces the port; the rest is copied to logs.
	// stdout must be drained to the end before Wait.
	portc := make(chan int, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		r := bufio.NewReader(stdout)
		announced := false
		for {
			line, err := r.ReadString('\n')
			if !announced && strings.HasPrefix(line, "fauxqs-loopback listening ") {
				announced = true
				addr := strings.TrimSpace(strings.TrimPrefix(line, "fauxqs-loopback listening "))
				if i := strings.LastIndexByte(addr, ':'); i >= 0 {
					if p, perr := strconv.Atoi(addr[i+1:]); perr == nil {
						portc <- p
					}
				}
			} else if line != "" {
				_, _ = io.WriteString(logs, line)
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		<-copied
		e.werr = cmd.Wait()
		close(e.done)
	}()

	fail := func(err error) (*Emulator, error) {
		e.kill()
		return nil, fmt.Errorf("%w%s", err, e.stderr.tail())
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case e.port = <-portc:
	case <-e.done:
		return fail(fmt.Errorf("sqsemulator: fauxqs exited during startup: %v", e.werr))
	case <-ctx.Done():
		return fail(fmt.Errorf("sqsemulator: waiting for fauxqs to listen: %w", ctx.Err()))
	case <-timer.C:
		return fail(fmt.Errorf("sqsemulator: fauxqs did not listen within %s", startTimeout))
	}
	if err := e.waitReady(ctx); err != nil {
		return fail(err)
	}
	fmt.Fprintf(progress, "sqsemulator: fauxqs ready at %s (pid %d)\n", e.Endpoint(), cmd.Process.Pid)
	return e, nil
}

// waitReady polls ListQueues through the SDK until it succeeds.
func (e *Emulator) waitReady(ctx context.Context) error {
	client, err := NewSQSClient(ctx, e.Endpoint())
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := client.ListQueues(cctx, &sqs.ListQueuesInput{}, func(o *sqs.Options) {
			o.RetryMaxAttempts = 1
		})
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-e.done:
			return fmt.Errorf("sqsemulator: fauxqs exited during startup: %v", e.werr)
		case <-ctx.Done():
			return fmt.Errorf("sqsemulator: waiting for ListQueues to answer: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sqsemulator: ListQueues did not answer within %s: %w", startTimeout, err)
		}
	}
}

// Endpoint returns the emulator's base URL, http://127.0.0.1:PORT, for SQS
// and SNS clients (AWS_ENDPOINT_URL_SQS / AWS_ENDPOINT_URL_SNS).
func (e *Emulator) Endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(e.port) }

// Pid returns the process id of the child (the leader of its process group).
func (e *Emulator) Pid() int { return e.cmd.Process.Pid }

// Stop kills the child's whole process group and waits for the child to
// exit. All queues and messages are lost. Stop is idempotent.
func (e *Emulator) Stop() error {
	e.stopOnce.Do(func() {
		select {
		case <-e.done:
			e.stopErr = fmt.Errorf("sqsemulator: fauxqs had already exited: %v%s", e.werr, e.stderr.tail())
			return
		default:
		}
		fmt.Fprintf(e.progress, "sqsemulator: stopping fauxqs (pid %d)\n", e.cmd.Process.Pid)
		e.kill()
	})
	return e.stopErr
}

func (e *Emulator) kill() {
	pid := e.cmd.Process.Pid
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		_ = e.cmd.Process.Kill()
	}
	select {
	case <-e.done:
	case <-time.After(10 * time.Second):
		// The stdout copier may be blocked by a grandchild holding the
		// pipe; the group kill above should have taken it too.
	}
}

// NewSQSClient returns an SQS client for endpoint: region us-east-1, static
// dummy credentials. The process environment and the shared AWS config files
// are deliberately not read, so that an AWS_PROFILE or AWS_ENDPOINT_URL_* of
// the developer can never point the local stack at real AWS.
func NewSQSClient(ctx context.Context, endpoint string) (*sqs.Client, error) {
	if endpoint == "" {
		return nil, errors.New("sqsemulator: empty SQS endpoint")
	}
	return sqs.NewFromConfig(localConfig(), func(o *sqs.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}), nil
}

// NewSNSClient returns an SNS client for endpoint, configured like
// NewSQSClient.
func NewSNSClient(ctx context.Context, endpoint string) (*sns.Client, error) {
	if endpoint == "" {
		return nil, errors.New("sqsemulator: empty SNS endpoint")
	}
	return sns.NewFromConfig(localConfig(), func(o *sns.Options) {
		o.BaseEndpoint = aws.String(endpoint)
	}), nil
}

func localConfig() aws.Config {
	return aws.Config{
		Region:      Region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("local", "local", "")),
	}
}

// EnsureQueue creates, or updates when it already exists, a queue and its
// dead-letter queue, and returns both URLs. The queue gets visibility as its
// visibility timeout (rounded up to whole seconds, 0-12h) and a RedrivePolicy
// sending a message to the DLQ once it has been received maxReceives times
// (1-1000). A name ending in ".fifo" makes a FIFO queue
// (ContentBasedDeduplication=false: senders give MessageDeduplicationId) with
// the FIFO DLQ "<base>-dlq.fifo"; otherwise a standard queue with DLQ
// "<name>-dlq". The DLQ keeps messages 14 days.
func EnsureQueue(ctx context.Context, client *sqs.Client, name string, visibility time.Duration, maxReceives int) (queueURL, dlqURL string, err error) {
	if name == "" {
		return "", "", errors.New("sqsemulator: empty queue name")
	}
	secs := int(math.Ceil(visibility.Seconds()))
	if secs < 0 || secs > 43200 {
		return "", "", fmt.Errorf("sqsemulator: visibility timeout %s for %s out of range 0-12h", visibility, name)
	}
	if maxReceives < 1 || maxReceives > 1000 {
		return "", "", fmt.Errorf("sqsemulator: maxReceives %d for %s out of range 1-1000", maxReceives, name)
	}
	fifo := strings.HasSuffix(name, ".fifo")
	dlqName := queue.DeadLetterQueueName(name)

	dlqAttrs := map[string]string{"MessageRetentionPeriod": "1209600"}
	if fifo {
		dlqAttrs["FifoQueue"] = "true"
		dlqAttrs["ContentBasedDeduplication"] = "false"
	}
	dlqURL, err = createOrUpdateQueue(ctx, client, dlqName, dlqAttrs)
	if err != nil {
		return "", "", err
	}
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(dlqURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", "", fmt.Errorf("sqsemulator: get ARN of %s: %w", dlqName, err)
	}
	dlqARN := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if dlqARN == "" {
		return "", "", fmt.Errorf("sqsemulator: %s has no QueueArn attribute", dlqName)
	}
	policy, err := json.Marshal(map[string]string{
		"deadLetterTargetArn": dlqARN,
		"maxReceiveCount":     strconv.Itoa(maxReceives),
	})
	if err != nil {
		return "", "", fmt.Errorf("sqsemulator: redrive policy: %w", err)
	}
	attrs := map[string]string{
		"VisibilityTimeout": strconv.Itoa(secs),
		"RedrivePolicy":     string(policy),
	}
	if fifo {
		attrs["FifoQueue"] = "true"
		attrs["ContentBasedDeduplication"] = "false"
	}
	queueURL, err = createOrUpdateQueue(ctx, client, name, attrs)
	if err != nil {
		return "", "", err
	}
	return queueURL, dlqURL, nil
}

// createOrUpdateQueue creates the queue, or, when a queue of that name exists
// with other attributes, sets the attributes on it.
func createOrUpdateQueue(ctx context.Context, client *sqs.Client, name string, attrs map[string]string) (string, error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err == nil {
		return aws.ToString(out.QueueUrl), nil
	}
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || !(strings.Contains(apiErr.ErrorCode(), "QueueNameExists") || strings.Contains(apiErr.ErrorCode(), "QueueAlreadyExists")) {
		return "", fmt.Errorf("sqsemulator: create queue %s: %w", name, err)
	}
	got, err := client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("sqsemulator: get URL of existing queue %s: %w", name, err)
	}
	settable := make(map[string]string, len(attrs))
	for k, v := range attrs {
		if k != "FifoQueue" { // immutable
			settable[k] = v
		}
	}
	if _, err := client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: got.QueueUrl, Attributes: settable}); err != nil {
		return "", fmt.Errorf("sqsemulator: update attributes of existing queue %s: %w", name, err)
	}
	return aws.ToString(got.QueueUrl), nil
}

// QueueARN returns the ARN fauxqs gives the queue named name.
func QueueARN(name string) string {
	return "arn:aws:sqs:" + Region + ":" + AccountID + ":" + name
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.TrimSpace(t.buf))
	if s == "" {
		return ""
	}
	return "\n--- fauxqs stderr ---\n" + s
}
