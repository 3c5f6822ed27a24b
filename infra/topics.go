package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// topics are the SNS topics of the stack and the key encrypting them.
type topics struct {
	key     awskms.Key
	changes awssns.Topic // change events (DESIGN 2 step 9), published by the relay
	alarms  awssns.Topic // where every alarm goes
}

func newTopics(scope constructs.Construct, stackName string, p Params) *topics {
	key := awskms.NewKey(scope, jsii.String("TopicsKey"), &awskms.KeyProps{
		Description:       jsii.String("Encrypts the catalog SNS topics"),
		EnableKeyRotation: jsii.Bool(true),
		RemovalPolicy:     awscdk.RemovalPolicy_RETAIN,
	})
	// CloudWatch alarms publish to an encrypted topic only when the key
	// lets the cloudwatch service use it.
	key.AddToResourcePolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:        jsii.String("AllowCloudWatchAlarms"),
		Principals: &[]awsiam.IPrincipal{awsiam.NewServicePrincipal(jsii.String("cloudwatch.amazonaws.com"), nil)},
		Actions:    jsii.Strings("kms:Decrypt", "kms:GenerateDataKey*"),
		Resources:  jsii.Strings("*"),
	}), nil)
	t := &topics{key: key}
	t.changes = awssns.NewTopic(scope, jsii.String("ChangeEventsTopic"), &awssns.TopicProps{
		TopicName:   jsii.String(stackName + "-change-events"),
		DisplayName: jsii.String("Catalog change events"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	t.alarms = awssns.NewTopic(scope, jsii.String("AlarmTopic"), &awssns.TopicProps{
		TopicName:   jsii.String(stackName + "-alarms"),
		DisplayName: jsii.String("Catalog alarms"),
		MasterKey:   key,
		EnforceSSL:  jsii.Bool(true),
	})
	if p.AlarmEmail != "" {
		t.alarms.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(p.AlarmEmail), nil))
	}
	return t
}

// newAdminTokenSecret is the operator bearer token of the admin routes: a
// random plain-string secret, read by the upload function.
func newAdminTokenSecret(scope constructs.Construct, stackName string) awssecretsmanager.Secret {
	return awssecretsmanager.NewSecret(scope, jsii.String("AdminTokenSecret"), &awssecretsmanager.SecretProps{
		SecretName:  jsii.String(stackName + "/admin-token"),
		Description: jsii.String("Catalog admin bearer token (Authorization: Bearer <token> on /v1/admin/*)"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(48),
			ExcludePunctuation: jsii.Bool(true),
			IncludeSpace:       jsii.Bool(false),
		},
	})
}
