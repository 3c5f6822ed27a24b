package main

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// TestChangeEvents: each consumer's queue is subscribed to the change-events
// topic with raw message delivery, the local stack's filter on the event
// type and its DLQ; the sweeper runs every minute on the relay; the Glue
// table reads the analytics files as the consumer writes them.
func TestChangeEvents(t *testing.T) {
	r := synth(t, nil)
	defer failOnAssertionPanic(t)
	topic := r.logicalID(t, "AWS::SNS::Topic", "ChangeEventsTopic")
	subs := map[string]map[string]any{}
	for _, s := range r.resources("AWS::SNS::Subscription") {
		p := s["Properties"].(map[string]any)
		subs[strings.TrimSuffix(strings.TrimPrefix(render(p["Endpoint"]), "${"), ".Arn}")] = p
	}
	equal(t, "subscriptions", len(subs), 2)
	for _, c := range []struct {
		queue, dlq string
		filter     map[string]any
	}{
		{"AnalyticsQueue", "AnalyticsDLQ", stack.AnalyticsFilter},
		{"WebhooksQueue", "WebhooksDLQ", stack.WebhooksFilter},
	} {
		q, dlq := r.logicalID(t, "AWS::SQS::Queue", c.queue), r.logicalID(t, "AWS::SQS::Queue", c.dlq)
		p := subs[q]
		if p == nil {
			t.Errorf("%s is not subscribed", c.queue)
			continue
		}
		equal(t, c.queue+" topic", render(p["TopicArn"]), "${"+topic+"}")
		equal(t, c.queue+" protocol", p["Protocol"], "sqs")
		equal(t, c.queue+" raw delivery", p["RawMessageDelivery"], true)
		equal(t, c.queue+" filter (the local stack's)", render(p["FilterPolicy"]), render(c.filter))
		equal(t, c.queue+" subscription DLQ", render(p["RedrivePolicy"]), `{"deadLetterTargetArn":{"Fn::GetAtt":["`+dlq+`","Arn"]}}`)
		// SNS may send to the queue and its DLQ, from this topic only.
		for _, target := range []string{q, dlq} {
			r.template.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), match(obj(map[string]any{
				"Queues": []any{map[string]any{"Ref": target}},
				"PolicyDocument": match(obj(map[string]any{"Statement": arrayW(&[]any{match(obj(map[string]any{
					"Effect":    "Allow",
					"Action":    "sqs:SendMessage",
					"Principal": map[string]any{"Service": "sns.amazonaws.com"},
					"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": map[string]any{"Ref": topic}}},
				}))})})),
			})))
		}
	}
	if webhooksMaxReceiveCount != 101 {
		t.Errorf("the webhooks queue's redrive count %d does not cover 24 h of 30 s doubling to 15 min (101)", webhooksMaxReceiveCount)
	}

	// The sweeper: EventBridge Scheduler, every minute, on the relay, with a
	// role of its own.
	relay := r.function(t, "relay")
	schedules := 0
	for _, s := range r.resources("AWS::Scheduler::Schedule") {
		p := s["Properties"].(map[string]any)
		if render(p["Target"].(map[string]any)["Arn"]) != "${"+relay+".Arn}" {
			continue // the ops function's (ops_test.go)
		}
		schedules++
		equal(t, "sweep every", p["ScheduleExpression"], "rate(1 minute)")
		target := p["Target"].(map[string]any)
		equal(t, "sweep target", render(target["Arn"]), "${"+relay+".Arn}")
		equal(t, "sweep role", render(target["RoleArn"]), "${"+r.logicalID(t, "AWS::IAM::Role", "RelaySweepSchedulerRole")+".Arn}")
		equal(t, "sweep retries", render(target["RetryPolicy"]), `{"MaximumEventAgeInSeconds":60,"MaximumRetryAttempts":0}`)
	}
	equal(t, "relay schedules", schedules, 1)

	// The Glue table: the consumer's columns, partitioned as the keys are.
	tables := r.resources("AWS::Glue::Table")
	equal(t, "tables", len(tables), 1)
	for _, tb := range tables {
		in := tb["Properties"].(map[string]any)["TableInput"].(map[string]any)
		sd := in["StorageDescriptor"].(map[string]any)
		var cols [][2]string
		for _, c := range asList(sd["Columns"]) {
			m := c.(map[string]any)
			cols = append(cols, [2]string{m["Name"].(string), m["Type"].(string)})
		}
		equal(t, "columns", cols, AnalyticsColumns)
		equal(t, "partition keys", render(in["PartitionKeys"]), `[{"Name":"retailer_id","Type":"string"},{"Name":"date","Type":"string"}]`)
		equal(t, "location", render(sd["Location"]), "s3://${"+r.logicalID(t, "AWS::S3::Bucket", "CatalogBucket")+"}/"+analytics.Prefix)
		params := in["Parameters"].(map[string]any)
		equal(t, "projection", params["projection.enabled"], "true")
		equal(t, "key template", render(params["storage.location.template"]),
			"s3://${"+r.logicalID(t, "AWS::S3::Bucket", "CatalogBucket")+"}/"+analytics.Prefix+"retailer_id=${retailer_id}/date=${date}/")
		if !strings.Contains(analytics.FileKey("r1", testDay, "b"), "retailer_id=r1/date=2026-12-01/") {
			t.Errorf("the consumer's keys no longer follow the table's template: %s", analytics.FileKey("r1", testDay, "b"))
		}
		equal(t, "serde", render(sd["SerdeInfo"]), `{"SerializationLibrary":"org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"}`)
	}
}

var testDay = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// TestAnalyticsColumnsAreTheFiles: the Glue table's columns are the Parquet
// schema of analytics.Row, retailer_id aside (a partition key).
func TestAnalyticsColumnsAreTheFiles(t *testing.T) {
	glueType := map[string]string{"string": "string", "*string": "string", "int64": "bigint", "time.Time": "timestamp"}
	var want [][2]string
	rt := reflect.TypeOf(analytics.Row{})
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		if name == "retailer_id" {
			continue
		}
		want = append(want, [2]string{name, glueType[f.Type.String()]})
	}
	equal(t, "columns", AnalyticsColumns, want)
	if message.AttrType != "type" {
		t.Errorf("the subscriptions filter on %q", message.AttrType)
	}
}
