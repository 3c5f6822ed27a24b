package main

import (
	"fmt"
	"testing"

	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/serve/control"
)

// tagsOf reads a resource's Tags, given as a list of {Key, Value} or as a
// map (API Gateway v2, SSM).
func tagsOf(res map[string]any) (map[string]string, bool) {
	props, _ := res["Properties"].(map[string]any)
	raw, ok := props["Tags"]
	if !ok {
		return nil, false
	}
	out := map[string]string{}
	switch x := raw.(type) {
	case []any:
		for _, e := range x {
			m := e.(map[string]any)
			out[fmt.Sprint(m["Key"])] = render(m["Value"])
		}
	case map[string]any:
		for k, v := range x {
			out[k] = render(v)
		}
	}
	return out, true
}

// TestCostAllocationTags: every resource that can carry tags carries the
// project and component cost allocation tags, so the account's bill can be
// checked against the cost report.
func TestCostAllocationTags(t *testing.T) {
	r := synth(t, nil)
	mustBeTagged := map[string]bool{
		"AWS::Lambda::Function": true, "AWS::SQS::Queue": true, "AWS::S3::Bucket": true, "AWS::RDS::DBCluster": true,
		"AWS::RDS::DBInstance": true, "AWS::RDS::DBProxy": true, "AWS::Logs::LogGroup": true, "AWS::SNS::Topic": true,
		"AWS::KMS::Key": true, "AWS::SecretsManager::Secret": true, "AWS::EC2::VPC": true, "AWS::EC2::Subnet": true,
		"AWS::EC2::SecurityGroup": true, "AWS::IAM::Role": true, "AWS::ApiGatewayV2::Api": true, "AWS::CloudWatch::Alarm": true,
	}
	components := map[string]int{}
	for id, res := range r.resources("") {
		typ := fmt.Sprint(res["Type"])
		tags, ok := tagsOf(res)
		if !ok {
			if mustBeTagged[typ] {
				t.Errorf("%s (%s) has no tags", id, typ)
			}
			continue
		}
		if tags[TagProject] != ProjectName || tags[TagComponent] == "" {
			t.Errorf("%s (%s): tags %v, want %s=%s and a %s", id, typ, tags, TagProject, ProjectName, TagComponent)
		}
		components[tags[TagComponent]]++
	}
	t.Logf("resources per component: %v", components)
	for _, c := range []struct{ typ, prefix, component string }{
		{"AWS::Lambda::Function", "Read", "read"}, {"AWS::Lambda::Function", "ApplySmall", "apply"},
		{"AWS::S3::Bucket", "CatalogBucket", "storage"}, {"AWS::RDS::DBCluster", "Shard0Cluster", "database"},
		{"AWS::SQS::Queue", "DiffJobsQueue", "diff"}, {"AWS::CloudWatch::Alarm", "ApplySmallDlqDepthAlarm", "monitoring"},
		{"AWS::EC2::VPC", "Vpc", "network"}, {"AWS::ApiGatewayV2::Api", "HttpApi", "api"},
	} {
		tags, _ := tagsOf(r.resources(c.typ)[r.logicalID(t, c.typ, c.prefix)])
		if tags[TagComponent] != c.component {
			t.Errorf("%s %s: component %q, want %q", c.typ, c.prefix, tags[TagComponent], c.component)
		}
	}
	if components[defaultComponent] > 0 {
		t.Logf("%d resources tagged %q: name their constructs in infra/tags.go componentRules", components[defaultComponent], defaultComponent)
	}
}

// modelInputFor is DESIGN 1's scale with the stack's own sizes.
func modelInputFor(p Params) costs.ModelInput {
	in := costs.DefaultModelInput()
	in.MinACU, in.MaxACU, in.RDSProxy = p.MinACU, p.MaxACU, p.RDSProxy
	in.ApplySmallConcurrency, in.ApplyLargeConcurrency, in.DiffConcurrency = p.ApplySmallConcurrency, p.ApplyLargeConcurrency, p.DiffMaxConcurrency
	in.InflightCap, in.LargeThresholdRows, in.ReadMemoryMB = p.InflightCap, p.LargeThresholdRows, p.ReadMemoryMB
	in.UploadRetentionDays = p.UploadRetentionDays
	return in
}

// TestDefaultsFollowTheModel: cdk.json's storefront throttle and reserved
// read environments are what `catalogctl model` says DESIGN 1's ~22K reads/s
// need, the synthesized stack has them, and the model's concurrency fits
// Lambda's default account quota.
func TestDefaultsFollowTheModel(t *testing.T) {
	p := DefaultParams()
	m, err := costs.DefaultPricer().RunModel(modelInputFor(p))
	if err != nil {
		t.Fatal(err)
	}
	if p.APIRateLimit < m.Stack.APIRateLimit || p.APIRateLimit > 2*m.Stack.APIRateLimit {
		t.Errorf("apiRateLimit %d; the model needs %d (read QPS %v + 10%%)", p.APIRateLimit, m.Stack.APIRateLimit, m.Input.ReadQPS)
	}
	if p.ReadReservedConcurrency < m.Stack.ReadReservedConcurrency || p.ReadReservedConcurrency > 2*m.Stack.ReadReservedConcurrency {
		t.Errorf("readReservedConcurrency %d; the model needs %d", p.ReadReservedConcurrency, m.Stack.ReadReservedConcurrency)
	}
	if m.Stack.LambdaConcurrency > 1000 {
		t.Errorf("the model needs %d concurrent executions, over Lambda's default quota of 1,000", m.Stack.LambdaConcurrency)
	}
	if p.Shards > m.Stack.Shards {
		t.Errorf("cdk.json deploys %d shards, more than the %d the model needs at full scale", p.Shards, m.Stack.Shards)
	}
	if m.Stack.Shards > MaxShards {
		t.Errorf("the model needs %d shards, over the stack's maximum of %d", m.Stack.Shards, MaxShards)
	}

	r := synth(t, nil)
	equal(t, "read reserved concurrency", r.props(t, r.function(t, "read"))["ReservedConcurrentExecutions"], float64(p.ReadReservedConcurrency))
	stage := r.props(t, r.logicalID(t, "AWS::ApiGatewayV2::Stage", "DefaultStage"))
	rs, _ := stage["DefaultRouteSettings"].(map[string]any)
	equal(t, "stage rate limit", rs["ThrottlingRateLimit"], float64(p.APIRateLimit))
}

// TestCostDeploymentIsTheStack: the sizes the cost report's fixed costs
// come from (CATALOG_COST_DEPLOYMENT) are those of the synthesized stack,
// and the upload function keeps large reports where the bucket expires them.
func TestCostDeploymentIsTheStack(t *testing.T) {
	for _, overrides := range []map[string]any{nil, scaled} {
		r := synth(t, overrides)
		d := CostDeployment(r.params, len(r.resources("AWS::CloudWatch::Alarm")))
		count := func(typ string) int { return len(r.resources(typ)) }
		equal(t, "clusters", count("AWS::RDS::DBCluster"), d.Clusters)
		equal(t, "instances", count("AWS::RDS::DBInstance"), d.Clusters*d.InstancesPerCluster)
		equal(t, "alarms", count("AWS::CloudWatch::Alarm"), d.Alarms)
		equal(t, "dashboards", count("AWS::CloudWatch::Dashboard"), d.Dashboards)
		equal(t, "secrets", count("AWS::SecretsManager::Secret"), d.Secrets)
		proxies := 0
		if d.RDSProxy {
			proxies = d.Clusters
		}
		equal(t, "proxies", count("AWS::RDS::DBProxy"), proxies)
		interfaces := 0
		for _, ep := range r.resources("AWS::EC2::VPCEndpoint") {
			if ep["Properties"].(map[string]any)["VpcEndpointType"] == "Interface" {
				interfaces++
			}
		}
		equal(t, "interface endpoints", interfaces, d.InterfaceEndpoints)
		equal(t, "upload retention", d.UploadRetentionDays, r.params.UploadRetentionDays)
		equal(t, "CATALOG_COST_DEPLOYMENT", r.env(t, r.function(t, "upload"))[EnvCostDeployment], d.String())
	}
	equal(t, "reports prefix", prefixReports, control.ReportPrefix)
}
