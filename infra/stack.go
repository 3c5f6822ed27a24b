package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// CatalogStackProps configures NewCatalogStack.
type CatalogStackProps struct {
	awscdk.StackProps
	// Params size the stack; validated by NewCatalogStack.
	Params Params
	// AssetDir holds one <name>.zip per entry of CodeAssets, each with a
	// bootstrap executable at its root (go run ./scripts/buildlambdas).
	AssetDir string
}

// Validate checks the parameters and that every code asset exists.
func (p *CatalogStackProps) Validate() error {
	if err := p.Params.Validate(); err != nil {
		return err
	}
	var missing []string
	for _, name := range CodeAssets {
		zip := filepath.Join(p.AssetDir, name+".zip")
		if st, err := os.Stat(zip); err != nil || st.IsDir() {
			missing = append(missing, zip)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing Lambda code assets %s: run `go run ./scripts/buildlambdas -out %s` first",
			strings.Join(missing, ", "), p.AssetDir)
	}
	return nil
}

// MaxStackNameLength bounds the stack name: it prefixes the names of the
// secrets, clusters, proxies, queues and topics, whose ARNs and endpoints
// fill the functions' 4 KB of environment variables.
const MaxStackNameLength = 32

var stackNamePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*$`)

// ValidateStackName checks a stack name against CloudFormation's pattern
// and MaxStackNameLength.
func ValidateStackName(name string) error {
	if !stackNamePattern.MatchString(name) || len(name) > MaxStackNameLength {
		return fmt.Errorf("stack name %q: want a letter then letters, digits or hyphens, at most %d characters", name, MaxStackNameLength)
	}
	return nil
}

// NewCatalogStack builds the whole system of DESIGN 2 in one stack: bucket,
// queues, Aurora clusters, functions, HTTP API, alarms and dashboard. It
// panics when props or id do not validate (CatalogStackProps.Validate,
// ValidateStackName): call those first to report errors nicely.
func NewCatalogStack(scope constructs.Construct, id string, props *CatalogStackProps) awscdk.Stack {
	if err := props.Validate(); err != nil {
		panic(err)
	}
	if err := ValidateStackName(id); err != nil {
		panic(err)
	}
	sp := props.StackProps
	if sp.Description == nil {
		sp.Description = jsii.String("Retailer catalog snapshot ingestion (github.com/retailcatalog/catalog)")
	}
	stack := awscdk.NewStack(scope, &id, &sp)
	name := *stack.StackName()
	p := props.Params

	store := newStorage(stack, p)
	net := newNetwork(stack, store.logsBucket)
	q := newQueues(stack, name, store.bucket)
	dbs := newDatabases(stack, name, net, p)
	tp := newTopics(stack, name, p)
	admin := newAdminTokenSecret(stack, name)
	eq := newEventQueues(stack, name, q, tp.changes)
	webhookKeys := newWebhookKeysSecret(stack, name)
	deps := functionDeps{
		params: p, assetDir: props.AssetDir, net: net, store: store, queues: q, dbs: dbs,
		adminSecret: admin, changeTopic: tp.changes, events: eq, webhookKeys: webhookKeys,
	}
	fns := newFunctions(stack, deps)
	ops := newOps(stack, deps, fns) // the admin routes of DESIGN 9 and the scheduled tasks (ops.go)
	fns.migrate, _ = newSchema(stack, deps)
	glueDB, glueTable := newAnalyticsTable(stack, name, store.bucket)
	httpAPI := newAPI(stack, p, fns)
	mon := newMonitoring(stack, name, q, fns, httpAPI, dbs, tp.alarms)
	addOpsMonitoring(stack, name, mon, q, fns, ops)
	// The cost report's fixed costs, once every alarm exists (DESIGN 10).
	fns.upload.AddEnvironment(jsii.String(EnvCostDeployment), jsii.String(CostDeployment(p, len(mon.alarms)).String()), nil)

	out := func(id, value, description string) {
		awscdk.NewCfnOutput(stack, jsii.String(id), &awscdk.CfnOutputProps{
			Value: jsii.String(value), Description: jsii.String(description),
		})
	}
	out("ApiUrl", httpAPI.url, "Base URL of the HTTP API (DESIGN 5)")
	out("BucketName", *store.bucket.BucketName(), "Catalog bucket (snapshots/, indexes/, chunks/)")
	out("ArrivalsQueueUrl", *q.arrivals.QueueUrl(), "arrivals queue (S3 notifications of uploads)")
	out("DiffJobsQueueUrl", *q.diffJobs.QueueUrl(), "diff-jobs.fifo queue (a message group per retailer)")
	out("ApplySmallQueueUrl", *q.applySmall.QueueUrl(), "apply-small.fifo queue")
	out("ApplyLargeQueueUrl", *q.applyLarge.QueueUrl(), "apply-large.fifo queue")
	out("ChangeEventsTopicArn", *tp.changes.TopicArn(), "SNS topic of change events")
	out("AnalyticsQueueUrl", *eq.analytics.QueueUrl(), "analytics queue (catalog.changes events; its DLQ is analytics-dlq)")
	out("WebhooksQueueUrl", *eq.webhooks.QueueUrl(), "webhooks queue (catalog.snapshot.* events; its DLQ is webhooks-dlq)")
	out("AnalyticsTableName", glueDB+"."+glueTable, "Glue table over analytics/changes/ for Athena (docs/DEPLOY.md, \"Analytics\")")
	out("WebhookKeysSecretArn", *webhookKeys.SecretArn(), "Secret holding the keys that seal webhook secrets")
	out("AlarmTopicArn", *tp.alarms.TopicArn(), "SNS topic every alarm notifies; subscribe the pager here")
	out("AdminTokenSecretArn", *admin.SecretArn(), "Secret holding the admin bearer token")
	out("ControlClusterEndpoint", dbs.control.writer, "Control cluster writer endpoint")
	var shardEndpoints []string
	for _, s := range dbs.shards {
		shardEndpoints = append(shardEndpoints, s.writer)
	}
	out("ShardClusterEndpoints", strings.Join(shardEndpoints, ","), "Shard cluster writer endpoints, shard 0 first")
	out("DashboardName", *mon.dashboard.DashboardName(), "CloudWatch dashboard")
	out("ReconcileJobsQueueUrl", *ops.reconcileJobs.QueueUrl(), "reconcile-jobs queue (a job per retailer of a reconciliation or of the daily collection; its DLQ is reconcile-jobs-dlq)")

	addCostTags(stack)
	nag := nagRefs{
		stack:       stack,
		bucketID:    *stack.GetLogicalId(store.bucket.Node().DefaultChild().(awscdk.CfnElement)),
		fns:         fns,
		api:         httpAPI,
		adminSecret: admin,
		webhookKeys: webhookKeys,
	}
	addNagSuppressions(nag)
	addOpsNagSuppressions(nag, ops)
	return stack
}
