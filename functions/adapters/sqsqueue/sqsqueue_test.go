package sqsqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/platform/connect"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/retailcatalog/catalog/functions/adapters/sqsqueue"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/ports/queue/queuetest"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The SQS adapter keeps the queue contract against the SQS emulator
// (fauxqs, real FIFO semantics), through the client the functions build.
func TestSenderContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := config.Config{AWS: config.AWS{Region: "us-east-1", SQSEndpoint: testenv.SQS(t),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}}
	client, err := connect.New(&cfg).SQSClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sender := sqsqueue.NewSender(client)
	inspector := sqsqueue.NewInspector(client)
	redriver := sqsqueue.NewRedriver(client)
	queuetest.Run(t, func(t *testing.T) queuetest.Harness {
		prefix := testenv.Name("q")
		standard, standardDLQ, err := sqsemulator.EnsureQueue(ctx, client, prefix+"diff-jobs", 30*time.Second, 5)
		if err != nil {
			t.Fatal(err)
		}
		fifo, fifoDLQ, err := sqsemulator.EnsureQueue(ctx, client, prefix+"apply.fifo", 30*time.Second, 5)
		if err != nil {
			t.Fatal(err)
		}
		return queuetest.Harness{Sender: sender, Inspector: inspector, StandardURL: standard, FIFOURL: fifo,
			Redriver: redriver, StandardDLQURL: standardDLQ, FIFODLQURL: fifoDLQ,
			Receive: func(t *testing.T, queueURL string, want int) []queuetest.Message {
				return receive(t, client, queueURL, want)
			}}
	})
}

// receive takes messages off queueURL (deleting them) until there are want
// or ten seconds have passed.
func receive(t *testing.T, client *sqs.Client, queueURL string, want int) []queuetest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []queuetest.Message
	for len(out) < want && ctx.Err() == nil {
		resp, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameMessageGroupId}})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatalf("receive from %s: %v", queueURL, err)
		}
		for _, m := range resp.Messages {
			out = append(out, queuetest.Message{Body: aws.ToString(m.Body), GroupID: m.Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]})
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete from %s: %v", queueURL, err)
			}
		}
	}
	return out
}
