package main

import (
	"regexp"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/retailcatalog/catalog/functions/finance/costs"
)

// Cost allocation tags on every taggable resource: activate them in the
// Billing console (Cost allocation tags) to split the account's bill the way
// the cost report does (docs/DEPLOY.md, "What it costs").
const (
	TagProject   = "project"
	TagComponent = "component"
	// ProjectName is the value of the project tag.
	ProjectName = "catalog"
	// defaultComponent tags what componentRules does not name.
	defaultComponent = "platform"
)

// componentRules map the stack's top-level construct ids to a component,
// first match wins. A new construct gets defaultComponent until it is named
// here.
var componentRules = []struct {
	pattern   *regexp.Regexp
	component string
}{
	{regexp.MustCompile(`(Alarm|Dashboard)$|^AlarmTopic`), "monitoring"},
	{regexp.MustCompile(`^(Upload)`), "upload"},
	{regexp.MustCompile(`^(Read)`), "read"},
	{regexp.MustCompile(`^(Diff|Arrival)`), "diff"},
	{regexp.MustCompile(`^(Apply)`), "apply"},
	{regexp.MustCompile(`^(Relay)`), "relay"},
	{regexp.MustCompile(`^(Consumer|Analytics|Webhook)`), "consumers"},
	{regexp.MustCompile(`^(Migrate|Schema)`), "schema"},
	{regexp.MustCompile(`^(ControlCluster|Shard\d+Cluster|LogRetention|.*Proxy)`), "database"},
	{regexp.MustCompile(`^(Vpc|Custom::Vpc|.*SG$)`), "network"},
	{regexp.MustCompile(`^(CatalogBucket|AccessLogsBucket|BucketNotificationsHandler)`), "storage"},
	{regexp.MustCompile(`^(TopicsKey|ChangeEventsTopic)`), "events"},
	{regexp.MustCompile(`^(HttpApi|ApiAccessLogs|DefaultStage|AdminTokenSecret)`), "api"},
}

// ComponentOf is the component tag of a top-level construct id.
func ComponentOf(id string) string {
	for _, r := range componentRules {
		if r.pattern.MatchString(id) {
			return r.component
		}
	}
	return defaultComponent
}

// addCostTags tags every taggable resource of the stack with the project
// and its component. Call it once every construct exists.
func addCostTags(stack awscdk.Stack) {
	awscdk.Tags_Of(stack).Add(jsii.String(TagProject), jsii.String(ProjectName), nil)
	for _, c := range *stack.Node().Children() {
		component := ComponentOf(*c.Node().Id())
		awscdk.Tags_Of(c).Add(jsii.String(TagComponent), jsii.String(component), nil)
		// The CDK's own custom resource providers are plain CfnResources
		// that the tag aspect skips: give their roles and functions the
		// tags as properties.
		for _, d := range *c.Node().FindAll(constructs.ConstructOrder_PREORDER) {
			res, ok := d.(awscdk.CfnResource)
			if !ok || *awscdk.TagManager_IsTaggable(res) || !untaggedProviderTypes[*res.CfnResourceType()] {
				continue
			}
			res.AddPropertyOverride(jsii.String("Tags"), []map[string]string{
				{"Key": TagComponent, "Value": component}, {"Key": TagProject, "Value": ProjectName},
			})
		}
	}
}

// untaggedProviderTypes are the resource types of CDK custom resource
// providers that take tags as a property.
var untaggedProviderTypes = map[string]bool{"AWS::IAM::Role": true, "AWS::Lambda::Function": true}

// CostDeployment is what the cost report's shared fixed costs are computed
// from (CATALOG_COST_DEPLOYMENT of the upload function, which serves the
// report): the clusters and instances the parameters deploy, each at the
// minimum capacity (the real average is CloudWatch's
// ServerlessDatabaseCapacity), the proxies, the SQS and Secrets Manager
// endpoints in 2 AZs, the alarms monitoring.go made, one dashboard, a
// secret per cluster plus the admin token's, the topics' key, and the
// upload retention.
func CostDeployment(p Params, alarms int) costs.Deployment {
	d := costs.DefaultDeployment()
	d.Clusters = p.Shards + 1
	d.InstancesPerCluster = 1 + p.ReadersPerShard
	d.AverageACU = p.MinACU
	d.RDSProxy = p.RDSProxy
	d.InterfaceEndpoints, d.AZs = 4, 2 // SQS, Secrets Manager, SNS, Lambda (network.go)
	d.Alarms = alarms
	d.Secrets = d.Clusters + 2 // + the admin token and the webhook keys
	d.KMSKeys = 1
	d.UploadRetentionDays = p.UploadRetentionDays
	return d
}
