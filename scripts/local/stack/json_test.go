package stack_test

import (
	"context"
	"encoding/json"

	"github.com/retailcatalog/catalog/functions/sqsqueue"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func jsonString(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func jsonParse(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func sqsSend(st *stack.Stack, queueURL, body string) error {
	return sqsqueue.NewSender(st.SQS).Send(context.Background(), queueURL, body, "", "")
}
