package main

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/retailcatalog/catalog/functions/publish/analytics"
)

// ApplyNagChecks runs the cdk-nag AwsSolutions rules over everything under
// scope at synthesis: findings become error or warning annotations, and an
// unsuppressed error fails the synthesis.
func ApplyNagChecks(scope constructs.IConstruct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

// nagRefs are the constructs that carry suppressions.
type nagRefs struct {
	stack       awscdk.Stack
	bucketID    string // logical id of the catalog bucket
	fns         *catalogFunctions
	api         *api
	adminSecret constructs.IConstruct
	webhookKeys constructs.IConstruct
}

// objects is the appliesTo of a finding on the catalog bucket's objects
// under prefix.
func (r nagRefs) objects(prefix string) string {
	return "Resource::<" + r.bucketID + ".Arn>/" + prefix + "*"
}

// grantInvokeSuppression accepts the wildcard grantInvoke adds for the
// versions and aliases of fn to a role that may invoke fn only; invokesOnly
// says which.
func (r nagRefs) grantInvokeSuppression(fn awslambda.IFunction, invokesOnly string) *cdknag.NagPackSuppression {
	return suppress("AwsSolutions-IAM5", "aws-cdk-lib's grantInvoke on a function grants lambda:InvokeFunction on the function "+
		"and on its versions and aliases (<arn>:*); "+invokesOnly,
		"Resource::<"+*r.stack.GetLogicalId(fn.Node().DefaultChild().(awscdk.CfnElement))+".Arn>:*")
}

func suppress(id, reason string, appliesTo ...string) *cdknag.NagPackSuppression {
	s := &cdknag.NagPackSuppression{Id: jsii.String(id), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		list := make([]any, len(appliesTo))
		for i, a := range appliesTo {
			list[i] = a
		}
		s.AppliesTo = &list
	}
	return s
}

// addNagSuppressions records, next to each finding that is accepted, why.
// Every suppression names the exact finding (appliesTo) where the rule is
// granular, so a new wildcard elsewhere still fails the checks.
func addNagSuppressions(r nagRefs) {
	const eniReason = "Lambda functions in a VPC need ec2:CreateNetworkInterface, DescribeNetworkInterfaces, " +
		"DescribeSubnets, DeleteNetworkInterface, Assign/UnassignPrivateIpAddresses; the Describe actions support no " +
		"resource-level permissions, and Lambda validates the role against them before the function's ENIs exist. " +
		"This statement replaces the broader AWS managed AWSLambdaVPCAccessExecutionRole."
	objects := r.objects
	role := func(fn interface{ Role() awsiam.IRole }) constructs.IConstruct { return fn.Role() }

	perRole := []struct {
		role  constructs.IConstruct
		rules []*cdknag.NagPackSuppression
	}{
		{role(r.fns.upload), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
			suppress("AwsSolutions-IAM5", "upload presigns PUT URLs for snapshots/{retailer_id}/{generation}/upload with "+
				"its own credentials; the key is chosen per request, so the role allows s3:PutObject (only) under "+
				"snapshots/ and the signature binds each URL to one exact key.", objects(prefixSnapshots)),
			suppress("AwsSolutions-IAM5", "upload keeps a cost report too large for an API answer under "+
				"reports/costs/{from}_{to}_{random}.{ext} and presigns a GET of it; the key is made per request, so the "+
				"role may put and get objects under reports/costs/ only (expired after a day).", objects(prefixReports)),
			suppress("AwsSolutions-IAM5", "upload reads the problems file of the generation a retailer asks for, "+
				"problems/{retailer_id}/{generation}, or presigns a GET of it (over 5 MB): s3:GetObject only, under problems/.", objects(prefixProblems)),
			suppress("AwsSolutions-IAM5", "upload reads the plan of any retailer's previewed or held generation "+
				"(plans/{retailer_id}/{generation}/...) for the plan route: s3:GetObject only, under plans/.", objects(prefixPlans)),
		}},
		{role(r.fns.read), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
		}},
		{role(r.fns.migrate), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
		}},
		{role(r.fns.arrival), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
		}},
		{role(r.fns.diff), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
			suppress("AwsSolutions-IAM5", "diff reads the upload of any retailer and generation named by the S3 event: "+
				"s3:GetObject only, under snapshots/.", objects(prefixSnapshots)),
			suppress("AwsSolutions-IAM5", "diff reads the baseline index and writes (and tags for expiry) the new "+
				"index of a retailer's generation: GetObject, PutObject, PutObjectTagging only, under indexes/.", objects(prefixIndexes)),
			suppress("AwsSolutions-IAM5", "diff writes the claim-check chunk objects of a generation: s3:PutObject "+
				"only, under chunks/.", objects(prefixChunks)),
			suppress("AwsSolutions-IAM5", "diff writes the problems file of a generation it read, "+
				"problems/{retailer_id}/{generation}: s3:PutObject only, under problems/.", objects(prefixProblems)),
			suppress("AwsSolutions-IAM5", "diff writes the plan of a previewed or held generation, "+
				"plans/{retailer_id}/{generation}/...: s3:PutObject only, under plans/.", objects(prefixPlans)),
		}},
	}
	for _, fn := range []interface{ Role() awsiam.IRole }{r.fns.applySmall, r.fns.applyLarge} {
		perRole = append(perRole, struct {
			role  constructs.IConstruct
			rules []*cdknag.NagPackSuppression
		}{role(fn), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
			suppress("AwsSolutions-IAM5", "apply reads the chunk objects named by its messages, for any retailer and "+
				"generation: s3:GetObject only, under chunks/.", objects(prefixChunks)),
		}})
	}
	// Change events (events.go): the relay, and the fast path of apply and
	// diff, which publish right after their commits.
	const changeObjects = "the relay (and the fast path of apply and diff) writes the change object of a chunk some of whose " +
		"ops changed nothing, changes/{retailer}/{generation}/{seq}, and reads it (or the chunk object) back for a replay: " +
		"GetObject and PutObject only, under changes/ (chunks/: GetObject only)."
	const topicKey = "Publishing to the KMS-encrypted change-events topic needs kms:GenerateDataKey* (GenerateDataKey and " +
		"GenerateDataKeyWithoutPlaintext) and kms:Decrypt on the topics' key, as aws-cdk-lib's grantPublish grants them; the " +
		"resource is that one key."
	publishers := []interface{ Role() awsiam.IRole }{r.fns.relay, r.fns.applySmall, r.fns.applyLarge, r.fns.diff}
	for _, fn := range publishers {
		rules := []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", changeObjects, objects(prefixChanges)),
			suppress("AwsSolutions-IAM5", topicKey, "Action::kms:GenerateDataKey*"),
		}
		if fn == r.fns.relay {
			rules = append(rules, suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
				suppress("AwsSolutions-IAM5", changeObjects, objects(prefixChunks)))
		}
		perRole = append(perRole, struct {
			role  constructs.IConstruct
			rules []*cdknag.NagPackSuppression
		}{role(fn), rules})
	}
	perRole = append(perRole, []struct {
		role  constructs.IConstruct
		rules []*cdknag.NagPackSuppression
	}{
		{role(r.fns.analytics), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
			suppress("AwsSolutions-IAM5", "analytics reads the change object each event names (a chunk object or a "+
				"change object of any retailer and generation): s3:GetObject only.", objects(prefixChunks), objects(prefixChanges)),
			suppress("AwsSolutions-IAM5", "analytics writes the Parquet files of any retailer and day, "+
				"analytics/changes/retailer_id={id}/date={day}/{batch}.parquet: s3:PutObject only, under analytics/changes/.",
				objects(analytics.Prefix)),
		}},
		{role(r.fns.webhooks), []*cdknag.NagPackSuppression{
			suppress("AwsSolutions-IAM5", eniReason, "Resource::*"),
		}},
	}...)
	for _, pr := range perRole {
		cdknag.NagSuppressions_AddResourceSuppressions(pr.role, &pr.rules, jsii.Bool(true))
	}

	cdknag.NagSuppressions_AddResourceSuppressions(r.adminSecret, &[]*cdknag.NagPackSuppression{
		suppress("AwsSolutions-SMG4", "The admin token is a bearer token that operators hold outside AWS; an "+
			"automatic rotation would lock them out without a way to hand them the new value. It is rotated by "+
			"hand (docs/DEPLOY.md: put a new random value, tell the operators); retailer tokens are per retailer "+
			"and stored only as hashes."),
	}, jsii.Bool(false))

	cdknag.NagSuppressions_AddResourceSuppressions(r.fns.relaySchedulerRole, &[]*cdknag.NagPackSuppression{
		r.grantInvokeSuppression(r.fns.relay, "the schedule invokes the relay function only."),
	}, jsii.Bool(true))

	cdknag.NagSuppressions_AddResourceSuppressions(r.webhookKeys, &[]*cdknag.NagPackSuppression{
		suppress("AwsSolutions-SMG4", "The webhook keys seal the retailers' webhook secrets stored in the control "+
			"database; a rotation must keep the old key until every secret is sealed again (put \"<new>,<old>\": the first "+
			"seals, every one opens), which Secrets Manager's single-value rotation cannot do. Rotated by hand "+
			"(docs/DEPLOY.md)."),
	}, jsii.Bool(false))

	cdknag.NagSuppressions_AddResourceSuppressions(r.api.httpAPI, &[]*cdknag.NagPackSuppression{
		suppress("AwsSolutions-APIG4", "Authorization is in the functions, per DESIGN 5: admin routes check the admin "+
			"bearer token, retailer routes check the retailer's token against its hash in the control database (401/403 "+
			"in the contract's error shape); storefront reads and /healthz are public by contract."),
	}, jsii.Bool(true))

	// Singleton custom resources that aws-cdk-lib adds for us.
	for _, child := range *r.stack.Node().Children() {
		id := *child.Node().Id()
		switch {
		case strings.HasPrefix(id, "BucketNotificationsHandler"):
			cdknag.NagSuppressions_AddResourceSuppressions(child, &[]*cdknag.NagPackSuppression{
				suppress("AwsSolutions-IAM4", "aws-cdk-lib's BucketNotificationsHandler custom resource (it writes the "+
					"bucket's notification configuration at deploy time, which CloudFormation cannot do for an "+
					"existing bucket) uses AWSLambdaBasicExecutionRole for its own logs; it runs only during deployments.",
					"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"),
			}, jsii.Bool(true))
		case strings.HasPrefix(id, "LogRetention"):
			cdknag.NagSuppressions_AddResourceSuppressions(child, &[]*cdknag.NagPackSuppression{
				suppress("AwsSolutions-IAM4", "aws-cdk-lib's LogRetention custom resource sets the retention of the "+
					"postgresql log groups that Aurora creates itself (not the stack); it uses AWSLambdaBasicExecutionRole "+
					"for its own logs and runs only during deployments.",
					"Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"),
				suppress("AwsSolutions-IAM5", "aws-cdk-lib's LogRetention custom resource calls "+
					"logs:PutRetentionPolicy/DeleteRetentionPolicy on log groups whose names Aurora chooses at "+
					"creation; generated by aws-cdk-lib, used only during deployments.",
					"Resource::*"),
			}, jsii.Bool(true))
		}
	}
}
