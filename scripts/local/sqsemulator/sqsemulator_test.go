package sqsemulator_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
)

type progress struct{ t *testing.T }

func (p progress) Write(b []byte) (int, error) {
	p.t.Log(time.Now().Format("15:04:05.000"), string(bytes.TrimSpace(b)))
	return len(b), nil
}

// The tests of queue semantics share one emulator, started on first use and
// stopped by TestMain.
var (
	sharedOnce   sync.Once
	sharedEmu    *sqsemulator.Emulator
	sharedClient *sqs.Client
	sharedErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedEmu != nil {
		_ = sharedEmu.Stop()
	}
	os.Exit(code)
}

func shared(t *testing.T) *sqs.Client {
	t.Helper()
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a first install may be slow
		defer cancel()
		sharedEmu, sharedErr = sqsemulator.Start(ctx, sqsemulator.Options{Progress: os.Stderr})
		if sharedErr == nil {
			sharedClient, sharedErr = sqsemulator.NewSQSClient(ctx, sharedEmu.Endpoint())
		}
	})
	require.NoError(t, sharedErr)
	return sharedClient
}

func startEmulator(t *testing.T, ctx context.Context) (*sqsemulator.Emulator, *sqs.Client) {
	t.Helper()
	e, err := sqsemulator.Start(ctx, sqsemulator.Options{Progress: progress{t}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Stop() })
	client, err := sqsemulator.NewSQSClient(ctx, e.Endpoint())
	require.NoError(t, err)
	return e, client
}

func send(t *testing.T, ctx context.Context, c *sqs.Client, url, body, group, dedup string) string {
	t.Helper()
	out, err := c.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl: aws.String(url), MessageBody: aws.String(body),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
	})
	require.NoError(t, err)
	return aws.ToString(out.MessageId)
}

func receive(t *testing.T, ctx context.Context, c *sqs.Client, url string, max int32, wait int32) []types.Message {
	t.Helper()
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: max, WaitTimeSeconds: wait,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	require.NoError(t, err)
	return out.Messages
}

func TestStartStop(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	e, client := startEmulator(t, ctx)
	require.True(t, strings.HasPrefix(e.Endpoint(), "http://127.0.0.1:"), e.Endpoint())

	_, err := client.ListQueues(ctx, &sqs.ListQueuesInput{})
	require.NoError(t, err)
	snsClient, err := sqsemulator.NewSNSClient(ctx, e.Endpoint())
	require.NoError(t, err)
	_, err = snsClient.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("changes")})
	require.NoError(t, err)

	pid := e.Pid()
	require.NoError(t, e.Stop())
	require.NoError(t, e.Stop())
	require.Error(t, syscall.Kill(pid, 0), "fauxqs still running after Stop")
}

func TestEnsureQueue(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	client := shared(t)

	q, dlq, err := sqsemulator.EnsureQueue(ctx, client, "ensure.fifo", 30*time.Second, 5)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(q, "/ensure.fifo"), q)
	require.True(t, strings.HasSuffix(dlq, "/ensure-dlq.fifo"), dlq)

	// Idempotent; a changed visibility is applied to the existing queue.
	q2, dlq2, err := sqsemulator.EnsureQueue(ctx, client, "ensure.fifo", 45*time.Second, 7)
	require.NoError(t, err)
	require.Equal(t, q, q2)
	require.Equal(t, dlq, dlq2)
	attrs, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	require.NoError(t, err)
	require.Equal(t, "45", attrs.Attributes["VisibilityTimeout"])
	require.Equal(t, "true", attrs.Attributes["FifoQueue"])
	require.Equal(t, "false", attrs.Attributes["ContentBasedDeduplication"])
	require.JSONEq(t, `{"deadLetterTargetArn":"`+sqsemulator.QueueARN("ensure-dlq.fifo")+`","maxReceiveCount":"7"}`, attrs.Attributes["RedrivePolicy"])

	q3, dlq3, err := sqsemulator.EnsureQueue(ctx, client, "diff-jobs", 90*time.Second, 3)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(q3, "/diff-jobs"), q3)
	require.True(t, strings.HasSuffix(dlq3, "/diff-jobs-dlq"), dlq3)
	attrs, err = client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(q3), AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	require.NoError(t, err)
	require.Empty(t, attrs.Attributes["FifoQueue"])

	_, _, err = sqsemulator.EnsureQueue(ctx, client, "bad", time.Second, 0)
	require.Error(t, err)
}

// FIFO semantics the apply pipeline relies on: order within a group, one
// group's messages never in flight twice, deduplication within 5 minutes.
func TestFIFO(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	client := shared(t)
	q, _, err := sqsemulator.EnsureQueue(ctx, client, "apply.fifo", 30*time.Second, 5)
	require.NoError(t, err)

	a1 := send(t, ctx, client, q, "a1", "r1#0", "r1:7:0")
	send(t, ctx, client, q, "a2", "r1#0", "r1:7:20")
	send(t, ctx, client, q, "a3", "r1#0", "r1:7:40")
	send(t, ctx, client, q, "b1", "r2#0", "r2:3:0")
	// Same dedup id, other body, within 5 minutes: accepted but dropped, and
	// answered with the original message id (as SQS does).
	dupID := send(t, ctx, client, q, "a1-again", "r1#0", "r1:7:0")
	require.Equal(t, a1, dupID)

	var got []string
	seqs := map[string]string{}
	for round := 0; len(got) < 4 && round < 10; round++ {
		batch := receive(t, ctx, client, q, 10, 1)
		var bodies []string
		groups := map[string]int{}
		for _, m := range batch {
			bodies = append(bodies, aws.ToString(m.Body))
			g := m.Attributes["MessageGroupId"]
			groups[g]++
			require.NotEmpty(t, m.Attributes["SequenceNumber"])
			require.NotEmpty(t, m.Attributes["MessageDeduplicationId"])
			require.Equal(t, "1", m.Attributes["ApproximateReceiveCount"])
			require.NotEmpty(t, m.Attributes["SentTimestamp"])
			seqs[aws.ToString(m.Body)] = m.Attributes["SequenceNumber"]
		}
		t.Logf("receive(max 10) round %d returned %v", round, bodies)
		// While a message of a group is in flight, nothing else of that group
		// is handed out.
		again := receive(t, ctx, client, q, 10, 0)
		for _, m := range again {
			require.Zero(t, groups[m.Attributes["MessageGroupId"]], "group %s delivered while in flight", m.Attributes["MessageGroupId"])
			bodies = append(bodies, aws.ToString(m.Body))
		}
		batch = append(batch, again...)
		for _, m := range batch {
			got = append(got, aws.ToString(m.Body))
			_, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q), ReceiptHandle: m.ReceiptHandle})
			require.NoError(t, err)
		}
	}
	require.ElementsMatch(t, []string{"a1", "a2", "a3", "b1"}, got, "the duplicate must be dropped")
	var inGroup []string
	for _, b := range got {
		if strings.HasPrefix(b, "a") {
			inGroup = append(inGroup, b)
		}
	}
	require.Equal(t, []string{"a1", "a2", "a3"}, inGroup)
	require.Less(t, seqs["a1"], seqs["a2"])
	require.Less(t, seqs["a2"], seqs["a3"])
	require.Empty(t, receive(t, ctx, client, q, 10, 0))

	// A deleted message's dedup id still blocks a resend within 5 minutes.
	send(t, ctx, client, q, "a1-third", "r1#0", "r1:7:0")
	require.Empty(t, receive(t, ctx, client, q, 10, 0))

	// Releasing a message (visibility 0) makes it, and its group, available
	// at once, still first in its group.
	send(t, ctx, client, q, "c1", "r3#0", "r3:1:0")
	send(t, ctx, client, q, "c2", "r3#0", "r3:1:20")
	msgs := receive(t, ctx, client, q, 10, 0)
	require.Len(t, msgs, 1)
	require.Equal(t, "c1", aws.ToString(msgs[0].Body))
	_, err = client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(q),
		Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: msgs[0].ReceiptHandle, VisibilityTimeout: 0}}})
	require.NoError(t, err)
	msgs = receive(t, ctx, client, q, 10, 0)
	require.Len(t, msgs, 1)
	require.Equal(t, "c1", aws.ToString(msgs[0].Body))
	require.Equal(t, "2", msgs[0].Attributes["ApproximateReceiveCount"])
}

// A message received maxReceives times without being deleted goes to the DLQ.
func TestRedrive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	client := shared(t)

	for _, name := range []string{"poison.fifo", "poison"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, dlq, err := sqsemulator.EnsureQueue(ctx, client, name, time.Second, 5)
			require.NoError(t, err)
			in := &sqs.SendMessageInput{QueueUrl: aws.String(q), MessageBody: aws.String("poison"),
				MessageAttributes: map[string]types.MessageAttributeValue{
					"trace": {DataType: aws.String("String"), StringValue: aws.String("t-1")},
				}}
			if strings.HasSuffix(name, ".fifo") {
				in.MessageGroupId, in.MessageDeduplicationId = aws.String("g"), aws.String("d")
			}
			_, err = client.SendMessage(ctx, in)
			require.NoError(t, err)

			start := time.Now()
			for i := 1; i <= 5; i++ {
				msgs := receive(t, ctx, client, q, 10, 3)
				require.Len(t, msgs, 1, "receive %d", i)
				require.Equal(t, strconv.Itoa(i), msgs[0].Attributes["ApproximateReceiveCount"])
				require.Equal(t, "t-1", aws.ToString(msgs[0].MessageAttributes["trace"].StringValue))
				if i > 1 {
					// Not visible again before the 1s visibility timeout.
					require.GreaterOrEqual(t, time.Since(start), time.Duration(i-1)*time.Second-100*time.Millisecond)
				}
			}
			// The 6th receive moves it to the DLQ instead of returning it.
			require.Empty(t, receive(t, ctx, client, q, 10, 2))
			dead := receive(t, ctx, client, dlq, 10, 1)
			require.Len(t, dead, 1)
			require.Equal(t, "poison", aws.ToString(dead[0].Body))
			t.Logf("%s: in the DLQ after %s, attributes %v", name, time.Since(start).Round(time.Millisecond), dead[0].Attributes)
		})
	}
}

// The emulator dies with its parent, even when the parent is SIGKILLed.
func TestChildDiesWithParent(t *testing.T) {
	t.Parallel()
	if os.Getenv("SQSEMULATOR_TEST_HELPER") == "1" {
		t.Skip("helper")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperParent$", "-test.v")
	cmd.Env = append(os.Environ(), "SQSEMULATOR_TEST_HELPER=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	pid := 0
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(strings.TrimSpace(sc.Text()), "EMULATOR-PID %d", &pid); err == nil {
			break
		}
	}
	require.NotZero(t, pid, "helper did not report the emulator pid")
	go func() { _, _ = bufio.NewReader(out).WriteTo(io_discard{}) }()
	require.True(t, alive(pid))

	require.NoError(t, cmd.Process.Kill())
	require.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 20*time.Millisecond,
		"fauxqs (pid %d) survived its parent", pid)
}

type io_discard struct{}

func (io_discard) Write(b []byte) (int, error) { return len(b), nil }

// TestHelperParent is the parent process for TestChildDiesWithParent.
func TestHelperParent(t *testing.T) {
	if os.Getenv("SQSEMULATOR_TEST_HELPER") != "1" {
		t.Skip("only run as a helper process")
	}
	e, err := sqsemulator.Start(context.Background(), sqsemulator.Options{})
	require.NoError(t, err)
	fmt.Printf("EMULATOR-PID %d\n", e.Pid())
	time.Sleep(time.Minute)
	_ = e.Stop()
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// SNS topics fan out to subscribed SQS queues (the change-event path).
func TestSNSFanOut(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	client := shared(t)
	snsClient, err := sqsemulator.NewSNSClient(ctx, sharedEmu.Endpoint())
	require.NoError(t, err)

	q, _, err := sqsemulator.EnsureQueue(ctx, client, "consumer-search", 30*time.Second, 5)
	require.NoError(t, err)
	topic, err := snsClient.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String("catalog-changes")})
	require.NoError(t, err)
	_, err = snsClient.Subscribe(ctx, &sns.SubscribeInput{TopicArn: topic.TopicArn, Protocol: aws.String("sqs"),
		Endpoint: aws.String(sqsemulator.QueueARN("consumer-search")), Attributes: map[string]string{"RawMessageDelivery": "true"}})
	require.NoError(t, err)
	_, err = snsClient.Publish(ctx, &sns.PublishInput{TopicArn: topic.TopicArn, Message: aws.String(`{"product_id":"p1"}`)})
	require.NoError(t, err)
	msgs := receive(t, ctx, client, q, 10, 2)
	require.Len(t, msgs, 1)
	require.JSONEq(t, `{"product_id":"p1"}`, aws.ToString(msgs[0].Body))
}
