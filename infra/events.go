package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsglue"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsschedulertargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// Change events on AWS (DESIGN 2 row 9, DESIGN 8; docs/ARCHITECTURE.md,
// "Change events"): the relay's sweeper on a schedule, one queue per
// consumer subscribed to the change-events topic with raw message delivery
// and a filter on the event type, each with its dead-letter queue, the
// consumer functions, and the Glue table over the analytics files.

// Settings of the change-event functions and queues.
const (
	relayMemoryMB     = 512
	analyticsMemoryMB = 1024 // a batch of 100 change objects, each up to a chunk
	webhooksMemoryMB  = 256
	senderMemoryMB    = 256
	relayTimeout      = time.Minute      // a sweep stops taking new work after 50 s (relay.Config.SweepBudget)
	analyticsTimeout  = 2 * time.Minute  // reads up to 100 change objects, writes a file per retailer and day
	webhooksTimeout   = time.Minute      // up to 10 deliveries at once, each answered within 10 s
	senderTimeout     = 15 * time.Second // one delivery: 10 s for the receiver, and the start
	// Reserved concurrency, the event sources' maximum concurrency with
	// it; every environment may hold dbConnsPerEnvironment connections to
	// each shard writer (Params.WriterConnections counts them). The
	// sweeper runs once a minute: a second environment covers a run that
	// overlaps the next.
	relayConcurrency     = 2
	analyticsConcurrency = 4
	webhooksConcurrency  = 4
	// senderConcurrency: each webhooks environment hands its batch's
	// deliveries on at once.
	senderConcurrency    = webhooksConcurrency * webhooksBatchSize
	analyticsBatchSize   = 100              // events per invocation (stack.AnalyticsBatch locally)
	analyticsBatchWindow = 20 * time.Second // files within 30 s of the commit (DESIGN 8)
	webhooksBatchSize    = 10
	// sweepEvery is how often EventBridge Scheduler starts the sweeper.
	sweepEvery = time.Minute
	// analyticsMaxReceiveCount: a change that fails five times (with the
	// backoff, over about 8 minutes) is parked for an operator.
	analyticsMaxReceiveCount = 5
	// webhookRetryWindow is how long a failing delivery is retried before
	// its DLQ (DESIGN 8: at least 24 h; CATALOG_WEBHOOK_RETRY_WINDOW).
	webhookRetryWindow = 24 * time.Hour
	// analyticsTieringDays: Parquet files move to S3 Intelligent-Tiering
	// after this many days (a warehouse reads the recent days most); they
	// are never expired by the stack: the feed is the warehouse's history.
	analyticsTieringDays = 30
	prefixAnalytics      = "analytics/"
)

// webhooksMaxReceiveCount is the webhooks queue's redrive count: the
// deliveries the retry schedule makes within webhookRetryWindow (101 with
// the 30 s base doubling to 15 min), so the DLQ gets a message only after
// the whole schedule.
var webhooksMaxReceiveCount = retry.Schedule{Base: retry.DefaultBase}.Receives(webhookRetryWindow)

// Environment variables of the change-event functions.
const (
	EnvAnalyticsQueueURL = "CATALOG_ANALYTICS_QUEUE_URL"
	EnvWebhooksQueueURL  = "CATALOG_WEBHOOKS_QUEUE_URL"
	EnvWebhookKeys       = "CATALOG_WEBHOOK_KEYS"
	EnvWebhookSender     = "CATALOG_WEBHOOK_SENDER"
)

// eventQueues are the consumers' queues and their dead-letter queues.
type eventQueues struct {
	analytics, analyticsDLQ awssqs.Queue
	webhooks, webhooksDLQ   awssqs.Queue
}

// newEventQueues makes the consumers' queues and subscribes each to the
// topic: raw message delivery (the queue holds the envelope as published,
// its type and retailer as message attributes), a filter on the event
// type, and the queue's DLQ as the subscription's too (a message SNS
// cannot deliver is parked where the operator looks: catalogctl dlq list).
func newEventQueues(scope constructs.Construct, stackName string, q *queues, changes awssns.ITopic) *eventQueues {
	e := &eventQueues{}
	e.analyticsDLQ = standardQueue(scope, stackName, "AnalyticsDLQ", "analytics-dlq", 0, dlqRetention, nil)
	e.analytics = standardQueue(scope, stackName, "AnalyticsQueue", "analytics", visibilityFactor*analyticsTimeout, queueRetention,
		&awssqs.DeadLetterQueue{Queue: e.analyticsDLQ, MaxReceiveCount: jsii.Number(analyticsMaxReceiveCount)})
	e.webhooksDLQ = standardQueue(scope, stackName, "WebhooksDLQ", "webhooks-dlq", 0, dlqRetention, nil)
	e.webhooks = standardQueue(scope, stackName, "WebhooksQueue", "webhooks", visibilityFactor*webhooksTimeout, queueRetention,
		&awssqs.DeadLetterQueue{Queue: e.webhooksDLQ, MaxReceiveCount: jsii.Number(float64(webhooksMaxReceiveCount))})

	// The filters of the local stack (stack.AnalyticsFilter, WebhooksFilter).
	changes.AddSubscription(awssnssubscriptions.NewSqsSubscription(e.analytics, &awssnssubscriptions.SqsSubscriptionProps{
		RawMessageDelivery: jsii.Bool(true),
		DeadLetterQueue:    e.analyticsDLQ,
		FilterPolicy: &map[string]awssns.SubscriptionFilter{
			message.AttrType: awssns.SubscriptionFilter_StringFilter(&awssns.StringConditions{Allowlist: jsii.Strings(message.TypeChanges)}),
		},
	}))
	changes.AddSubscription(awssnssubscriptions.NewSqsSubscription(e.webhooks, &awssnssubscriptions.SqsSubscriptionProps{
		RawMessageDelivery: jsii.Bool(true),
		DeadLetterQueue:    e.webhooksDLQ,
		FilterPolicy: &map[string]awssns.SubscriptionFilter{
			message.AttrType: awssns.SubscriptionFilter_StringFilter(&awssns.StringConditions{MatchPrefixes: jsii.Strings(message.SnapshotTypePrefix)}),
		},
	}))

	q.dlqs["analytics"], q.work["analytics"] = e.analyticsDLQ, e.analytics
	q.dlqs["webhooks"], q.work["webhooks"] = e.webhooksDLQ, e.webhooks
	return e
}

// newWebhookKeysSecret is the key that seals the retailers' webhook
// secrets (webhook.SecretBox; docs/ARCHITECTURE.md, "Webhooks"): 64
// random letters and digits, a passphrase whose SHA-256 is the AES-256
// key. Rotation: put "<new passphrase>,<old passphrase>" (the first seals,
// every one opens).
func newWebhookKeysSecret(scope constructs.Construct, stackName string) awssecretsmanager.Secret {
	return awssecretsmanager.NewSecret(scope, jsii.String("WebhookKeysSecret"), &awssecretsmanager.SecretProps{
		SecretName:  jsii.String(stackName + "/webhook-keys"),
		Description: jsii.String("Catalog webhook keys: seal the retailers' webhook signing secrets (comma-separated, the first seals)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(64),
			ExcludePunctuation: jsii.Bool(true),
			IncludeSpace:       jsii.Bool(false),
		},
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN, // losing it loses every saved webhook secret
	})
}

// newEventFunctions makes the relay (its sweeper started every minute by
// EventBridge Scheduler) and the analytics and webhooks consumers, and
// gives them, and the apply and diff functions whose fast path publishes
// right after each commit, what publishing takes.
func newEventFunctions(scope constructs.Construct, d functionDeps, f *catalogFunctions) {
	bucket := d.store.bucket
	common := map[string]string{EnvDBMaxConns: strconv.Itoa(dbConnsPerEnvironment)}
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for _, m := range []map[string]string{common, extra} {
			for k, v := range m {
				env[k] = v
			}
		}
		return env
	}
	keys := "secret:" + *d.webhookKeys.SecretArn()

	f.relay = newFunction(scope, d, fnSpec{
		id: "Relay", asset: "relay", memoryMB: relayMemoryMB, timeout: relayTimeout, reserved: relayConcurrency,
		dbRole:      catalogsql.RoleRelay,
		description: "catalog relay: publishes the outbox rows older than 30 s to the change-events topic (every minute)",
		env:         with(map[string]string{EnvBucket: *bucket.BucketName(), EnvChangeTopicARN: *d.changeTopic.TopicArn()}),
	})
	f.analytics = newFunction(scope, d, fnSpec{
		id: "Analytics", asset: "analytics", memoryMB: analyticsMemoryMB, timeout: analyticsTimeout, reserved: analyticsConcurrency,
		dbRole:      catalogsql.RoleConsumers,
		description: "catalog analytics: change events to Parquet under analytics/changes/ (analytics queue)",
		env:         with(map[string]string{EnvBucket: *bucket.BucketName(), EnvAnalyticsQueueURL: *d.events.analytics.QueueUrl()}),
	})
	// The webhooks consumer signs in the VPC; the sender, outside it,
	// makes each POST (no database, no secret, no way into the VPC).
	f.webhookSender = newFunction(scope, d, fnSpec{
		id: "WebhookSender", asset: "webhooksend", memoryMB: senderMemoryMB, timeout: senderTimeout, reserved: senderConcurrency,
		outsideVPC:  true,
		description: "catalog webhook-sender: makes one signed webhook POST for the webhooks function, outside the VPC",
		env:         map[string]string{},
	})
	f.webhooks = newFunction(scope, d, fnSpec{
		id: "Webhooks", asset: "webhooks", memoryMB: webhooksMemoryMB, timeout: webhooksTimeout, reserved: webhooksConcurrency,
		dbRole:      catalogsql.RoleConsumers,
		description: "catalog webhooks: signed POSTs of upload outcomes to the retailers' webhooks (webhooks queue)",
		env: with(map[string]string{EnvWebhooksQueueURL: *d.events.webhooks.QueueUrl(), EnvWebhookKeys: keys,
			EnvWebhookSender: *f.webhookSender.FunctionName()}),
	})
	f.webhooks.Role().AddToPrincipalPolicy(newStatement("InvokeWebhookSender", []string{"lambda:InvokeFunction"},
		[]string{*f.webhookSender.FunctionArn()}))
	f.upload.AddEnvironment(jsii.String(EnvWebhookKeys), jsii.String(keys), nil)
	d.webhookKeys.GrantRead(f.upload.Role(), nil)
	d.webhookKeys.GrantRead(f.webhooks.Role(), nil)

	// Publishing (the sweeper, and the fast path in apply and diff): the
	// topic and its key; the chunk objects read, the change objects written
	// (a chunk with ops that changed nothing) and looked for (a replay),
	// with ListBucket on both prefixes so that a missing object is a 404.
	for _, fn := range []awslambda.Function{f.relay, f.applySmall, f.applyLarge, f.diff} {
		d.changeTopic.GrantPublish(fn)
	}
	s3 := func(fn awslambda.Function, sid string, actions []string, prefixes ...string) {
		var resources []string
		for _, p := range prefixes {
			resources = append(resources, *bucket.ArnForObjects(jsii.String(p + "*")))
		}
		fn.Role().AddToPrincipalPolicy(newStatement(sid, actions, resources))
	}
	s3(f.relay, "ReadChunks", []string{"s3:GetObject"}, prefixChunks)
	s3(f.relay, "ReadWriteChangeObjects", []string{"s3:GetObject", "s3:PutObject"}, prefixChanges)
	listPrefixes(f.relay.Role(), bucket, prefixChunks, prefixChanges)
	for _, fn := range []awslambda.Function{f.applySmall, f.applyLarge, f.diff} {
		s3(fn, "ReadWriteChangeObjects", []string{"s3:GetObject", "s3:PutObject"}, prefixChanges)
	}
	s3(f.diff, "ReadChunks", []string{"s3:GetObject"}, prefixChunks)

	// analytics reads the change objects its events name (chunk objects or
	// change objects) and writes the Parquet files.
	s3(f.analytics, "ReadChangeObjects", []string{"s3:GetObject"}, prefixChunks, prefixChanges)
	s3(f.analytics, "WriteAnalytics", []string{"s3:PutObject"}, analytics.Prefix)

	// The sweeper: every minute, no retry (the next run is a minute away),
	// no older than a minute. The schedule's role may invoke the relay only.
	f.relaySchedulerRole = awsiam.NewRole(scope, jsii.String("RelaySweepSchedulerRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), nil),
		Description: jsii.String("EventBridge Scheduler: starts the relay's sweeper"),
	})
	awsscheduler.NewSchedule(scope, jsii.String("RelaySweepSchedule"), &awsscheduler.ScheduleProps{
		Description: jsii.String("Starts the relay's sweeper: outbox rows older than 30 s to the change-events topic (DESIGN 8)"),
		Schedule:    awsscheduler.ScheduleExpression_Rate(dur(sweepEvery)),
		Target: awsschedulertargets.NewLambdaInvoke(f.relay, &awsschedulertargets.ScheduleTargetBaseProps{
			Role:          f.relaySchedulerRole,
			RetryAttempts: jsii.Number(0),
			MaxEventAge:   dur(sweepEvery),
		}),
	})

	f.analytics.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.events.analytics, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(analyticsBatchSize),
		MaxBatchingWindow:       dur(analyticsBatchWindow),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(analyticsConcurrency),
	}))
	f.webhooks.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.events.webhooks, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(webhooksBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(webhooksConcurrency),
	}))
}

// analyticsTieringRule moves the analytics files to Intelligent-Tiering.
func analyticsTieringRule() *awss3.LifecycleRule {
	return &awss3.LifecycleRule{
		Id:     jsii.String("tier-analytics"),
		Prefix: jsii.String(prefixAnalytics),
		Transitions: &[]*awss3.Transition{{
			StorageClass:    awss3.StorageClass_INTELLIGENT_TIERING(),
			TransitionAfter: awscdk.Duration_Days(jsii.Number(analyticsTieringDays)),
		}},
	}
}

// AnalyticsColumns are the Glue table's columns, in the files' order
// (analytics.Row); retailer_id, also in the files, is a partition key.
var AnalyticsColumns = [][2]string{
	{"product_id", "string"}, {"generation", "bigint"}, {"op", "string"},
	{"attributes", "string"}, {"hash", "string"}, {"applied_at", "timestamp"},
}

// glueName is a Glue database or table name made of a stack name: lower
// case, underscores.
func glueName(s string) string { return strings.ToLower(strings.ReplaceAll(s, "-", "_")) }

// newAnalyticsTable is the Glue database and table over the Parquet files
// for Athena (docs/DEPLOY.md, "Analytics"): partitioned by retailer_id and
// date as the keys are, with partition projection, so that a file is
// queryable the moment it is written (no crawler, no MSCK REPAIR).
// retailer_id is injected: a query names the retailers it reads
// (WHERE retailer_id = 'r1', or IN (...)).
func newAnalyticsTable(scope constructs.Construct, stackName string, bucket awss3.IBucket) (database, table string) {
	database = glueName(stackName) + "_analytics"
	account := awscdk.Stack_Of(scope).Account()
	db := awsglue.NewCfnDatabase(scope, jsii.String("AnalyticsDatabase"), &awsglue.CfnDatabaseProps{
		CatalogId: account,
		DatabaseInput: &awsglue.CfnDatabase_DatabaseInputProperty{
			Name:        jsii.String(database),
			Description: jsii.String("Catalog change events for Athena (DESIGN 8)"),
		},
	})
	var columns []any
	for _, c := range AnalyticsColumns {
		columns = append(columns, &awsglue.CfnTable_ColumnProperty{Name: jsii.String(c[0]), Type: jsii.String(c[1])})
	}
	location := "s3://" + *bucket.BucketName() + "/" + analytics.Prefix
	t := awsglue.NewCfnTable(scope, jsii.String("AnalyticsTable"), &awsglue.CfnTableProps{
		CatalogId:    account,
		DatabaseName: jsii.String(database),
		TableInput: &awsglue.CfnTable_TableInputProperty{
			Name:        jsii.String("catalog_changes"),
			Description: jsii.String("Every committed change: the latest row per (retailer_id, product_id) by generation is the catalog; op = 'delete' rows are deletes"),
			TableType:   jsii.String("EXTERNAL_TABLE"),
			PartitionKeys: &[]any{
				&awsglue.CfnTable_ColumnProperty{Name: jsii.String("retailer_id"), Type: jsii.String("string")},
				&awsglue.CfnTable_ColumnProperty{Name: jsii.String("date"), Type: jsii.String("string")},
			},
			Parameters: &map[string]any{
				"classification":                "parquet",
				"parquet.compression":           "SNAPPY",
				"projection.enabled":            "true",
				"projection.retailer_id.type":   "injected",
				"projection.date.type":          "date",
				"projection.date.format":        "yyyy-MM-dd",
				"projection.date.range":         "2024-01-01,NOW",
				"projection.date.interval":      "1",
				"projection.date.interval.unit": "DAYS",
				"storage.location.template":     location + "retailer_id=${retailer_id}/date=${date}/",
				"has_encrypted_data":            "false",
				"EXTERNAL":                      "TRUE",
			},
			StorageDescriptor: &awsglue.CfnTable_StorageDescriptorProperty{
				Columns:      &columns,
				Location:     jsii.String(location),
				InputFormat:  jsii.String("org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"),
				OutputFormat: jsii.String("org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"),
				SerdeInfo: &awsglue.CfnTable_SerdeInfoProperty{
					SerializationLibrary: jsii.String("org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"),
				},
			},
		},
	})
	t.Node().AddDependency(db)
	return database, "catalog_changes"
}

// newStatement is an Allow statement.
func newStatement(sid string, actions, resources []string) awsiam.PolicyStatement {
	return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Actions:   jsii.Strings(actions...),
		Resources: jsii.Strings(resources...),
	})
}

// listPrefixes lets role list the bucket under the prefixes only: a
// missing key then answers 404 instead of 403, and nothing else of the
// bucket can be listed.
func listPrefixes(role awsiam.IRole, bucket awss3.IBucket, prefixes ...string) {
	var like []any
	for _, p := range prefixes {
		like = append(like, p+"*")
	}
	role.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("ListOwnPrefixes"),
		Actions:    jsii.Strings("s3:ListBucket"),
		Resources:  jsii.Strings(*bucket.BucketArn()),
		Conditions: &map[string]any{"StringLike": map[string]any{"s3:prefix": like}},
	}))
}
