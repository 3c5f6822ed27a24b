package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsschedulertargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// The operations function (DESIGN 9; functions/operate/ops): the admin routes an
// on-call engineer uses (why, reconcile, dlq, replay), the stuck-generation
// sweeper, the daily reconciliation and the daily collection, each started
// by EventBridge Scheduler, and the reconcile-jobs queue that spreads a
// reconciliation, and a collection (messages of kind "gc"), over the
// retailers. Its alarms, dashboard rows and saved Logs Insights
// queries are below; docs/RUNBOOK.md has a section for every alarm.

// Settings of the ops function and its schedules.
const (
	opsMemoryMB = 1024 // the reconciliation streams; a 1M-product walk peaks well below (docs/PERFORMANCE.md)
	// opsTimeout bounds one invocation: a retailer's reconciliation (5M
	// products hash in a few minutes), a sweep, or an admin route (API
	// Gateway gives up after 30 s; the function may finish).
	opsTimeout = 15 * time.Minute
	// opsConcurrency is reserved for the ops function: the reconcile-jobs
	// event source takes at most opsReconcileConcurrency of it, leaving the
	// rest to the admin routes and the schedules. Every environment may
	// hold dbConnsPerEnvironment connections to each shard writer.
	opsConcurrency          = 6
	opsReconcileConcurrency = 3
	// reconcileJobsMaxReceiveCount: a job retries itself twice and records
	// (a collection's: logs) a failure on its third receive
	// (ops.HandleSQS); only a crash or a timeout on every receive reaches
	// the DLQ.
	reconcileJobsMaxReceiveCount = 5
	// sweepStuckEvery is how often the stuck-generation sweeper runs.
	sweepStuckEvery = 5 * time.Minute
	// reconcileCron is when the daily reconciliation starts (UTC): after
	// the overnight upload peak has drained in the Americas and Europe.
	reconcileCron = "cron(0 11 * * ? *)"
	// gcCron is when the daily collection starts (UTC, DESIGN 14): after
	// the reconciliation, at the quietest hour of the uploads.
	gcCron = "cron(0 14 * * ? *)"
)

// Alarm thresholds of the operations metrics.
var (
	// putToAppliedP99 is the PutToAppliedSeconds p99 (over 15 minutes, two
	// periods running) that pages: a 5M-product retailer's snapshot is
	// applied within minutes, so half an hour at the 99th percentile means
	// work is waiting, not running.
	putToAppliedP99    = 30 * time.Minute
	putToAppliedPeriod = 15 * time.Minute
	// reconcileAlarmPeriod: the daily run's divergence and failures stay
	// visible for an hour.
	reconcileAlarmPeriod = time.Hour
)

// EnvQueueURLBase is the URL of the stack's queues without their names
// (functions/platform/config: the ops function's queues are the base and their names).
const EnvQueueURLBase = "CATALOG_QUEUE_URL_BASE"

// queueURLBase is https://sqs.<region>.<suffix>/<account>/<stack>-: every
// queue of the stack is named <stack>-<name>.
func queueURLBase(scope constructs.Construct) string {
	stack := awscdk.Stack_Of(scope)
	return *awscdk.Fn_Join(jsii.String(""), &[]*string{
		jsii.String("https://sqs."), stack.Region(), jsii.String("."), stack.UrlSuffix(), jsii.String("/"),
		stack.Account(), jsii.String("/" + *stack.StackName() + "-"),
	})
}

// opsResources are the ops function and what only it uses.
type opsResources struct {
	fn                      awslambda.Function
	reconcileJobs, jobsDLQ  awssqs.Queue
	schedulerRole           awsiam.Role
	sweepSchedule, reconcil awsscheduler.Schedule
	gcSchedule              awsscheduler.Schedule
	moves                   awsscheduler.Schedule
	queries                 []awslogs.CfnQueryDefinition
}

// newOps makes the reconcile-jobs queue (reconciliation's and the daily
// collection's jobs: one queue, one event source, so that the two share
// the ops function's connections to the shards), the ops function (arm64, in the
// app subnets, logged in to every database as catalog_ops), its schedules
// and its permissions, and adds it to f.
func newOps(scope constructs.Construct, d functionDeps, f *catalogFunctions) *opsResources {
	o := &opsResources{}
	q := d.queues
	stackName := *awscdk.Stack_Of(scope).StackName()
	o.jobsDLQ = standardQueue(scope, stackName, "ReconcileJobsDLQ", "reconcile-jobs-dlq", 0, dlqRetention, nil)
	o.reconcileJobs = standardQueue(scope, stackName, "ReconcileJobsQueue", "reconcile-jobs", visibilityFactor*opsTimeout, queueRetention,
		&awssqs.DeadLetterQueue{Queue: o.jobsDLQ, MaxReceiveCount: jsii.Number(reconcileJobsMaxReceiveCount)})
	q.dlqs["reconcile-jobs"] = o.jobsDLQ
	q.work["reconcile-jobs"] = o.reconcileJobs

	var readers []string
	for _, s := range d.dbs.shards {
		readers = append(readers, s.reader)
	}
	env := map[string]string{
		EnvBucket:             *d.store.bucket.BucketName(),
		EnvDiffQueueURL:       *q.diffJobs.QueueUrl(),
		EnvApplySmallQueueURL: *q.applySmall.QueueUrl(),
		EnvApplyLargeQueueURL: *q.applyLarge.QueueUrl(),
		EnvLargeThresholdRows: strconv.Itoa(d.params.LargeThresholdRows),
		EnvInflightCap:        strconv.Itoa(d.params.InflightCap),
		EnvDBMaxConns:         strconv.Itoa(dbConnsPerEnvironment),
		EnvAdminTokenSecret:   *d.adminSecret.SecretArn(),
		// why compares what the storefront's replicas serve with the writer.
		EnvShardReaders:  strings.Join(readers, ","),
		EnvControlReader: d.dbs.control.reader,
		// The other queues it reads or sends to, by name under one base
		// (functions/platform/config: deriveQueueURLs): every URL one by one would
		// not fit Lambda's 4 KB of environment at the most shards.
		EnvQueueURLBase: queueURLBase(scope),
	}
	// The writers directly (no proxy): the reconciliation streams each
	// retailer's rows in one consistent snapshot, which a proxy would pin.
	o.fn = newFunction(scope, d, fnSpec{
		id: "Ops", asset: "ops", memoryMB: opsMemoryMB, timeout: opsTimeout, reserved: opsConcurrency,
		dbRole:      catalogsql.RoleOps,
		description: "catalog ops: admin routes (why, reconcile, gc, moves, dlq, replay), the stuck-generation sweeper, the daily reconciliation and collection",
		env:         env,
	})
	f.ops = o.fn
	grantOps(d, o)

	o.fn.AddEventSource(awslambdaeventsources.NewSqsEventSource(o.reconcileJobs, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(1), // one retailer's walk per invocation
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(opsReconcileConcurrency),
	}))

	// The schedules: EventBridge Scheduler invokes the function with
	// {"ops_task": ...}; its role may invoke the ops function only.
	o.schedulerRole = awsiam.NewRole(scope, jsii.String("OpsSchedulerRole"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), nil),
		Description: jsii.String("EventBridge Scheduler: starts the ops function's scheduled tasks"),
	})
	schedule := func(id, description string, expr awsscheduler.ScheduleExpression, task string, maxAge time.Duration) awsscheduler.Schedule {
		return awsscheduler.NewSchedule(scope, jsii.String(id), &awsscheduler.ScheduleProps{
			Description: jsii.String(description),
			Schedule:    expr,
			Target: awsschedulertargets.NewLambdaInvoke(o.fn, &awsschedulertargets.ScheduleTargetBaseProps{
				Role:          o.schedulerRole,
				Input:         awsscheduler.ScheduleTargetInput_FromObject(map[string]any{"ops_task": task}),
				RetryAttempts: jsii.Number(2),
				MaxEventAge:   dur(maxAge),
			}),
		})
	}
	o.sweepSchedule = schedule("StuckSweepSchedule",
		"Starts the stuck-generation sweeper: re-drives generations without progress for 10 minutes (DESIGN 9)",
		awsscheduler.ScheduleExpression_Rate(dur(sweepStuckEvery)), ops.TaskSweep, sweepStuckEvery)
	o.reconcil = schedule("ReconcileSchedule",
		"Starts the daily reconciliation of every catalog against its newest applied snapshot (DESIGN 9)",
		awsscheduler.ScheduleExpression_Expression(jsii.String(reconcileCron), nil), ops.TaskReconcile, time.Hour)
	o.gcSchedule = schedule("CollectionSchedule",
		"Starts the daily collection of tombstones, directory entries, chunk progress and parked events of every retailer (DESIGN 14)",
		awsscheduler.ScheduleExpression_Expression(jsii.String(gcCron), nil), ops.TaskGC, time.Hour)
	// Moves between shards run in slices (ops.MoveSlice, within the
	// function's 15 minutes), each resuming from the move's checkpoint; an
	// invocation that finds a move held by another's lease leaves it.
	o.moves = schedule("MovesSchedule",
		"Runs the moves of retailers between shards from their checkpoints (DESIGN 14)",
		awsscheduler.ScheduleExpression_Rate(dur(time.Minute)), ops.TaskMoves, time.Minute)
	return o
}

// grantOps gives the ops function what its routes and tasks need.
func grantOps(d functionDeps, o *opsResources) {
	bucket := d.store.bucket
	objects := func(prefix string) string { return *bucket.ArnForObjects(jsii.String(prefix + "*")) }
	role := o.fn.Role()
	// why and reconcile read the uploads (their size, the snapshot's values
	// of divergent rows) and the indexes; the sweeper re-sends chunks from
	// their objects; a repair writes its change object under chunks/.
	role.AddToPrincipalPolicy(newStatement("ReadUploadsAndIndexes", []string{"s3:GetObject"},
		[]string{objects(prefixSnapshots), objects(prefixIndexes)}))
	role.AddToPrincipalPolicy(newStatement("ReadChunksWriteRepairs", []string{"s3:GetObject", "s3:PutObject"},
		[]string{objects(prefixChunks)}))
	listPrefixes(role, bucket, prefixSnapshots, prefixIndexes, prefixChunks)

	// The sweeper re-drives into the pipeline's queues, dlq redrive moves
	// dead letters back to their queues, and a reconciliation sends its
	// jobs: send to every work queue; read (without consuming, but a
	// redrive deletes what it moved) every dead-letter queue.
	q := d.queues
	for _, name := range sortedKeys(q.work) {
		q.work[name].GrantSendMessages(o.fn)
	}
	for _, name := range sortedKeys(q.dlqs) {
		q.dlqs[name].GrantConsumeMessages(o.fn)
	}
	d.adminSecret.GrantRead(role, nil)
}

// addOpsMonitoring adds the operations alarms (DESIGN 9: stuck generations,
// reconciliation divergence and failures, PUT-to-applied p99, the
// sweeper not running; DESIGN 8: parked change events), the dashboard rows of issue 12 (ingestion funnel,
// PUT-to-applied p50/p99, DLQ depths, divergence, stuck) and the saved
// CloudWatch Logs Insights queries the runbook uses.
func addOpsMonitoring(scope constructs.Construct, stackName string, m *monitoring, q *queues, fns *catalogFunctions, o *opsResources) {
	metric := func(name, stat string, period time.Duration) awscloudwatch.Metric {
		return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(metrics.DefaultNamespace), MetricName: jsii.String(name),
			Period: dur(period), Statistic: jsii.String(stat),
		})
	}
	add := func(id, description string, mt awscloudwatch.IMetric, threshold float64, periods int, missing awscloudwatch.TreatMissingData) {
		m.opsAlarms = append(m.opsAlarms, m.addAlarm(scope, id, stackName+": "+description, mt, threshold, periods, missing))
	}
	// The sweeper records GenerationsStuck on every run, zero included: no
	// data for three of its periods means it does not run.
	add("GenerationsStuckAlarm", "an offboarding is still stuck after the sweeper's 3 re-drives (any other generation "+
		"ends rejected), or the sweeper does not run "+
		"(no data); `catalogctl why R` names it (docs/RUNBOOK.md)",
		metric(metrics.GenerationsStuck, "Maximum", 3*sweepStuckEvery), 1, 1, awscloudwatch.TreatMissingData_BREACHING)
	add("GenerationsFailedAlarm", "the pipeline could not finish a generation (diff_failed, apply_failed): it was rejected "+
		"and the catalog returned to the last applied generation; `catalogctl why R` says why (docs/RUNBOOK.md)",
		metric(metrics.GenerationsFailed, "Sum", alarmPeriod), 1, 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	add("ReconcileDivergenceAlarm", "reconciliation found a catalog that differs from its newest applied snapshot; "+
		"`catalogctl reconcile --run RUN` lists them, --repair fixes them (docs/RUNBOOK.md)",
		metric(metrics.ReconcileDivergentRetailers, "Sum", reconcileAlarmPeriod), 1, 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	add("ReconcileFailuresAlarm", "reconciliation could not check a retailer after its retries (docs/RUNBOOK.md)",
		metric(metrics.ReconcileFailures, "Sum", reconcileAlarmPeriod), 1, 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	// The relay's sweeper records OutboxParked on every run (OutboxAgeAlarm
	// covers a sweeper that does not run).
	add("OutboxParkedAlarm", "a change event is parked in an outbox: it cannot be published (refused by SNS, over "+
		"the envelope bound, or failed 5 times); its consumers miss it until `catalogctl dlq redrive outbox` (docs/RUNBOOK.md)",
		metric(metrics.OutboxParked, "Maximum", alarmPeriod), 1, 1, awscloudwatch.TreatMissingData_NOT_BREACHING)
	add("PutToAppliedP99Alarm", fmt.Sprintf("the 99th percentile from upload to applied is over %s; uploads wait "+
		"(docs/RUNBOOK.md)", putToAppliedP99),
		metric(metrics.PutToAppliedSeconds, "p99", putToAppliedPeriod), putToAppliedP99.Seconds(), 2, awscloudwatch.TreatMissingData_NOT_BREACHING)

	m.dashboard.AddWidgets(opsDashboardRows(q, m.opsAlarms, metric)...)
	o.queries = newOpsQueries(scope, stackName, fns)
}

// opsDashboardRows are the dashboard rows of issue 12.
func opsDashboardRows(q *queues, alarms []awscloudwatch.Alarm, metric func(name, stat string, period time.Duration) awscloudwatch.Metric) []awscloudwatch.IWidget {
	minute := time.Minute
	graph := func(title string, width int, ms ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Width: jsii.Number(float64(width)), Height: jsii.Number(6), Left: &ms,
		})
	}
	labelled := func(name, stat, label string, period time.Duration) awscloudwatch.IMetric {
		return metric(name, stat, period).With(&awscloudwatch.MetricOptions{Label: jsii.String(label)})
	}
	hour := time.Hour
	funnel := []awscloudwatch.IMetric{
		labelled(metrics.UploadsReserved, "Sum", "reserved", hour),
		labelled(metrics.UploadsReceived, "Sum", "received", hour),
	}
	for _, state := range []string{"applied", "rejected", "held", "superseded", "expired"} {
		funnel = append(funnel, awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(metrics.DefaultNamespace), MetricName: jsii.String(metrics.Uploads),
			DimensionsMap: &map[string]*string{"State": jsii.String(state)},
			Period:        dur(hour), Statistic: jsii.String("Sum"), Label: jsii.String(state),
		}))
	}
	var dlq []awscloudwatch.IMetric
	for _, name := range sortedKeys(q.dlqs) {
		dlq = append(dlq, q.dlqs[name].MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Period: dur(minute), Statistic: jsii.String("Maximum"), Label: jsii.String(name + "-dlq"),
		}))
	}
	var refs []interfacesawscloudwatch.IAlarmRef
	for _, a := range alarms {
		refs = append(refs, a)
	}
	return []awscloudwatch.IWidget{
		awscloudwatch.NewTextWidget(&awscloudwatch.TextWidgetProps{
			Markdown: jsii.String("## Operations\nWhat each alarm means and what to do: docs/RUNBOOK.md. " +
				"Trace an upload: Logs Insights, saved queries under *catalog/*."),
			Width: jsii.Number(24), Height: jsii.Number(2),
		}),
		awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
			Title: jsii.String("Operations alarms"), Alarms: &refs, Width: jsii.Number(24), Height: jsii.Number(3),
		}),
		graph("Ingestion funnel (uploads per hour)", 12, funnel...),
		graph("PUT to applied (s)", 12,
			labelled(metrics.PutToAppliedSeconds, "p50", "p50", 5*minute),
			labelled(metrics.PutToAppliedSeconds, "p99", "p99", 5*minute)),
		graph("Dead-letter queue depths", 8, dlq...),
		graph("Reconciliation: divergent retailers and products, failures", 8,
			labelled(metrics.ReconcileDivergentRetailers, "Sum", "divergent retailers", hour),
			labelled(metrics.ReconcileDivergentProducts, "Sum", "divergent products", hour),
			labelled(metrics.ReconcileRepairedProducts, "Sum", "repaired products", hour),
			labelled(metrics.ReconcileFailures, "Sum", "retailers not checked", hour)),
		graph("Stuck generations", 8,
			labelled(metrics.GenerationsStuck, "Maximum", "stuck (after every re-drive)", 5*minute),
			labelled(metrics.GenerationsRedriven, "Sum", "re-driven", 5*minute)),
	}
}

// Saved CloudWatch Logs Insights queries (catalog/... in the console): the
// questions docs/RUNBOOK.md asks of the logs. Every function logs JSON with
// retailer_id and generation (and its request ids); the metric lines carry
// the same properties.
var opsQueries = []struct {
	name, query string
}{
	{"trace-retailer-generation", `# Every line of one upload, all functions, in order: replace R and G.
fields @timestamp, function, level, msg, state, err, request_id, api_request_id
| filter retailer_id = "R" and generation = G
| sort @timestamp asc
| limit 1000`},
	{"retailer-errors", `# A retailer's errors and warnings, newest first: replace R.
fields @timestamp, function, generation, msg, err, request_id
| filter retailer_id = "R" and level in ["ERROR", "WARN"]
| sort @timestamp desc
| limit 200`},
	{"request", `# One request's lines (X-Request-Id of an answer, or a Lambda request id): replace ID.
fields @timestamp, function, level, msg, retailer_id, generation, err
| filter api_request_id = "ID" or request_id = "ID"
| sort @timestamp asc`},
	{"stuck-and-redriven", `# The sweeper's re-drives and the generations it gave up on.
fields @timestamp, retailer_id, generation, state, action, redrives, idle_s, msg
| filter function = "ops" and msg like /re-drive/
| sort @timestamp desc
| limit 200`},
	{"failures-by-function", `# Errors per function and message, last period: where to look first.
filter level = "ERROR"
| stats count(*) as errors by function, msg
| sort errors desc`},
	{"reconcile-runs", `# Reconciliation: divergent retailers and failed checks: replace RUN (or drop the run filter).
fields @timestamp, run_id, retailer_id, generation, missing, extra, different, repaired, err, msg
| filter function = "ops" and (msg = "retailer reconciled" or msg = "reconcile job failed") and run_id like /RUN/
| filter missing > 0 or extra > 0 or different > 0 or ispresent(err)
| sort @timestamp desc
| limit 500`},
	{"slowest-uploads", `# The slowest uploads from arrival to applied (the PUT-to-applied alarm): metric lines of apply.
filter ispresent(PutToAppliedSeconds)
| fields @timestamp, retailer_id, generation, PutToAppliedSeconds
| sort PutToAppliedSeconds desc
| limit 50`},
}

// OpsQueryNames are the saved queries' names, as the console lists them.
func OpsQueryNames() []string {
	var out []string
	for _, q := range opsQueries {
		out = append(out, "catalog/"+q.name)
	}
	return out
}

func newOpsQueries(scope constructs.Construct, stackName string, fns *catalogFunctions) []awslogs.CfnQueryDefinition {
	var groups []any
	byName := fns.byName()
	for _, name := range sortedKeys(byName) {
		groups = append(groups, byName[name].LogGroup().LogGroupName())
	}
	var out []awslogs.CfnQueryDefinition
	for _, q := range opsQueries {
		out = append(out, awslogs.NewCfnQueryDefinition(scope, jsii.String("Query"+camel(q.name)), &awslogs.CfnQueryDefinitionProps{
			Name:          jsii.String(stackName + "/catalog/" + q.name),
			QueryString:   jsii.String(q.query),
			LogGroupNames: &groups,
		}))
	}
	return out
}

// addOpsNagSuppressions records why the ops function's and its schedules'
// findings are accepted, each naming the exact finding.
func addOpsNagSuppressions(r nagRefs, o *opsResources) {
	objects := r.objects
	cdknag.NagSuppressions_AddResourceSuppressions(o.fn.Role(), &[]*cdknag.NagPackSuppression{
		suppress("AwsSolutions-IAM5", "Lambda functions in a VPC need ec2:CreateNetworkInterface, DescribeNetworkInterfaces, "+
			"DescribeSubnets, DeleteNetworkInterface, Assign/UnassignPrivateIpAddresses; the Describe actions support no "+
			"resource-level permissions. This statement replaces the broader AWS managed AWSLambdaVPCAccessExecutionRole.",
			"Resource::*"),
		suppress("AwsSolutions-IAM5", "ops (why, reconciliation) reads the upload and the index of any retailer's "+
			"generation: s3:GetObject only, under snapshots/ and indexes/.", objects(prefixSnapshots), objects(prefixIndexes)),
		suppress("AwsSolutions-IAM5", "the sweeper sends chunks again from their objects, chunks/{retailer}/{generation}/{seq}, "+
			"and a repair writes its change object beside them (chunks/{retailer}/{generation}/repair-{run}-{n}): "+
			"GetObject and PutObject only, under chunks/.", objects(prefixChunks)),
	}, jsii.Bool(true))
	cdknag.NagSuppressions_AddResourceSuppressions(o.schedulerRole, &[]*cdknag.NagPackSuppression{
		r.grantInvokeSuppression(o.fn, "the schedules invoke the ops function only."),
	}, jsii.Bool(true))
}
