package snstopic_test

import (
	"context"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/platform/connect"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/retailcatalog/catalog/functions/adapters/snstopic"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/ports/topic/topictest"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The SNS adapter keeps the topic contract against the emulator's SNS,
// through the clients the functions build, with a queue subscribed the way
// the consumers' queues are (raw message delivery).
func TestPublisherContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	endpoint := testenv.SQS(t)
	cfg := config.Config{AWS: config.AWS{Region: "us-east-1", SNSEndpoint: endpoint, SQSEndpoint: endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}}
	adapters := connect.New(&cfg)
	snsClient, err := adapters.SNSClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sqsClient, err := adapters.SQSClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	topictest.Run(t, func(t *testing.T) topictest.Harness {
		prefix := testenv.Name("tp")
		arn, err := sqsemulator.EnsureTopic(ctx, snsClient, prefix+"catalog-changes")
		if err != nil {
			t.Fatal(err)
		}
		queueURL, _, err := sqsemulator.EnsureQueue(ctx, sqsClient, prefix+"subscriber", 30*time.Second, 5)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sqsemulator.Subscribe(ctx, snsClient, arn, prefix+"subscriber", nil); err != nil {
			t.Fatal(err)
		}
		return topictest.Harness{Publisher: snstopic.New(snsClient, arn),
			Receive: func(t *testing.T, want int) []topic.Message { return receive(t, sqsClient, queueURL, want) }}
	})
}

// receive takes messages off queueURL (deleting them) until there are want
// or ten seconds have passed.
func receive(t *testing.T, client *sqs.Client, queueURL string, want int) []topic.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []topic.Message
	for len(out) < want && ctx.Err() == nil {
		resp, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &queueURL, MaxNumberOfMessages: 10,
			WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"}})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.Fatalf("receive from %s: %v", queueURL, err)
		}
		for _, m := range resp.Messages {
			attrs := map[string]string{}
			for k, v := range m.MessageAttributes {
				attrs[k] = aws.ToString(v.StringValue)
			}
			out = append(out, topic.Message{Body: aws.ToString(m.Body), Attributes: attrs})
			if _, err := client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &queueURL, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete from %s: %v", queueURL, err)
			}
		}
	}
	return out
}
