package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

var (
	match  = assertions.Match_ObjectLike
	arrayW = assertions.Match_ArrayWith
)

func obj(m map[string]any) *map[string]any { return &m }

// TestStack synthesizes the stack with the cdk.json defaults once and checks
// every resource of the issue and the settings the design depends on.
func TestStack(t *testing.T) {
	r := synth(t, nil)
	p := r.params
	tmpl := r.template

	bucket := r.logicalID(t, "AWS::S3::Bucket", "CatalogBucket")
	arrivals := r.logicalID(t, "AWS::SQS::Queue", "ArrivalsQueue")
	arrivalsDLQ := r.logicalID(t, "AWS::SQS::Queue", "ArrivalsDLQ")
	diffJobs := r.logicalID(t, "AWS::SQS::Queue", "DiffJobsQueue")
	diffDLQ := r.logicalID(t, "AWS::SQS::Queue", "DiffJobsDLQ")
	applySmall := r.logicalID(t, "AWS::SQS::Queue", "ApplySmallQueue")
	applySmallDLQ := r.logicalID(t, "AWS::SQS::Queue", "ApplySmallDLQ")
	applyLarge := r.logicalID(t, "AWS::SQS::Queue", "ApplyLargeQueue")
	applyLargeDLQ := r.logicalID(t, "AWS::SQS::Queue", "ApplyLargeDLQ")
	analyticsQ := r.logicalID(t, "AWS::SQS::Queue", "AnalyticsQueue")
	analyticsDLQ := r.logicalID(t, "AWS::SQS::Queue", "AnalyticsDLQ")
	webhooksQ := r.logicalID(t, "AWS::SQS::Queue", "WebhooksQueue")
	webhooksDLQ := r.logicalID(t, "AWS::SQS::Queue", "WebhooksDLQ")
	reconcileJobs := r.logicalID(t, "AWS::SQS::Queue", "ReconcileJobsQueue")
	reconcileJobsDLQ := r.logicalID(t, "AWS::SQS::Queue", "ReconcileJobsDLQ")
	topicsKey := r.logicalID(t, "AWS::KMS::Key", "TopicsKey")
	changeTopic := r.logicalID(t, "AWS::SNS::Topic", "ChangeEventsTopic")
	webhookKeys := "${" + r.logicalID(t, "AWS::SecretsManager::Secret", "WebhookKeysSecret") + "}"
	fns := map[string]string{}
	for _, name := range []string{"upload", "read", "arrival", "diff", "apply-small", "apply-large", "relay", "analytics", "webhooks", "webhook-sender", "ops"} {
		fns[name] = r.function(t, name)
	}

	t.Run("bucket", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		props := r.props(t, bucket)
		equal(t, "encryption", render(props["BucketEncryption"]),
			`{"ServerSideEncryptionConfiguration":[{"BucketKeyEnabled":true,"ServerSideEncryptionByDefault":{"SSEAlgorithm":"AES256"}}]}`)
		equal(t, "public access block", render(props["PublicAccessBlockConfiguration"]),
			`{"BlockPublicAcls":true,"BlockPublicPolicy":true,"IgnorePublicAcls":true,"RestrictPublicBuckets":true}`)
		if props["LoggingConfiguration"] == nil {
			t.Error("no server access logging")
		}
		rules := map[string]string{}
		for _, rule := range asList(props["LifecycleConfiguration"].(map[string]any)["Rules"]) {
			m := rule.(map[string]any)
			rules[fmt.Sprint(m["Id"])] = render(m)
		}
		equal(t, "lifecycle rules", rules, map[string]string{
			"expire-uploads":             fmt.Sprintf(`{"ExpirationInDays":%d,"Id":"expire-uploads","Prefix":"snapshots/","Status":"Enabled","TagFilters":[{"Key":"catalog-superseded","Value":"true"}]}`, p.UploadRetentionDays),
			"expire-superseded-indexes":  `{"ExpirationInDays":19,"Id":"expire-superseded-indexes","Prefix":"indexes/","Status":"Enabled","TagFilters":[{"Key":"catalog-superseded","Value":"true"}]}`,
			"expire-chunks":              `{"ExpirationInDays":19,"Id":"expire-chunks","Prefix":"chunks/","Status":"Enabled"}`,
			"expire-changes":             `{"ExpirationInDays":19,"Id":"expire-changes","Prefix":"changes/","Status":"Enabled"}`,
			"expire-plans":               fmt.Sprintf(`{"ExpirationInDays":%d,"Id":"expire-plans","Prefix":"plans/","Status":"Enabled"}`, p.UploadRetentionDays),
			"expire-reports":             `{"ExpirationInDays":1,"Id":"expire-reports","Prefix":"reports/costs/","Status":"Enabled"}`,
			"expire-problems":            fmt.Sprintf(`{"ExpirationInDays":%d,"Id":"expire-problems","Prefix":"problems/","Status":"Enabled"}`, p.UploadRetentionDays),
			"tier-analytics":             `{"Id":"tier-analytics","Prefix":"analytics/","Status":"Enabled","Transitions":[{"StorageClass":"INTELLIGENT_TIERING","TransitionInDays":30}]}`,
			"abort-incomplete-multipart": `{"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":1},"Id":"abort-incomplete-multipart","Status":"Enabled"}`,
		})
		// TLS only: a deny on aws:SecureTransport=false in the bucket policy.
		tmpl.HasResourceProperties(jsii.String("AWS::S3::BucketPolicy"), match(obj(map[string]any{
			"Bucket": map[string]any{"Ref": bucket},
			"PolicyDocument": match(obj(map[string]any{"Statement": arrayW(&[]any{match(obj(map[string]any{
				"Effect":    "Deny",
				"Action":    "s3:*",
				"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
			}))})})),
		})))
		// Object-created under snapshots/ goes to arrivals (a standard queue).
		tmpl.ResourceCountIs(jsii.String("Custom::S3BucketNotifications"), jsii.Number(1))
		tmpl.HasResourceProperties(jsii.String("Custom::S3BucketNotifications"), match(obj(map[string]any{
			"BucketName": map[string]any{"Ref": bucket},
			"NotificationConfiguration": map[string]any{"QueueConfigurations": []any{map[string]any{
				"Events":   []any{"s3:ObjectCreated:*"},
				"Filter":   map[string]any{"Key": map[string]any{"FilterRules": []any{map[string]any{"Name": "prefix", "Value": "snapshots/"}}}},
				"QueueArn": map[string]any{"Fn::GetAtt": []any{arrivals, "Arn"}},
			}}},
		})))
	})

	t.Run("queues", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		tmpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(14))
		for _, q := range []struct {
			id, dlq, name string
			maxReceive    float64
			fifo          bool
		}{
			{applySmall, applySmallDLQ, "apply-small", applyMaxReceiveCount, true},
			{applyLarge, applyLargeDLQ, "apply-large", applyMaxReceiveCount, true},
			{diffJobs, diffDLQ, "diff-jobs", diffMaxReceiveCount, true},
			{arrivals, arrivalsDLQ, "arrivals", arrivalMaxReceiveCount, false},
			{analyticsQ, analyticsDLQ, "analytics", analyticsMaxReceiveCount, false},
			{webhooksQ, webhooksDLQ, "webhooks", float64(webhooksMaxReceiveCount), false},
			{reconcileJobs, reconcileJobsDLQ, "reconcile-jobs", reconcileJobsMaxReceiveCount, false},
		} {
			props, dlqProps := r.props(t, q.id), r.props(t, q.dlq)
			equal(t, q.name+" redrive", render(props["RedrivePolicy"]),
				fmt.Sprintf(`{"deadLetterTargetArn":{"Fn::GetAtt":["%s","Arn"]},"maxReceiveCount":%v}`, q.dlq, q.maxReceive))
			equal(t, q.name+" SSE", props["SqsManagedSseEnabled"], true)
			equal(t, q.name+" DLQ SSE", dlqProps["SqsManagedSseEnabled"], true)
			equal(t, q.name+" DLQ retention", dlqProps["MessageRetentionPeriod"], 1209600.0)
			if q.fifo {
				equal(t, q.name+" name", props["QueueName"], testStackName+"-"+q.name+".fifo")
				for what, m := range map[string]map[string]any{q.name: props, q.name + " DLQ": dlqProps} {
					equal(t, what+" FIFO", m["FifoQueue"], true)
				}
				// High-throughput FIFO.
				equal(t, q.name+" throughput limit", props["FifoThroughputLimit"], "perMessageGroupId")
				equal(t, q.name+" dedup scope", props["DeduplicationScope"], "messageGroup")
				equal(t, q.name+" content dedup", props["ContentBasedDeduplication"], false)
			} else {
				equal(t, q.name+" name", props["QueueName"], testStackName+"-"+q.name)
				if props["FifoQueue"] != nil {
					t.Errorf("%s must be a standard queue (S3 cannot notify FIFO queues)", q.name)
				}
			}
		}
		// Every queue's policy denies requests without TLS.
		for _, q := range []string{arrivals, arrivalsDLQ, diffJobs, diffDLQ, applySmall, applySmallDLQ, applyLarge, applyLargeDLQ,
			analyticsQ, analyticsDLQ, webhooksQ, webhooksDLQ} {
			tmpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), match(obj(map[string]any{
				"Queues": []any{map[string]any{"Ref": q}},
				"PolicyDocument": match(obj(map[string]any{"Statement": arrayW(&[]any{match(obj(map[string]any{
					"Effect":    "Deny",
					"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
				}))})})),
			})))
		}
		// S3 may send to arrivals, from this bucket only.
		tmpl.HasResourceProperties(jsii.String("AWS::SQS::QueuePolicy"), match(obj(map[string]any{
			"Queues": []any{map[string]any{"Ref": arrivals}},
			"PolicyDocument": match(obj(map[string]any{"Statement": arrayW(&[]any{match(obj(map[string]any{
				"Effect":    "Allow",
				"Principal": map[string]any{"Service": "s3.amazonaws.com"},
				"Condition": map[string]any{"ArnLike": map[string]any{"aws:SourceArn": map[string]any{"Fn::GetAtt": []any{bucket, "Arn"}}}},
			}))})})),
		})))
	})

	t.Run("functions", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		want := map[string]struct {
			memory, timeout, reserved float64
			asset                     string
		}{
			"upload":         {uploadMemoryMB, uploadTimeout.Seconds(), 0, "upload"},
			"read":           {float64(p.ReadMemoryMB), readTimeout.Seconds(), float64(p.ReadReservedConcurrency), "read"},
			"arrival":        {arrivalMemoryMB, arrivalTimeout.Seconds(), 0, "arrival"},
			"diff":           {diffMemoryMB, diffTimeout.Seconds(), 0, "diff"},
			"apply-small":    {applyMemoryMB, applyTimeout.Seconds(), float64(p.ApplySmallConcurrency), "apply"},
			"apply-large":    {applyMemoryMB, applyTimeout.Seconds(), float64(p.ApplyLargeConcurrency), "apply"},
			"relay":          {relayMemoryMB, relayTimeout.Seconds(), relayConcurrency, "relay"},
			"analytics":      {analyticsMemoryMB, analyticsTimeout.Seconds(), analyticsConcurrency, "analytics"},
			"webhooks":       {webhooksMemoryMB, webhooksTimeout.Seconds(), webhooksConcurrency, "webhooks"},
			"webhook-sender": {senderMemoryMB, senderTimeout.Seconds(), senderConcurrency, "webhooksend"},
			"ops":            {opsMemoryMB, opsTimeout.Seconds(), opsConcurrency, "ops"},
		}
		codeKeys := map[string]string{}
		for name, w := range want {
			props := r.props(t, fns[name])
			equal(t, name+" runtime", props["Runtime"], "provided.al2023")
			equal(t, name+" architecture", props["Architectures"], []any{"arm64"})
			equal(t, name+" handler", props["Handler"], "bootstrap")
			equal(t, name+" memory", props["MemorySize"], w.memory)
			equal(t, name+" timeout", props["Timeout"], w.timeout)
			if w.reserved > 0 {
				equal(t, name+" reserved concurrency", props["ReservedConcurrentExecutions"], w.reserved)
			} else if props["ReservedConcurrentExecutions"] != nil {
				t.Errorf("%s: unexpected reserved concurrency %v", name, props["ReservedConcurrentExecutions"])
			}
			vpc, _ := props["VpcConfig"].(map[string]any)
			if name == "webhook-sender" {
				if vpc != nil {
					t.Errorf("webhook-sender runs in the VPC: %v", vpc)
				}
			} else if subnets := render(vpc["SubnetIds"]); !strings.Contains(subnets, "Vpcapp") {
				t.Errorf("%s: not in the app subnets: %s", name, subnets)
			}
			logging, _ := props["LoggingConfig"].(map[string]any)
			if !strings.HasPrefix(render(logging["LogGroup"]), "${"+camel(strings.Split(name, "-")[0])) {
				t.Errorf("%s: log group %v is not its own", name, logging["LogGroup"])
			}
			code, _ := props["Code"].(map[string]any)
			key := fmt.Sprint(code["S3Key"])
			if prev, ok := codeKeys[w.asset]; ok && prev != key {
				t.Errorf("%s: asset %s deployed from two zips", name, w.asset)
			}
			codeKeys[w.asset] = key
		}
		if len(codeKeys) != 10 {
			t.Errorf("want 10 distinct code assets (apply shared by two functions), got %v", codeKeys)
		}
		equal(t, "diff ephemeral storage", r.props(t, fns["diff"])["EphemeralStorage"], map[string]any{"Size": float64(diffEphemeralMB)})
		// Function log groups have a retention.
		for id, lg := range r.resources("AWS::Logs::LogGroup") {
			if lg["Properties"].(map[string]any)["RetentionInDays"] == nil {
				t.Errorf("log group %s keeps logs forever", id)
			}
		}
	})

	t.Run("environment", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		var readers []string
		for i := range p.Shards {
			readers = append(readers, "${"+r.logicalID(t, "AWS::RDS::DBProxyEndpoint", fmt.Sprintf("Shard%dClusterProxyReadOnly", i))+".Endpoint}")
		}
		// Each function logs in as its own role (see TestDatabaseAccess):
		// upload and read through the proxies, diff and apply to the writers.
		dbEnv := func(role string, viaProxy bool) map[string]string {
			host := func(cluster string) string {
				if viaProxy {
					return "${" + r.logicalID(t, "AWS::RDS::DBProxy", cluster+"Proxy") + ".Endpoint}"
				}
				return "${" + r.logicalID(t, "AWS::RDS::DBCluster", cluster) + ".Endpoint.Address}"
			}
			var shards []string
			for i := range p.Shards {
				shards = append(shards, "postgres://"+host(fmt.Sprintf("Shard%dCluster", i))+":5432/catalog")
			}
			return map[string]string{
				EnvControlDB: "postgres://" + host("ControlCluster") + ":5432/catalog", EnvShardDBs: strings.Join(shards, ","),
				EnvDBUser: role, EnvDBIAMAuth: "true", EnvDBSSLRootCert: "/var/task/certs/rds-ca-bundle.pem",
			}
		}
		common := map[string]string{
			EnvBucket:             "${" + bucket + "}",
			EnvDiffQueueURL:       "${" + diffJobs + "}",
			EnvApplySmallQueueURL: "${" + applySmall + "}",
			EnvApplyLargeQueueURL: "${" + applyLarge + "}",
			EnvLargeThresholdRows: fmt.Sprint(p.LargeThresholdRows),
			EnvMaxUploadBytes:     fmt.Sprint(p.MaxUploadBytes),
			EnvInflightCap:        fmt.Sprint(p.InflightCap),
			EnvChangeTopicARN:     "${" + r.logicalID(t, "AWS::SNS::Topic", "ChangeEventsTopic") + "}",
			EnvDBMaxConns:         fmt.Sprint(dbConnsPerEnvironment),
		}
		with := func(extras ...map[string]string) map[string]string {
			out := map[string]string{}
			for _, m := range append([]map[string]string{common}, extras...) {
				for k, v := range m {
					out[k] = v
				}
			}
			return out
		}
		equal(t, "upload env", r.env(t, fns["upload"]), with(map[string]string{
			EnvAdminTokenSecret: "${" + r.logicalID(t, "AWS::SecretsManager::Secret", "AdminTokenSecret") + "}",
			EnvCostDeployment:   CostDeployment(p, len(r.resources("AWS::CloudWatch::Alarm"))).String(),
			EnvWebhookKeys:      "secret:" + webhookKeys,
		}, dbEnv(catalogsql.RoleUpload, true)))
		equal(t, "read env", r.env(t, fns["read"]), with(map[string]string{
			EnvShardReaders:  strings.Join(readers, ","),
			EnvControlReader: "${" + r.logicalID(t, "AWS::RDS::DBProxyEndpoint", "ControlClusterProxyReadOnly") + ".Endpoint}",
		}, dbEnv(catalogsql.RoleRead, true)))
		equal(t, "diff env", r.env(t, fns["diff"]), with(dbEnv(catalogsql.RoleDiff, false), map[string]string{EnvSpillDir: "/tmp", EnvSortMemoryMB: "256"}))
		equal(t, "arrival env", r.env(t, fns["arrival"]), with(dbEnv(catalogsql.RoleDiff, false)))
		for _, name := range []string{"apply-small", "apply-large"} {
			equal(t, name+" env", r.env(t, fns[name]), with(dbEnv(catalogsql.RoleApply, false)))
		}
		// The change events' functions: their own settings only.
		own := func(extras ...map[string]string) map[string]string {
			out := map[string]string{EnvDBMaxConns: fmt.Sprint(dbConnsPerEnvironment)}
			for _, m := range extras {
				for k, v := range m {
					out[k] = v
				}
			}
			return out
		}
		equal(t, "relay env", r.env(t, fns["relay"]), own(map[string]string{
			EnvBucket: common[EnvBucket], EnvChangeTopicARN: common[EnvChangeTopicARN]}, dbEnv(catalogsql.RoleRelay, false)))
		equal(t, "analytics env", r.env(t, fns["analytics"]), own(map[string]string{
			EnvBucket: common[EnvBucket], EnvAnalyticsQueueURL: "${" + analyticsQ + "}"}, dbEnv(catalogsql.RoleConsumers, false)))
		equal(t, "webhooks env", r.env(t, fns["webhooks"]), own(map[string]string{
			EnvWebhooksQueueURL: "${" + webhooksQ + "}", EnvWebhookKeys: "secret:" + webhookKeys,
			EnvWebhookSender: "${" + fns["webhook-sender"] + "}"}, dbEnv(catalogsql.RoleConsumers, false)))
		equal(t, "webhook-sender env", r.env(t, fns["webhook-sender"]), map[string]string{})
	})

	t.Run("event sources", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		tmpl.ResourceCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), jsii.Number(7))
		for _, es := range []struct {
			fn, queue      string
			batch, maxConc float64
		}{
			{"arrival", arrivals, arrivalBatchSize, arrivalMaxConcurrency},
			{"diff", diffJobs, diffBatchSize, float64(p.DiffMaxConcurrency)},
			{"apply-small", applySmall, applyBatchSize, float64(p.ApplySmallConcurrency)},
			{"apply-large", applyLarge, applyBatchSize, float64(p.ApplyLargeConcurrency)},
			{"analytics", analyticsQ, analyticsBatchSize, analyticsConcurrency},
			{"webhooks", webhooksQ, webhooksBatchSize, webhooksConcurrency},
			{"ops", reconcileJobs, 1, opsReconcileConcurrency},
		} {
			tmpl.HasResourceProperties(jsii.String("AWS::Lambda::EventSourceMapping"), obj(map[string]any{
				"FunctionName":          map[string]any{"Ref": fns[es.fn]},
				"EventSourceArn":        map[string]any{"Fn::GetAtt": []any{es.queue, "Arn"}},
				"BatchSize":             es.batch,
				"FunctionResponseTypes": []any{"ReportBatchItemFailures"},
				"ScalingConfig":         map[string]any{"MaximumConcurrency": es.maxConc},
			}))
		}
		// Visibility timeout >= 6 x the timeout of the function consuming
		// the queue; maximum concurrency <= reserved concurrency.
		for id, m := range r.resources("AWS::Lambda::EventSourceMapping") {
			mp := m["Properties"].(map[string]any)
			fnID := strings.Trim(render(mp["FunctionName"]), "${}")
			queueID := strings.TrimSuffix(strings.Trim(render(mp["EventSourceArn"]), "${}"), ".Arn")
			fn, q := r.props(t, fnID), r.props(t, queueID)
			if vis, timeout := num(t, q["VisibilityTimeout"]), num(t, fn["Timeout"]); vis < visibilityFactor*timeout {
				t.Errorf("%s: visibility timeout %vs < %d x function timeout %vs", queueID, vis, visibilityFactor, timeout)
			}
			maxConc := num(t, mp["ScalingConfig"].(map[string]any)["MaximumConcurrency"])
			if rc, ok := fn["ReservedConcurrentExecutions"]; ok && num(t, rc) < maxConc {
				t.Errorf("%s: maximum concurrency %v over reserved concurrency %v", id, maxConc, rc)
			}
		}
	})

	t.Run("schema migrations", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		migrate := r.function(t, "migrate")
		crs := r.resources("Custom::CatalogSchema")
		if len(crs) != 1 {
			t.Fatalf("want one Custom::CatalogSchema, got %d", len(crs))
		}
		for _, cr := range crs {
			props := cr["Properties"].(map[string]any)
			equal(t, "service token", render(props["ServiceToken"]), "${"+migrate+".Arn}")
			equal(t, "migrations hash", props["MigrationsHash"], MigrationsHash())
			equal(t, "shards", props["Shards"], fmt.Sprint(p.Shards))
			deps := map[string]bool{}
			for _, d := range asList(cr["DependsOn"]) {
				deps[fmt.Sprint(d)] = true
			}
			for id := range r.resources("AWS::RDS::DBInstance") {
				if !deps[id] {
					t.Errorf("schema does not wait for instance %s", id)
				}
			}
		}
		env := r.env(t, migrate)
		var shardDBs []string
		for i := range p.Shards {
			shardDBs = append(shardDBs, "secret:${"+r.logicalID(t, "AWS::SecretsManager::SecretTargetAttachment", fmt.Sprintf("Shard%dClusterSecretAttachment", i))+"}")
		}
		want := map[string]string{
			EnvControlDB:     "secret:${" + r.logicalID(t, "AWS::SecretsManager::SecretTargetAttachment", "ControlClusterSecretAttachment") + "}",
			EnvShardDBs:      strings.Join(shardDBs, ","),
			EnvDBMaxConns:    "1",
			EnvDBSSLRootCert: "/var/task/certs/rds-ca-bundle.pem",
		}
		equal(t, "migrate env", env, want)
		equal(t, "migrate timeout", r.props(t, migrate)["Timeout"], migrateTimeout.Seconds())
		if len(MigrationsHash()) != 64 {
			t.Errorf("bad migrations hash %q", MigrationsHash())
		}
	})

	t.Run("least privilege", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		obj := func(prefix string) string { return "${" + bucket + ".Arn}/" + prefix + "*" }
		arn := func(id string) string { return "${" + id + ".Arn}" }
		var dbSecrets []string
		for _, id := range []string{"ControlClusterSecretAttachment", "Shard0ClusterSecretAttachment", "Shard1ClusterSecretAttachment"} {
			dbSecrets = append(dbSecrets, "${"+r.logicalID(t, "AWS::SecretsManager::SecretTargetAttachment", id)+"}")
		}
		readSecrets := func(secrets ...string) []string {
			var out []string
			for _, s := range secrets {
				out = append(out, "Allow secretsmanager:DescribeSecret "+s, "Allow secretsmanager:GetSecretValue "+s)
			}
			return out
		}
		connect := func(role string, viaProxy bool) []string {
			var out []string
			for _, c := range []string{"ControlCluster", "Shard0Cluster", "Shard1Cluster"} {
				out = append(out, "Allow rds-db:connect "+dbUserARN(t, r, c, role, viaProxy))
			}
			return out
		}
		send := func(queue string) []string {
			return []string{"Allow sqs:GetQueueAttributes " + arn(queue), "Allow sqs:GetQueueUrl " + arn(queue), "Allow sqs:SendMessage " + arn(queue)}
		}
		consume := func(queue string) []string {
			var out []string
			for _, a := range []string{"ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl", "ReceiveMessage"} {
				out = append(out, "Allow sqs:"+a+" "+arn(queue))
			}
			return out
		}
		list := func(prefixes ...string) string {
			var quoted []string
			for _, p := range prefixes {
				quoted = append(quoted, `"`+p+`*"`)
			}
			return "Allow s3:ListBucket " + arn(bucket) + ` if {"StringLike":{"s3:prefix":[` + strings.Join(quoted, ",") + `]}}`
		}
		cat := func(parts ...[]string) []string {
			var out []string
			for _, p := range parts {
				out = append(out, p...)
			}
			return out
		}
		admin := "${" + r.logicalID(t, "AWS::SecretsManager::Secret", "AdminTokenSecret") + "}"
		// Publishing change events: the relay, and the fast path of apply and diff.
		publish := []string{"Allow sns:Publish ${" + changeTopic + "}",
			"Allow kms:Decrypt " + arn(topicsKey), "Allow kms:GenerateDataKey* " + arn(topicsKey),
			"Allow s3:GetObject " + obj(prefixChanges), "Allow s3:PutObject " + obj(prefixChanges)}
		want := map[string][]string{
			"upload": cat([]string{"Allow s3:PutObject " + obj(prefixSnapshots), "Allow s3:GetObject " + obj(prefixSnapshots),
				"Allow s3:GetObject " + obj(prefixReports), "Allow s3:PutObject " + obj(prefixReports),
				"Allow s3:GetObject " + obj(prefixProblems), "Allow s3:GetObject " + obj(prefixPlans)}, send(diffJobs), readSecrets(admin),
				readSecrets(webhookKeys), connect(catalogsql.RoleUpload, true)),
			"read":    connect(catalogsql.RoleRead, true),
			"arrival": cat(send(diffJobs), consume(arrivals), connect(catalogsql.RoleDiff, false)),
			"diff": cat([]string{
				"Allow s3:GetObject " + obj(prefixSnapshots), "Allow s3:PutObjectTagging " + obj(prefixSnapshots),
				"Allow s3:GetObject " + obj(prefixIndexes), "Allow s3:PutObject " + obj(prefixIndexes), "Allow s3:PutObjectTagging " + obj(prefixIndexes),
				"Allow s3:PutObject " + obj(prefixChunks), "Allow s3:GetObject " + obj(prefixChunks),
				"Allow s3:PutObject " + obj(prefixProblems),
				"Allow s3:PutObject " + obj(prefixPlans),
				list(prefixSnapshots, prefixIndexes, prefixChunks, prefixChanges),
				"Allow sqs:SendMessage " + arn(diffJobs), // an undo's diff job (I10)
			}, publish, send(applySmall), send(applyLarge), consume(diffJobs), connect(catalogsql.RoleDiff, false)),
			// apply: also an undo's diff job (I10).
			"apply-small": cat([]string{"Allow s3:GetObject " + obj(prefixChunks), list(prefixChunks, prefixChanges)}, publish, consume(applySmall),
				send(diffJobs), connect(catalogsql.RoleApply, false)),
			"apply-large": cat([]string{"Allow s3:GetObject " + obj(prefixChunks), list(prefixChunks, prefixChanges)}, publish, consume(applyLarge),
				send(diffJobs), connect(catalogsql.RoleApply, false)),
			"relay": cat([]string{"Allow s3:GetObject " + obj(prefixChunks), list(prefixChunks, prefixChanges)}, publish,
				connect(catalogsql.RoleRelay, false)),
			"analytics": cat([]string{"Allow s3:GetObject " + obj(prefixChunks), "Allow s3:GetObject " + obj(prefixChanges),
				"Allow s3:PutObject " + obj(analytics.Prefix)}, consume(analyticsQ), connect(catalogsql.RoleConsumers, false)),
			"webhooks": cat([]string{"Allow lambda:InvokeFunction " + arn(fns["webhook-sender"])}, consume(webhooksQ), readSecrets(webhookKeys),
				connect(catalogsql.RoleConsumers, false)),
			"webhook-sender": nil, // its logs only: no database, no secret, no AWS API
			// ops: reads uploads and indexes (why, reconcile), re-sends chunks
			// and writes repairs' change objects; sends to every work queue
			// (re-drives, redrives, reconcile jobs), reads and empties every
			// dead-letter queue (dlq list|redrive), consumes reconcile-jobs.
			"ops": dedupe(sortedCopy(cat([]string{
				"Allow s3:GetObject " + obj(prefixSnapshots), "Allow s3:GetObject " + obj(prefixIndexes),
				"Allow s3:GetObject " + obj(prefixChunks), "Allow s3:PutObject " + obj(prefixChunks),
				list(prefixSnapshots, prefixIndexes, prefixChunks),
			}, send(arrivals), send(diffJobs), send(applySmall), send(applyLarge), send(analyticsQ), send(webhooksQ), send(reconcileJobs),
				consume(arrivalsDLQ), consume(diffDLQ), consume(applySmallDLQ), consume(applyLargeDLQ), consume(analyticsDLQ),
				consume(webhooksDLQ), consume(reconcileJobsDLQ), consume(reconcileJobs),
				readSecrets(admin), connect(catalogsql.RoleOps, false)))),
		}
		want["migrate"] = readSecrets(dbSecrets...)
		withMigrate := map[string]string{"migrate": r.function(t, "migrate")}
		for k, v := range fns {
			withMigrate[k] = v
		}
		for name, fnID := range withMigrate {
			role := r.roleOf(t, fnID)
			stmts := r.statements(t, role)
			logGroup := strings.TrimSuffix(strings.TrimPrefix(render(r.props(t, fnID)["LoggingConfig"].(map[string]any)["LogGroup"]), "${"), "}")
			var rest []statement
			for _, s := range stmts {
				switch s.sid {
				case "WriteOwnLogs":
					equalLines(t, name+" logs", grants([]statement{s}), []string{
						"Allow logs:CreateLogStream " + arn(logGroup), "Allow logs:PutLogEvents " + arn(logGroup)})
				case "VpcNetworkInterfaces":
					for _, a := range s.actions {
						if !strings.HasPrefix(a, "ec2:") || !(strings.Contains(a, "NetworkInterface") || strings.Contains(a, "PrivateIpAddresses") || a == "ec2:DescribeSubnets") {
							t.Errorf("%s: unexpected action %s in the ENI statement", name, a)
						}
					}
				default:
					rest = append(rest, s)
				}
			}
			got := grants(rest)
			equalLines(t, name+" permissions", got, want[name])
			for _, g := range got {
				action := strings.Fields(g)[1]
				if (strings.Contains(action, "*") && action != "kms:GenerateDataKey*") || strings.HasSuffix(g, " *") {
					t.Errorf("%s: wildcard grant %s", name, g)
				}
			}
		}
		// The two apply functions have separate roles.
		if r.roleOf(t, fns["apply-small"]) == r.roleOf(t, fns["apply-large"]) {
			t.Error("apply-small and apply-large share a role")
		}
	})

	t.Run("databases", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		clusters := 1 + p.Shards
		tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBCluster"), jsii.Number(float64(clusters)))
		tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBInstance"), jsii.Number(float64(clusters*(1+p.ReadersPerShard))))
		tmpl.ResourceCountIs(jsii.String("AWS::SecretsManager::RotationSchedule"), jsii.Number(float64(clusters)))
		tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBProxy"), jsii.Number(float64(clusters)))
		tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBProxyEndpoint"), jsii.Number(float64(clusters)))
		tmpl.AllResources(jsii.String("AWS::RDS::DBCluster"), match(obj(map[string]any{
			"Properties": match(obj(map[string]any{
				"Engine":                           "aurora-postgresql",
				"EngineVersion":                    "16.9",
				"ServerlessV2ScalingConfiguration": map[string]any{"MinCapacity": p.MinACU, "MaxCapacity": p.MaxACU},
				"StorageEncrypted":                 true,
				"DeletionProtection":               true,
				"BackupRetentionPeriod":            float64(backupRetentionDays),
				"EnableIAMDatabaseAuthentication":  true,
				"EnableCloudwatchLogsExports":      []any{"postgresql"},
				"DatabaseName":                     dbName,
				"MasterUserPassword":               assertions.Match_AnyValue(),
			})),
			"DeletionPolicy":      "Snapshot",
			"UpdateReplacePolicy": "Snapshot",
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBClusterParameterGroup"), match(obj(map[string]any{
			"Parameters": map[string]any{"rds.force_ssl": "1"},
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBInstance"), match(obj(map[string]any{
			"DBInstanceClass":    "db.serverless",
			"PubliclyAccessible": false,
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBSubnetGroup"), match(obj(map[string]any{
			"SubnetIds": []any{
				map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^VpcdataSubnet1"))},
				map[string]any{"Ref": assertions.Match_StringLikeRegexp(jsii.String("^VpcdataSubnet2"))},
			},
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::SecretsManager::RotationSchedule"), match(obj(map[string]any{
			"RotationRules": map[string]any{"ScheduleExpression": fmt.Sprintf("rate(%d days)", rotationDays)},
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBProxy"), match(obj(map[string]any{
			"EngineFamily": "POSTGRESQL",
			"RequireTLS":   true,
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBProxyTargetGroup"), match(obj(map[string]any{
			"ConnectionPoolConfigurationInfo": match(obj(map[string]any{"MaxConnectionsPercent": float64(proxyMaxConnectionsPercent)})),
		})))
		tmpl.AllResourcesProperties(jsii.String("AWS::RDS::DBProxyEndpoint"), match(obj(map[string]any{"TargetRole": "READ_ONLY"})))
		// Secrets: one per cluster, the admin token, the webhook keys.
		tmpl.ResourceCountIs(jsii.String("AWS::SecretsManager::Secret"), jsii.Number(float64(clusters+2)))
	})

	t.Run("network", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		tmpl.ResourceCountIs(jsii.String("AWS::EC2::NatGateway"), jsii.Number(0))
		tmpl.ResourceCountIs(jsii.String("AWS::EC2::InternetGateway"), jsii.Number(0))
		tmpl.ResourceCountIs(jsii.String("AWS::EC2::FlowLog"), jsii.Number(1))
		endpoints := map[string]string{}
		for _, ep := range r.resources("AWS::EC2::VPCEndpoint") {
			props := ep["Properties"].(map[string]any)
			svc := render(props["ServiceName"])
			endpoints[svc[strings.LastIndex(svc, ".")+1:]] = fmt.Sprint(props["VpcEndpointType"])
			if props["VpcEndpointType"] == "Interface" && props["PrivateDnsEnabled"] != true {
				t.Errorf("%s endpoint without private DNS", svc)
			}
		}
		equal(t, "VPC endpoints", endpoints, map[string]string{"s3": "Gateway", "sqs": "Interface", "secretsmanager": "Interface",
			"sns": "Interface", "lambda": "Interface"})
		// Nothing is open to the world.
		for id, sg := range r.resources("AWS::EC2::SecurityGroup") {
			for _, in := range asList(sg["Properties"].(map[string]any)["SecurityGroupIngress"]) {
				if cidr := in.(map[string]any)["CidrIp"]; cidr == "0.0.0.0/0" {
					t.Errorf("%s allows ingress from 0.0.0.0/0", id)
				}
			}
		}
		dbSG := r.logicalID(t, "AWS::EC2::SecurityGroup", "DatabaseSG")
		for id, in := range r.resources("AWS::EC2::SecurityGroupIngress") {
			props := in["Properties"].(map[string]any)
			if props["CidrIp"] != nil {
				t.Errorf("%s: CIDR ingress %v", id, props["CidrIp"])
			}
			if render(props["GroupId"]) == "${"+dbSG+".GroupId}" {
				src := render(props["SourceSecurityGroupId"])
				if !strings.HasPrefix(src, "${LambdaSG") && !strings.HasPrefix(src, "${ProxySG") && !strings.HasPrefix(src, "${RotationSG") {
					t.Errorf("database reachable from %s", src)
				}
			}
		}
	})

	t.Run("api", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		tmpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Api"), jsii.Number(1))
		tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Api"), match(obj(map[string]any{"ProtocolType": "HTTP"})))
		integrationFn := map[string]string{}
		for id, in := range r.resources("AWS::ApiGatewayV2::Integration") {
			props := in["Properties"].(map[string]any)
			equal(t, id+" payload format", props["PayloadFormatVersion"], "2.0")
			integrationFn[id] = strings.TrimSuffix(strings.TrimPrefix(render(props["IntegrationUri"]), "${"), ".Arn}")
		}
		got := map[string]string{}
		for _, route := range r.resources("AWS::ApiGatewayV2::Route") {
			props := route["Properties"].(map[string]any)
			target := strings.TrimSuffix(strings.TrimPrefix(render(props["Target"]), "integrations/${"), "}")
			got[fmt.Sprint(props["RouteKey"])] = integrationFn[target]
		}
		want := map[string]string{}
		for _, route := range Routes {
			want[route.Key()] = fns[route.Function]
		}
		equal(t, "routes", got, want)
		// Routes are exactly docs/openapi.yaml's: TestRoutesAreTheDocumentedOnes.

		stage := r.props(t, r.logicalID(t, "AWS::ApiGatewayV2::Stage", "DefaultStage"))
		equal(t, "stage name", stage["StageName"], "$default")
		equal(t, "auto deploy", stage["AutoDeploy"], true)
		equal(t, "throttling", stage["DefaultRouteSettings"], map[string]any{
			"ThrottlingRateLimit": float64(p.APIRateLimit), "ThrottlingBurstLimit": float64(p.APIBurstLimit)})
		logs := stage["AccessLogSettings"].(map[string]any)
		equal(t, "access log destination", render(logs["DestinationArn"]), "${"+r.logicalID(t, "AWS::Logs::LogGroup", "ApiAccessLogs")+".Arn}")
		if f := fmt.Sprint(logs["Format"]); !strings.Contains(f, "$context.requestId") || !strings.Contains(f, "$context.status") {
			t.Errorf("access log format misses fields: %s", f)
		}
		routeSettings, _ := stage["RouteSettings"].(map[string]any)
		admin, _ := routeSettings["POST /v1/admin/retailers"].(map[string]any)
		if admin["ThrottlingRateLimit"] == nil || num(t, admin["ThrottlingRateLimit"]) > 10 {
			t.Errorf("admin route not throttled tighter: %v", routeSettings)
		}
		for key := range routeSettings {
			if _, ok := want[key]; !ok {
				t.Errorf("route settings for unknown route %q", key)
			}
		}
	})

	t.Run("monitoring", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		alarmTopic := r.logicalID(t, "AWS::SNS::Topic", "AlarmTopic")
		type key struct{ metric, dimension string }
		alarms := map[key]map[string]any{}
		for id, a := range r.resources("AWS::CloudWatch::Alarm") {
			props := a["Properties"].(map[string]any)
			equal(t, id+" actions", props["AlarmActions"], []any{map[string]any{"Ref": alarmTopic}})
			dims := asList(props["Dimensions"])
			if props["Namespace"] == metrics.DefaultNamespace {
				// The functions' own metrics: no dimension (DESIGN 9).
				if len(dims) != 0 {
					t.Errorf("%s: a business metric alarm with dimensions %v", id, dims)
				}
				alarms[key{fmt.Sprint(props["MetricName"]), ""}] = props
				continue
			}
			if len(dims) != 1 {
				t.Errorf("%s: want one dimension, got %v", id, dims)
				continue
			}
			dim := strings.Trim(render(dims[0].(map[string]any)["Value"]), "${}")
			dim = strings.TrimSuffix(dim, ".QueueName")
			alarms[key{fmt.Sprint(props["MetricName"]), dim}] = props
		}
		expect := func(metric, dim string, threshold float64) {
			t.Helper()
			a, ok := alarms[key{metric, dim}]
			if !ok {
				t.Errorf("no %s alarm on %s", metric, dim)
				return
			}
			equal(t, metric+" on "+dim+" threshold", a["Threshold"], threshold)
		}
		for _, dlq := range []string{arrivalsDLQ, diffDLQ, applySmallDLQ, applyLargeDLQ, analyticsDLQ, webhooksDLQ, reconcileJobsDLQ} {
			expect("ApproximateNumberOfMessagesVisible", dlq, 1)
		}
		expect("ApproximateAgeOfOldestMessage", analyticsQ, oldestMessageAge["analytics"].Seconds())
		expect("ApproximateAgeOfOldestMessage", webhooksQ, oldestMessageAge["webhooks"].Seconds())
		expect(metrics.OutboxAgeSeconds, "", outboxAge.Seconds())
		outbox := alarms[key{metrics.OutboxAgeSeconds, ""}]
		equal(t, "outbox age namespace", outbox["Namespace"], metrics.DefaultNamespace)
		equal(t, "outbox age statistic", outbox["Statistic"], "Maximum")
		equal(t, "outbox age: no data alarms (the sweeper does not run)", outbox["TreatMissingData"], "breaching")
		expect("ApproximateAgeOfOldestMessage", arrivals, oldestMessageAge["arrivals"].Seconds())
		expect("ApproximateAgeOfOldestMessage", diffJobs, oldestMessageAge["diff-jobs"].Seconds())
		expect("ApproximateAgeOfOldestMessage", applySmall, oldestMessageAge["apply-small"].Seconds())
		expect("ApproximateAgeOfOldestMessage", applyLarge, oldestMessageAge["apply-large"].Seconds())
		expect("ApproximateAgeOfOldestMessage", reconcileJobs, oldestMessageAge["reconcile-jobs"].Seconds())
		for name, id := range fns {
			expect("Errors", id, functionErrorThreshold[name])
			expect("Throttles", id, 1)
		}
		expect("5xx", r.logicalID(t, "AWS::ApiGatewayV2::Api", "HttpApi"), apiServerErrorThreshold)
		expect("ACUUtilization", r.logicalID(t, "AWS::RDS::DBCluster", "ControlCluster"), acuUtilizationPercent)
		for i := range p.Shards {
			expect("ACUUtilization", r.logicalID(t, "AWS::RDS::DBCluster", fmt.Sprintf("Shard%dCluster", i)), acuUtilizationPercent)
		}
		// DLQ depth and oldest message of 7 queues, errors and throttles of
		// 11 functions, API 5xx, capacity of each cluster, outbox age, the
		// 6 operations alarms (ops_test.go checks those; parked change
		// events among them).
		equal(t, "alarm count", len(alarms), 7+7+2*11+1+1+p.Shards+1+6)
		for id, a := range r.resources("AWS::CloudWatch::Alarm") {
			// A threshold of 0 with >= would alarm on every datapoint.
			if th := num(t, a["Properties"].(map[string]any)["Threshold"]); th <= 0 {
				t.Errorf("%s: threshold %v", id, th)
			}
		}
		tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1))

		// Topics: change events (for the relay) and alarms, KMS-encrypted, TLS only.
		tmpl.ResourceCountIs(jsii.String("AWS::SNS::Topic"), jsii.Number(2))
		kmsKey := r.logicalID(t, "AWS::KMS::Key", "TopicsKey")
		tmpl.AllResourcesProperties(jsii.String("AWS::SNS::Topic"), match(obj(map[string]any{
			"KmsMasterKeyId": map[string]any{"Fn::GetAtt": []any{kmsKey, "Arn"}},
		})))
		tmpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), match(obj(map[string]any{
			"EnableKeyRotation": true,
			"KeyPolicy": match(obj(map[string]any{"Statement": arrayW(&[]any{match(obj(map[string]any{
				"Principal": map[string]any{"Service": "cloudwatch.amazonaws.com"},
			}))})})),
		})))
		tmpl.ResourceCountIs(jsii.String("AWS::SNS::TopicPolicy"), jsii.Number(2))
		tmpl.AllResourcesProperties(jsii.String("AWS::SNS::TopicPolicy"), match(obj(map[string]any{
			"PolicyDocument": match(obj(map[string]any{"Statement": arrayW(&[]any{match(obj(map[string]any{
				"Effect":    "Deny",
				"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": "false"}},
			}))})})),
		})))
	})

	t.Run("outputs", func(t *testing.T) {
		defer failOnAssertionPanic(t)
		for _, name := range []string{"ApiUrl", "BucketName", "ArrivalsQueueUrl", "DiffJobsQueueUrl", "ApplySmallQueueUrl", "ApplyLargeQueueUrl",
			"ChangeEventsTopicArn", "AlarmTopicArn", "AdminTokenSecretArn", "ControlClusterEndpoint", "ShardClusterEndpoints", "DashboardName",
			"AnalyticsQueueUrl", "WebhooksQueueUrl", "AnalyticsTableName", "WebhookKeysSecretArn"} {
			tmpl.HasOutput(jsii.String(name), match(obj(map[string]any{"Value": assertions.Match_AnyValue()})))
		}
	})
}
