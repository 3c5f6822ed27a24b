// Package lambdainvoke is the adapter that hands a webhook delivery to the
// webhook-sender function (functions/publish/webhooksend) with a synchronous Lambda
// Invoke: the webhooks consumer, in the VPC next to the databases, signs;
// the sender, outside the VPC, makes the POST (webhooks.Poster).
package lambdainvoke

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// NewClient builds a Lambda client, on endpoint when set.
func NewClient(cfg aws.Config, endpoint string) *lambda.Client {
	return lambda.NewFromConfig(cfg, func(o *lambda.Options) {
		if endpoint != "" {
			o.BaseEndpoint = aws.String(endpoint)
		}
	})
}

// Poster invokes the sender function once per delivery.
type Poster struct {
	client   *lambda.Client
	function string // name or ARN
}

// NewPoster returns a Poster invoking function.
func NewPoster(client *lambda.Client, function string) *Poster {
	return &Poster{client: client, function: function}
}

// Post hands the delivery to the sender and returns its result. An error
// means the sender could not be invoked or failed itself (a crash, a
// timeout): the delivery is retried like a failed one.
func (p *Poster) Post(ctx context.Context, d webhook.Delivery) (webhook.Result, error) {
	payload, err := json.Marshal(d)
	if err != nil {
		return webhook.Result{}, err
	}
	out, err := p.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(p.function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return webhook.Result{}, fmt.Errorf("invoke %s: %w", p.function, err)
	}
	if out.FunctionError != nil {
		return webhook.Result{}, fmt.Errorf("%s failed (%s): %s", p.function, aws.ToString(out.FunctionError), out.Payload)
	}
	var res webhook.Result
	if err := json.Unmarshal(out.Payload, &res); err != nil {
		return webhook.Result{}, fmt.Errorf("%s answered %q: %w", p.function, out.Payload, err)
	}
	return res, nil
}
