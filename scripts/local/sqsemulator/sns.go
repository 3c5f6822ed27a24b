package sqsemulator

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// EnsureTopic creates the SNS topic name (or finds it) and returns its ARN.
func EnsureTopic(ctx context.Context, client *sns.Client, name string) (string, error) {
	out, err := client.CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("sqsemulator: create topic %s: %w", name, err)
	}
	return aws.ToString(out.TopicArn), nil
}

// Subscribe subscribes the queue named queueName to the topic with raw
// message delivery (the SQS body is the published message, its attributes
// the message attributes), as the stack's consumers are on AWS. filter, when
// not nil, becomes the subscription's FilterPolicy on message attributes.
// Subscribing again with the same attributes changes nothing.
func Subscribe(ctx context.Context, client *sns.Client, topicARN, queueName string, filter map[string]any) (string, error) {
	attrs := map[string]string{"RawMessageDelivery": "true"}
	if filter != nil {
		b, err := json.Marshal(filter)
		if err != nil {
			return "", fmt.Errorf("sqsemulator: filter policy: %w", err)
		}
		attrs["FilterPolicy"] = string(b)
	}
	out, err := client.Subscribe(ctx, &sns.SubscribeInput{
		TopicArn: aws.String(topicARN), Protocol: aws.String("sqs"), Endpoint: aws.String(QueueARN(queueName)),
		Attributes: attrs, ReturnSubscriptionArn: true,
	})
	if err != nil {
		return "", fmt.Errorf("sqsemulator: subscribe %s to %s: %w", queueName, topicARN, err)
	}
	return aws.ToString(out.SubscriptionArn), nil
}
