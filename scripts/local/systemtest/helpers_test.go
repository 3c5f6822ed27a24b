package systemtest_test

import (
	"encoding/json"
	"testing"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is a systemtest.Env with the helpers of this package's tests.
type env struct{ *systemtest.Env }

func newEnv(t *testing.T, o stack.Options) *env { return &env{systemtest.Start(t, o)} }

func jsonParse(s string, v any) error { return json.Unmarshal([]byte(s), v) }

// asSQS turns held messages into the records of an SQS event, as the event
// source would deliver them.
func asSQS(held []systemtest.HeldMessage) []lambdaevents.SQSMessage {
	out := make([]lambdaevents.SQSMessage, len(held))
	for i, m := range held {
		out[i] = lambdaevents.SQSMessage{MessageId: m.DedupID, Body: m.Body}
	}
	return out
}
