package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/functions/adapters/rdsca"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// CodeAssets are the code assets (zip names without .zip, one per
// functions/<name>/lambda or infra/<name>/lambda directory) the stack
// deploys. apply is one asset deployed as two functions; migrate is the
// deploy-time schema custom resource.
var CodeAssets = []string{"upload", "read", "arrival", "diff", "apply", "migrate", "relay", "analytics", "webhooks", "webhooksend", "ops"}

// Function settings that are not parameters.
const (
	uploadMemoryMB   = 512
	arrivalMemoryMB  = 256 // a row update and a send per upload
	arrivalBatchSize = 10
	// arrivalMaxConcurrency bounds the arrival function's database
	// connections; an arrival takes milliseconds.
	arrivalMaxConcurrency = 10
	diffMemoryMB          = 3008  // streams multi-GB snapshots and builds the sorted index
	diffEphemeralMB       = 10240 // /tmp: the diff's spilled sorted runs, ~(id bytes + 22) a product: 20M products with 256-byte ids (4096 held 15M)
	diffSortMemoryMB      = 256   // sorted runs kept in memory before they spill to /tmp (10M products with 128-byte ids: peak RSS ~1 GiB)
	diffSpillDir          = "/tmp"
	applyMemoryMB         = 1024 // a batch is up to 10 chunks of ~10 MB
	diffBatchSize         = 1    // one snapshot per invocation: a slow diff holds nobody else
	applyBatchSize        = 10
	functionLogsRetain    = awslogs.RetentionDays_ONE_MONTH
)

// Environment variable names the functions read.
const (
	EnvBucket             = "CATALOG_BUCKET"
	EnvControlDB          = "CATALOG_CONTROL_DB"
	EnvShardDBs           = "CATALOG_SHARD_DBS"
	EnvShardReaders       = "CATALOG_SHARD_READERS"
	EnvControlReader      = "CATALOG_CONTROL_READER"
	EnvDiffQueueURL       = "CATALOG_DIFF_QUEUE_URL"
	EnvApplySmallQueueURL = "CATALOG_APPLY_SMALL_QUEUE_URL"
	EnvApplyLargeQueueURL = "CATALOG_APPLY_LARGE_QUEUE_URL"
	EnvLargeThresholdRows = "CATALOG_LARGE_THRESHOLD_ROWS"
	EnvMaxUploadBytes     = "CATALOG_MAX_UPLOAD_BYTES"
	EnvAdminTokenSecret   = "CATALOG_ADMIN_TOKEN_SECRET"
	EnvChangeTopicARN     = "CATALOG_CHANGE_TOPIC_ARN"
	EnvInflightCap        = "CATALOG_INFLIGHT_CAP"
	EnvDBMaxConns         = "CATALOG_DB_MAX_CONNS"
	EnvDBUser             = "CATALOG_DB_USER"
	EnvDBIAMAuth          = "CATALOG_DB_IAM_AUTH"
	EnvDBSSLRootCert      = "CATALOG_DB_SSLROOTCERT"
	EnvSpillDir           = "CATALOG_SPILL_DIR"
	EnvSortMemoryMB       = "CATALOG_SORT_MEMORY_MB"
	// EnvCostDeployment sizes the cost report's shared fixed costs
	// (costs.ParseDeployment), set from the stack's parameters.
	EnvCostDeployment = "CATALOG_COST_DEPLOYMENT"
)

// diffEnv is the diff's own environment: its sort spills to the ephemeral
// storage.
func diffEnv() map[string]string {
	return map[string]string{EnvSpillDir: diffSpillDir, EnvSortMemoryMB: strconv.Itoa(diffSortMemoryMB)}
}

// catalogFunctions are the deployed functions.
type catalogFunctions struct {
	upload, read, arrival, diff, applySmall, applyLarge awslambda.Function
	// The change events' (events.go), and the role that starts the sweeper.
	relay, analytics, webhooks, webhookSender awslambda.Function
	relaySchedulerRole                        awsiam.Role
	// ops: the admin routes of DESIGN 9 and the scheduled tasks (ops.go).
	ops awslambda.Function
	// migrate runs only during deployments (Custom::CatalogSchema).
	migrate awslambda.Function
}

// byName returns the functions keyed by their deployed role name.
func (f *catalogFunctions) byName() map[string]awslambda.Function {
	return map[string]awslambda.Function{
		"upload": f.upload, "read": f.read, "arrival": f.arrival, "diff": f.diff,
		"apply-small": f.applySmall, "apply-large": f.applyLarge,
		"relay": f.relay, "analytics": f.analytics, "webhooks": f.webhooks, "webhook-sender": f.webhookSender,
		"ops": f.ops,
	}
}

type fnSpec struct {
	id string
	// dbRole is the database role the function logs in as (IAM
	// authentication); viaProxy sends it through the clusters' proxies.
	dbRole      string
	viaProxy    bool
	asset       string
	description string
	memoryMB    int
	timeout     time.Duration
	reserved    int
	ephemeralMB int
	env         map[string]string
	// outsideVPC runs it outside the VPC (webhook-sender: it reaches the
	// internet, and nothing of the VPC); else in the app subnets, with no
	// way out of the VPC but its endpoints.
	outsideVPC bool
}

type functionDeps struct {
	params      Params
	assetDir    string
	net         *network
	store       *storage
	queues      *queues
	dbs         *databases
	adminSecret awssecretsmanager.ISecret
	changeTopic awssns.ITopic
	events      *eventQueues
	webhookKeys awssecretsmanager.ISecret
}

func newFunctions(scope constructs.Construct, d functionDeps) *catalogFunctions {
	p := d.params
	var shardReaders []string
	for _, s := range d.dbs.shards {
		if p.RDSProxy {
			shardReaders = append(shardReaders, s.proxyReader)
		} else {
			shardReaders = append(shardReaders, s.reader)
		}
	}
	common := map[string]string{
		EnvBucket:             *d.store.bucket.BucketName(),
		EnvDiffQueueURL:       *d.queues.diffJobs.QueueUrl(),
		EnvApplySmallQueueURL: *d.queues.applySmall.QueueUrl(),
		EnvApplyLargeQueueURL: *d.queues.applyLarge.QueueUrl(),
		EnvLargeThresholdRows: strconv.Itoa(p.LargeThresholdRows),
		EnvMaxUploadBytes:     strconv.FormatInt(p.MaxUploadBytes, 10),
		EnvInflightCap:        strconv.Itoa(p.InflightCap),
		EnvChangeTopicARN:     *d.changeTopic.TopicArn(),
		EnvDBMaxConns:         strconv.Itoa(dbConnsPerEnvironment),
	}
	with := func(extra map[string]string) map[string]string {
		env := make(map[string]string, len(common)+len(extra))
		for k, v := range common {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}

	uploadEnv := map[string]string{EnvAdminTokenSecret: *d.adminSecret.SecretArn()}
	readEnv := map[string]string{EnvShardReaders: strings.Join(shardReaders, ",")}
	// API traffic is not bounded by an event source: with p.RDSProxy, upload
	// and read go through the proxies, which multiplex many Lambda
	// environments onto few database connections (read's writer fallback
	// too); diff and apply connect to the writers.
	if p.RDSProxy {
		readEnv[EnvControlReader] = d.dbs.control.proxyReader
	} else {
		readEnv[EnvControlReader] = d.dbs.control.reader
	}

	f := &catalogFunctions{}
	f.upload = newFunction(scope, d, fnSpec{
		id: "Upload", asset: "upload", memoryMB: uploadMemoryMB, timeout: uploadTimeout,
		dbRole: catalogsql.RoleUpload, viaProxy: true,
		description: "catalog upload: admin and retailer snapshot routes (HTTP API)",
		env:         with(uploadEnv),
	})
	f.read = newFunction(scope, d, fnSpec{
		id: "Read", asset: "read", memoryMB: p.ReadMemoryMB, timeout: readTimeout, reserved: p.ReadReservedConcurrency,
		dbRole: catalogsql.RoleRead, viaProxy: true,
		description: "catalog read: storefront product routes and /healthz (HTTP API)",
		env:         with(readEnv),
	})
	f.arrival = newFunction(scope, d, fnSpec{
		id: "Arrival", asset: "arrival", memoryMB: arrivalMemoryMB, timeout: arrivalTimeout,
		// The arrival marks generations received: a part of the diff's
		// database work, under the diff's role.
		dbRole:      catalogsql.RoleDiff,
		description: "catalog arrival: records an upload's arrival, queues its diff in the retailer's group (arrivals queue)",
		env:         with(nil),
	})
	f.diff = newFunction(scope, d, fnSpec{
		id: "Diff", asset: "diff", memoryMB: diffMemoryMB, timeout: diffTimeout, ephemeralMB: diffEphemeralMB,
		dbRole:      catalogsql.RoleDiff,
		description: "catalog diff: snapshot vs baseline, chunk objects, apply messages (diff-jobs.fifo)",
		env:         with(diffEnv()),
	})
	f.applySmall = newFunction(scope, d, fnSpec{
		id: "ApplySmall", asset: "apply", memoryMB: applyMemoryMB, timeout: applyTimeout, reserved: p.ApplySmallConcurrency,
		dbRole:      catalogsql.RoleApply,
		description: "catalog apply-small: fenced chunk writes (apply-small.fifo)",
		env:         with(nil),
	})
	f.applyLarge = newFunction(scope, d, fnSpec{
		id: "ApplyLarge", asset: "apply", memoryMB: applyMemoryMB, timeout: applyTimeout, reserved: p.ApplyLargeConcurrency,
		dbRole:      catalogsql.RoleApply,
		description: "catalog apply-large: fenced chunk writes (apply-large.fifo)",
		env:         with(nil),
	})
	grantPermissions(d, f)
	newEventFunctions(scope, d, f) // relay, analytics, webhooks; publishing for apply and diff

	f.arrival.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.queues.arrivals, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(arrivalBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(arrivalMaxConcurrency),
	}))
	// diff-jobs.fifo: the poller hands out one job per retailer group at a
	// time; MaxConcurrency bounds the diffs running over all retailers.
	f.diff.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.queues.diffJobs, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(diffBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(float64(p.DiffMaxConcurrency)),
	}))
	// Maximum concurrency equals the reserved concurrency: the poller never
	// invokes more environments than are reserved, so messages are not
	// throttled back to the queue (and the receive count stays honest).
	f.applySmall.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.queues.applySmall, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(applyBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(float64(p.ApplySmallConcurrency)),
	}))
	f.applyLarge.AddEventSource(awslambdaeventsources.NewSqsEventSource(d.queues.applyLarge, &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(applyBatchSize),
		ReportBatchItemFailures: jsii.Bool(true),
		MaxConcurrency:          jsii.Number(float64(p.ApplyLargeConcurrency)),
	}))
	return f
}

// newFunction creates a Go function on provided.al2023/arm64 in the app
// subnets, with its own log group and a role that starts with nothing but
// its own log stream and the VPC network interface actions, and, with a
// dbRole, the login to every database as that role (IAM authentication,
// verify-full TLS against the CA bundle shipped in its zip).
func newFunction(scope constructs.Construct, d functionDeps, s fnSpec) awslambda.Function {
	logGroup := awslogs.NewLogGroup(scope, jsii.String(s.id+"Logs"), &awslogs.LogGroupProps{
		Retention:     functionLogsRetain,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	role := awsiam.NewRole(scope, jsii.String(s.id+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("execution role of " + s.description),
	})
	role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("WriteOwnLogs"),
		Actions:   jsii.Strings("logs:CreateLogStream", "logs:PutLogEvents"),
		Resources: jsii.Strings(*logGroup.LogGroupArn()),
	}))
	if !s.outsideVPC {
		role.AddToPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid: jsii.String("VpcNetworkInterfaces"),
			Actions: jsii.Strings("ec2:CreateNetworkInterface", "ec2:DescribeNetworkInterfaces", "ec2:DescribeSubnets",
				"ec2:DeleteNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses"),
			Resources: jsii.Strings("*"),
		}))
	}

	env := make(map[string]*string, len(s.env)+5)
	for k, v := range s.env {
		env[k] = jsii.String(v)
	}
	if s.dbRole != "" {
		for k, v := range databaseEnv(d.dbs, s.dbRole, s.viaProxy && d.params.RDSProxy) {
			env[k] = jsii.String(v)
		}
	}
	props := &awslambda.FunctionProps{
		Description:    jsii.String(s.description),
		Runtime:        awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:   awslambda.Architecture_ARM_64(),
		Handler:        jsii.String("bootstrap"),
		Code:           awslambda.Code_FromAsset(jsii.String(filepath.Join(d.assetDir, s.asset+".zip")), nil),
		MemorySize:     jsii.Number(float64(s.memoryMB)),
		Timeout:        dur(s.timeout),
		Role:           role,
		LogGroup:       logGroup,
		LoggingFormat:  awslambda.LoggingFormat_JSON,
		Environment:    &env,
		Vpc:            d.net.vpc,
		VpcSubnets:     d.net.appSubnets,
		SecurityGroups: &[]awsec2.ISecurityGroup{d.net.lambdaSG},
	}
	if s.outsideVPC {
		props.Vpc, props.VpcSubnets, props.SecurityGroups = nil, nil, nil
	}
	if s.reserved > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(float64(s.reserved))
	}
	if s.ephemeralMB > 0 {
		props.EphemeralStorageSize = awscdk.Size_Mebibytes(jsii.Number(float64(s.ephemeralMB)))
	}
	fn := awslambda.NewFunction(scope, jsii.String(s.id), props)
	if s.dbRole != "" {
		for _, c := range d.dbs.all() {
			c.grantConnect(fn, s.dbRole, s.viaProxy)
		}
	}
	return fn
}

// databaseEnv is what a function needs to log in to the control database
// and every shard as dbRole: the writers' addresses (or their proxies'),
// the role, IAM authentication and the CA bundle to verify servers with.
func databaseEnv(dbs *databases, dbRole string, viaProxy bool) map[string]string {
	host := func(c *dbCluster) string {
		if viaProxy {
			return c.proxyWriter
		}
		return c.writer
	}
	var shards []string
	for _, s := range dbs.shards {
		shards = append(shards, dsn(host(s)))
	}
	return map[string]string{
		EnvControlDB:     dsn(host(dbs.control)),
		EnvShardDBs:      strings.Join(shards, ","),
		EnvDBUser:        dbRole,
		EnvDBIAMAuth:     "true",
		EnvDBSSLRootCert: rdsca.LambdaPath,
	}
}

// grantPermissions gives each function exactly what its step needs.
func grantPermissions(d functionDeps, f *catalogFunctions) {
	bucket := d.store.bucket
	objects := func(prefix string) string { return *bucket.ArnForObjects(jsii.String(prefix + "*")) }
	s3 := func(role awsiam.IRole, sid string, actions []string, resources ...string) {
		role.AddToPrincipalPolicy(newStatement(sid, actions, resources))
	}

	// upload: presigns PUTs of snapshots/{retailer}/{generation}/upload (the
	// signature binds the exact key; the role bounds it to snapshots/),
	// re-enqueues diffs on confirm, reads the admin token.
	s3(f.upload.Role(), "PresignSnapshotPuts", []string{"s3:PutObject"}, objects(prefixSnapshots))
	// A reservation HEADs the uploads of the slots it would supersede (one
	// PUT whose notification has not come is taken, not lost), and a
	// rollback its source's: a HEAD needs s3:GetObject.
	s3(f.upload.Role(), "SeeSnapshotUploads", []string{"s3:GetObject"}, objects(prefixSnapshots))
	// Cost reports too large for an answer: written, then linked (presigned GET).
	s3(f.upload.Role(), "KeepLargeReports", []string{"s3:GetObject", "s3:PutObject"}, objects(prefixReports))
	// The problems route answers the problems file the diff wrote, or over
	// 5 MB a 303 to a presigned GET of it (which works with this
	// permission: a presigned URL acts with its signer's).
	s3(f.upload.Role(), "ReadProblems", []string{"s3:GetObject"}, objects(prefixProblems))
	// The plans of previewed and held generations (DESIGN 13): read only.
	s3(f.upload.Role(), "ReadPlans", []string{"s3:GetObject"}, objects(prefixPlans))
	d.queues.diffJobs.GrantSendMessages(f.upload)
	d.adminSecret.GrantRead(f.upload.Role(), nil)

	// read: databases only (newFunction granted every function its own
	// database login, and nothing else of the databases).

	// arrival: queues diff jobs; consumes the arrivals queue (granted by
	// the event source); its database login is the diff's.
	d.queues.diffJobs.GrantSendMessages(f.arrival)

	// diff: reads uploads (and tags retired ones for expiry), reads and
	// writes indexes (and tags superseded ones for expiry), writes chunks,
	// sends chunk messages.
	s3(f.diff.Role(), "ReadSnapshots", []string{"s3:GetObject", "s3:PutObjectTagging"}, objects(prefixSnapshots)) // tags retired uploads
	s3(f.diff.Role(), "ReadWriteIndexes", []string{"s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"}, objects(prefixIndexes))
	s3(f.diff.Role(), "WriteChunks", []string{"s3:PutObject"}, objects(prefixChunks))
	s3(f.diff.Role(), "WriteProblems", []string{"s3:PutObject"}, objects(prefixProblems))
	s3(f.diff.Role(), "WritePlans", []string{"s3:PutObject"}, objects(prefixPlans))                  // previews' and holds' plans
	listPrefixes(f.diff.Role(), bucket, prefixSnapshots, prefixIndexes, prefixChunks, prefixChanges) // chunks, changes: the fast path of change events
	d.queues.applySmall.GrantSendMessages(f.diff)
	d.queues.applyLarge.GrantSendMessages(f.diff)
	// The diff job of the undo a rejection reserves (I10).
	d.queues.diffJobs.GrantSendMessages(f.diff)

	// apply: reads chunks; consumes its queue (granted by the event source);
	// sends the diff job of the undo after a chunk the database refuses (I10).
	for _, fn := range []awslambda.Function{f.applySmall, f.applyLarge} {
		s3(fn.Role(), "ReadChunks", []string{"s3:GetObject"}, objects(prefixChunks))
		listPrefixes(fn.Role(), bucket, prefixChunks, prefixChanges) // changes: the fast path of change events
		d.queues.diffJobs.GrantSendMessages(fn)
	}
}
