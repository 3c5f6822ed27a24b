package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/aws/jsii-runtime-go"
)

// scaled are parameters far from the defaults: more shards and readers, no
// RDS Proxy, other concurrency.
var scaled = map[string]any{
	CtxShards: 3, CtxReadersPerShard: 2, CtxRDSProxy: false, CtxApplySmallConcurrency: 30,
	CtxApplyLargeConcurrency: 12, CtxDiffMaxConcurrency: 5, CtxInflightCap: 8, CtxLargeThresholdRows: 50000,
	CtxReadReservedConcurrency: 0,
}

// TestStackFollowsParameters: the context parameters size the stack.
func TestStackFollowsParameters(t *testing.T) {
	r := synth(t, scaled)
	defer failOnAssertionPanic(t)
	tmpl := r.template
	tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBCluster"), jsii.Number(4))
	tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBInstance"), jsii.Number(4*3))
	tmpl.ResourceCountIs(jsii.String("AWS::RDS::DBProxy"), jsii.Number(0))
	tmpl.ResourceCountIs(jsii.String("AWS::SecretsManager::RotationSchedule"), jsii.Number(4))
	// DLQ depth and oldest message of 7 queues, errors and throttles of 11
	// functions, API 5xx, capacity of 4 clusters, outbox age, and the 6
	// operations alarms (ops.go).
	tmpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Alarm"), jsii.Number(7+7+2*11+1+4+1+6))

	for name, want := range map[string]float64{"apply-small": 30, "apply-large": 12} {
		fn := r.function(t, name)
		equal(t, name+" reserved", r.props(t, fn)["ReservedConcurrentExecutions"], want)
	}
	if rc := r.props(t, r.function(t, "read"))["ReservedConcurrentExecutions"]; rc != nil {
		t.Errorf("read: readReservedConcurrency 0 must leave it unreserved, got %v", rc)
	}
	var conc []string
	for _, m := range r.resources("AWS::Lambda::EventSourceMapping") {
		p := m["Properties"].(map[string]any)
		conc = append(conc, render(p["ScalingConfig"]))
	}
	equalLines(t, "event source maximum concurrency", sortedCopy(conc), []string{
		`{"MaximumConcurrency":10}`, `{"MaximumConcurrency":12}`, `{"MaximumConcurrency":30}`, `{"MaximumConcurrency":3}`, `{"MaximumConcurrency":4}`,
		`{"MaximumConcurrency":4}`, `{"MaximumConcurrency":5}`})

	var dbs, readers []string
	for i := range 3 {
		dbs = append(dbs, "postgres://${"+r.logicalID(t, "AWS::RDS::DBCluster", fmt.Sprintf("Shard%dCluster", i))+".Endpoint.Address}:5432/catalog")
		readers = append(readers, "${"+r.logicalID(t, "AWS::RDS::DBCluster", fmt.Sprintf("Shard%dCluster", i))+".ReadEndpoint.Address}")
	}
	upload, read, diff := r.env(t, r.function(t, "upload")), r.env(t, r.function(t, "read")), r.env(t, r.function(t, "diff"))
	equal(t, "shard DBs", diff[EnvShardDBs], strings.Join(dbs, ","))
	equal(t, "shard readers without proxy", read[EnvShardReaders], strings.Join(readers, ","))
	equal(t, "control reader without proxy", read[EnvControlReader], "${"+r.logicalID(t, "AWS::RDS::DBCluster", "ControlCluster")+".ReadEndpoint.Address}")
	equal(t, "inflight cap", diff[EnvInflightCap], "8")
	equal(t, "large threshold", diff[EnvLargeThresholdRows], "50000")
	equal(t, "upload's shard DBs without proxy: the writers", upload[EnvShardDBs], strings.Join(dbs, ","))
	equal(t, "read's shard DBs without proxy: the writers", read[EnvShardDBs], strings.Join(dbs, ","))
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

// TestEnvironmentSize: with MaxShards shards, every function's environment
// still fits Lambda's 4 KB, estimating each reference by the longest value
// AWS gives it.
func TestEnvironmentSize(t *testing.T) {
	for _, overrides := range []map[string]any{nil, scaled} {
		r := synth(t, overrides)
		for id, fn := range r.resources("AWS::Lambda::Function") {
			props := fn["Properties"].(map[string]any)
			if !strings.HasPrefix(fmt.Sprint(props["Description"]), "catalog ") {
				continue
			}
			env, _ := props["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			size, perShard := 0, 0
			for k, v := range vars {
				n := r.estimateLen(t, v)
				size += len(k) + n
				if k == EnvShardDBs || k == EnvShardReaders {
					perShard += (n + 1) / r.params.Shards
				}
			}
			atMax := size + (MaxShards-r.params.Shards)*perShard
			t.Logf("%s (proxy=%v): ~%d bytes now, ~%d bytes at %d shards", id, r.params.RDSProxy, size, atMax, MaxShards)
			if atMax > 4096 {
				t.Errorf("%s: environment ~%d bytes at %d shards, over Lambda's 4 KB", id, atMax, MaxShards)
			}
		}
	}
}

// estimateLen is the longest plausible length of a CloudFormation value
// once deployed.
func (r *synthResult) estimateLen(t *testing.T, v any) int {
	switch x := v.(type) {
	case string:
		return len(x)
	case map[string]any:
		if join, ok := x["Fn::Join"].([]any); ok {
			parts := asList(join[1])
			n := len(fmt.Sprint(join[0])) * (len(parts) - 1)
			for _, p := range parts {
				n += r.estimateLen(t, p)
			}
			return n
		}
		var id, attr string
		switch x["Ref"] {
		case "AWS::Region":
			return len("ap-southeast-2")
		case "AWS::AccountId":
			return 12
		case "AWS::URLSuffix":
			return len("amazonaws.com.cn")
		}
		if ref, ok := x["Ref"].(string); ok {
			id = ref
		} else if att, ok := x["Fn::GetAtt"].([]any); ok {
			id, attr = att[0].(string), att[1].(string)
		}
		res := r.resources("")[id]
		props, _ := res["Properties"].(map[string]any)
		const region, account = "ap-southeast-2", "123456789012"
		switch fmt.Sprint(res["Type"]) + " " + attr {
		case "AWS::SecretsManager::SecretTargetAttachment ":
			return r.estimateLen(t, props["SecretId"])
		case "AWS::SecretsManager::Secret ":
			// arn:aws:secretsmanager:<region>:<account>:secret:<name>-XXXXXX
			name, ok := props["Name"].(string)
			if !ok {
				t.Errorf("secret %s has no fixed name", id)
			}
			return len("arn:aws:secretsmanager:"+region+":"+account+":secret:") + len(name) + 7
		case "AWS::SQS::Queue ":
			return len("https://sqs."+region+".amazonaws.com/"+account+"/") + len(fmt.Sprint(props["QueueName"]))
		case "AWS::S3::Bucket ":
			return 63
		case "AWS::Lambda::Function ":
			return 64 // a function name
		case "AWS::SNS::Topic ":
			name, ok := props["TopicName"].(string)
			if !ok {
				t.Errorf("topic %s has no fixed name", id)
			}
			return len("arn:aws:sns:"+region+":"+account+":") + len(name)
		case "AWS::RDS::DBProxy Endpoint":
			return len(fmt.Sprint(props["DBProxyName"])) + len(".proxy-abcdefghijkl."+region+".rds.amazonaws.com")
		case "AWS::RDS::DBProxyEndpoint Endpoint":
			return len(fmt.Sprint(props["DBProxyEndpointName"])) + len(".endpoint.proxy-abcdefghijkl."+region+".rds.amazonaws.com")
		case "AWS::RDS::DBCluster ReadEndpoint.Address", "AWS::RDS::DBCluster Endpoint.Address":
			// <cluster identifier>.cluster-ro-<12>.<region>.rds.amazonaws.com
			name, ok := props["DBClusterIdentifier"].(string)
			if !ok {
				t.Errorf("cluster %s has no fixed identifier", id)
			}
			return len(name) + len(".cluster-ro-abcdefghijkl."+region+".rds.amazonaws.com")
		}
		t.Errorf("no length estimate for %v", x)
	}
	return 0
}
