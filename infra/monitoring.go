package main

import (
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/interfaces/interfacesawscloudwatch"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/functions/platform/metrics"
)

// Alarm thresholds. They page before a retailer notices: an upload is
// normally applied within minutes, so a job waiting a quarter of an hour is
// already news.
var (
	// oldestMessageAge is the ApproximateAgeOfOldestMessage threshold per
	// work queue.
	oldestMessageAge = map[string]time.Duration{
		"arrivals":    5 * time.Minute,
		"diff-jobs":   15 * time.Minute,
		"apply-small": 10 * time.Minute,
		"apply-large": 30 * time.Minute,
		// A change reaches its file within seconds; a failing one is
		// retried over about 8 minutes before its DLQ.
		"analytics": 15 * time.Minute,
		// A retailer's receiver that fails is retried for 24 h: 6 h of it
		// is worth a look (catalogctl dlq list webhooks shows nothing yet;
		// the function's logs name the retailer and the URL).
		"webhooks": 6 * time.Hour,
		// The daily reconciliation queues a job per retailer: 100,000
		// retailers take hours at its concurrency (infra/ops.go).
		"reconcile-jobs": 6 * time.Hour,
	}
	// functionErrorThreshold is the Errors sum per 5 minutes per function.
	// The pipeline functions report item failures themselves: an
	// invocation error there means a crash or a timeout.
	functionErrorThreshold = map[string]float64{
		"upload": 5, "read": 10, "arrival": 1, "diff": 1, "apply-small": 1, "apply-large": 1,
		"relay": 1, "analytics": 1, "webhooks": 1, "webhook-sender": 1, "ops": 1,
	}
	// outboxAge is the OutboxAgeSeconds threshold: the sweeper publishes
	// every event within 90 s of its commit (30 s old, every minute), so
	// 5 minutes means it cannot (SNS, S3 or a shard failing); no data at
	// all means the sweeper does not run, which alarms too.
	outboxAge = 5 * time.Minute
	// apiServerErrorThreshold is the HTTP API 5xx count per 5 minutes.
	apiServerErrorThreshold = 10.0
	// acuUtilizationPercent is the Serverless v2 ACUUtilization threshold
	// (per cluster, 15 minutes): the cluster is at its maximum capacity.
	acuUtilizationPercent = 90.0
)

const alarmPeriod = 5 * time.Minute

// monitoring is every alarm and the dashboard.
type monitoring struct {
	alarms []awscloudwatch.Alarm
	// opsAlarms are the operations alarms of ops.go (also in alarms).
	opsAlarms []awscloudwatch.Alarm
	dashboard awscloudwatch.Dashboard
	// action notifies the alarm topic; every alarm has it on ALARM and OK.
	action awscloudwatch.IAlarmAction
}

// addAlarm makes an alarm on metric at threshold or above for periods
// periods running (no data as missing says), notifying the alarm topic on
// ALARM and on OK, and adds it to m.alarms.
func (m *monitoring) addAlarm(scope constructs.Construct, id, description string, metric awscloudwatch.IMetric, threshold float64, periods int, missing awscloudwatch.TreatMissingData) awscloudwatch.Alarm {
	alarm := awscloudwatch.NewAlarm(scope, jsii.String(id), &awscloudwatch.AlarmProps{
		Metric:             metric,
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(float64(periods)),
		DatapointsToAlarm:  jsii.Number(float64(periods)),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   missing,
		AlarmDescription:   jsii.String(description),
	})
	alarm.AddAlarmAction(m.action)
	alarm.AddOkAction(m.action)
	m.alarms = append(m.alarms, alarm)
	return alarm
}

func newMonitoring(scope constructs.Construct, stackName string, q *queues, fns *catalogFunctions, a *api, dbs *databases, topic awssns.ITopic) *monitoring {
	m := &monitoring{action: awscloudwatchactions.NewSnsAction(topic)}
	add := func(id, description string, metric awscloudwatch.IMetric, threshold float64, periods int) awscloudwatch.Alarm {
		return m.addAlarm(scope, id, description, metric, threshold, periods, awscloudwatch.TreatMissingData_NOT_BREACHING)
	}
	period := func(stat string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: dur(alarmPeriod), Statistic: jsii.String(stat)}
	}

	for _, name := range sortedKeys(q.dlqs) {
		add(camel(name)+"DlqDepthAlarm",
			fmt.Sprintf("%s: messages in the %s dead-letter queue; inspect and redrive (docs/DEPLOY.md)", stackName, name),
			q.dlqs[name].MetricApproximateNumberOfMessagesVisible(period("Maximum")), 1, 1)
	}
	for _, name := range sortedKeys(q.work) {
		age := oldestMessageAge[name]
		add(camel(name)+"OldestMessageAlarm",
			fmt.Sprintf("%s: the oldest %s message is over %s old; uploads are not being applied in time", stackName, name, age),
			q.work[name].MetricApproximateAgeOfOldestMessage(period("Maximum")), age.Seconds(), 1)
	}
	byName := fns.byName()
	for _, name := range sortedKeys(byName) {
		fn := byName[name]
		add(camel(name)+"ErrorsAlarm",
			fmt.Sprintf("%s: %s function errors (crashes, timeouts)", stackName, name),
			fn.MetricErrors(period("Sum")), functionErrorThreshold[name], 1)
		add(camel(name)+"ThrottlesAlarm",
			fmt.Sprintf("%s: %s function throttled; raise its concurrency or the account limit", stackName, name),
			fn.MetricThrottles(period("Sum")), 1, 1)
	}
	// The outbox (DESIGN 8): the relay's sweeper records, each minute, how
	// long the oldest change event still waiting has waited.
	m.addAlarm(scope, "OutboxAgeAlarm",
		fmt.Sprintf("%s: a change event has waited in an outbox over %s: the relay cannot publish "+
			"(its logs say why; SNS, S3 or a shard), or its sweeper does not run", stackName, outboxAge),
		awscloudwatch.NewMetric(&awscloudwatch.MetricProps{
			Namespace: jsii.String(metrics.DefaultNamespace), MetricName: jsii.String(metrics.OutboxAgeSeconds),
			Period: dur(alarmPeriod), Statistic: jsii.String("Maximum"),
		}),
		outboxAge.Seconds(), 1, awscloudwatch.TreatMissingData_BREACHING) // no data: the sweeper does not run
	add("Api5xxAlarm", stackName+": HTTP API 5xx responses",
		a.httpAPI.MetricServerError(period("Sum")), apiServerErrorThreshold, 1)
	for i, c := range dbs.all() {
		name := "Control"
		if i > 0 {
			name = fmt.Sprintf("Shard%d", i-1)
		}
		add(name+"CapacityAlarm",
			fmt.Sprintf("%s: %s cluster at its maximum Serverless v2 capacity; raise maxAcu or add shards", stackName, name),
			c.cluster.MetricACUUtilization(period("Average")), acuUtilizationPercent, 3)
	}

	m.dashboard = newDashboard(scope, stackName, q, fns, a, dbs, m.alarms)
	return m
}

func newDashboard(scope constructs.Construct, stackName string, q *queues, fns *catalogFunctions, a *api, dbs *databases, alarms []awscloudwatch.Alarm) awscloudwatch.Dashboard {
	minute := func(stat string) *awscloudwatch.MetricOptions {
		return &awscloudwatch.MetricOptions{Period: awscdk.Duration_Minutes(jsii.Number(1)), Statistic: jsii.String(stat)}
	}
	graph := func(title string, metrics ...awscloudwatch.IMetric) awscloudwatch.IWidget {
		return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
			Title: jsii.String(title), Width: jsii.Number(8), Height: jsii.Number(6), Left: &metrics,
		})
	}
	var depth, age, dlq []awscloudwatch.IMetric
	for _, name := range sortedKeys(q.work) {
		depth = append(depth, q.work[name].MetricApproximateNumberOfMessagesVisible(minute("Maximum")))
		age = append(age, q.work[name].MetricApproximateAgeOfOldestMessage(minute("Maximum")))
		dlq = append(dlq, q.dlqs[name].MetricApproximateNumberOfMessagesVisible(minute("Maximum")))
	}
	var invocations, errs, throttles, duration, concurrency []awscloudwatch.IMetric
	byName := fns.byName()
	for _, name := range sortedKeys(byName) {
		fn := byName[name]
		invocations = append(invocations, fn.MetricInvocations(minute("Sum")))
		errs = append(errs, fn.MetricErrors(minute("Sum")))
		throttles = append(throttles, fn.MetricThrottles(minute("Sum")))
		duration = append(duration, fn.MetricDuration(minute("p99")))
		concurrency = append(concurrency, fn.Metric(jsii.String("ConcurrentExecutions"), minute("Maximum")))
	}
	var acu, conns []awscloudwatch.IMetric
	for _, c := range dbs.all() {
		acu = append(acu, c.cluster.MetricServerlessDatabaseCapacity(minute("Average")))
		conns = append(conns, c.cluster.MetricDatabaseConnections(minute("Maximum")))
	}
	var alarmRefs []interfacesawscloudwatch.IAlarmRef
	for _, al := range alarms {
		alarmRefs = append(alarmRefs, al)
	}
	return awscloudwatch.NewDashboard(scope, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(stackName + "-catalog"),
		Widgets: &[]*[]awscloudwatch.IWidget{
			{awscloudwatch.NewAlarmStatusWidget(&awscloudwatch.AlarmStatusWidgetProps{
				Title: jsii.String("Alarms"), Alarms: &alarmRefs, Width: jsii.Number(24), Height: jsii.Number(4),
			})},
			{graph("Queue depth", depth...), graph("Age of oldest message (s)", age...), graph("DLQ depth", dlq...)},
			{graph("Invocations", invocations...), graph("Errors", errs...), graph("Throttles", throttles...)},
			{graph("Duration p99 (ms)", duration...), graph("Concurrent executions", concurrency...),
				graph("API requests, 4xx, 5xx", a.httpAPI.MetricCount(minute("Sum")), a.httpAPI.MetricClientError(minute("Sum")), a.httpAPI.MetricServerError(minute("Sum")))},
			{graph("API latency p99 (ms)", a.httpAPI.MetricLatency(minute("p99")), a.httpAPI.MetricIntegrationLatency(minute("p99"))),
				graph("Aurora capacity (ACU)", acu...), graph("Database connections", conns...)},
		},
	})
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// camel turns "apply-small" into "ApplySmall" for construct ids.
func camel(s string) string {
	out := make([]byte, 0, len(s))
	up := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '-' || c == '_' {
			up = true
			continue
		}
		if up && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		up = false
		out = append(out, c)
	}
	return string(out)
}
