package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Subnet group names of the VPC. Both are isolated: there is no internet
// gateway and no NAT; AWS services are reached through VPC endpoints.
const (
	subnetApp  = "app"
	subnetData = "data"
	vpcMaxAZs  = 2
	postgres   = 5432
)

// network is the VPC, its endpoints and the security groups of each tier.
type network struct {
	vpc            awsec2.Vpc
	appSubnets     *awsec2.SubnetSelection
	dataSubnets    *awsec2.SubnetSelection
	lambdaSG       awsec2.SecurityGroup
	proxySG        awsec2.SecurityGroup
	dbSG           awsec2.SecurityGroup
	rotationSG     awsec2.SecurityGroup
	secretsManager awsec2.InterfaceVpcEndpoint
}

func newNetwork(scope constructs.Construct, flowLogs awss3.IBucket) *network {
	vpc := awsec2.NewVpc(scope, jsii.String("Vpc"), &awsec2.VpcProps{
		IpAddresses: awsec2.IpAddresses_Cidr(jsii.String("10.40.0.0/16")),
		MaxAzs:      jsii.Number(vpcMaxAZs),
		NatGateways: jsii.Number(0),
		SubnetConfiguration: &[]*awsec2.SubnetConfiguration{
			{Name: jsii.String(subnetApp), SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED, CidrMask: jsii.Number(20)},
			{Name: jsii.String(subnetData), SubnetType: awsec2.SubnetType_PRIVATE_ISOLATED, CidrMask: jsii.Number(24)},
		},
		// S3 through a gateway endpoint: free, and no NAT data charges for
		// multi-GB snapshot reads.
		GatewayEndpoints: &map[string]*awsec2.GatewayVpcEndpointOptions{
			"S3": {Service: awsec2.GatewayVpcEndpointAwsService_S3()},
		},
		FlowLogs: &map[string]*awsec2.FlowLogOptions{
			"FlowLogs": {
				Destination: awsec2.FlowLogDestination_ToS3(flowLogs, jsii.String("vpc-flow-logs/"), nil),
				TrafficType: awsec2.FlowLogTrafficType_ALL,
			},
		},
		RestrictDefaultSecurityGroup: jsii.Bool(true),
	})
	app := &awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetApp)}
	data := &awsec2.SubnetSelection{SubnetGroupName: jsii.String(subnetData)}

	n := &network{vpc: vpc, appSubnets: app, dataSubnets: data}
	n.lambdaSG = awsec2.NewSecurityGroup(scope, jsii.String("LambdaSG"), &awsec2.SecurityGroupProps{
		Vpc:         vpc,
		Description: jsii.String("Catalog functions: egress to the databases, proxies and VPC endpoints"),
		// Egress is open inside isolated subnets: there is no route out of
		// the VPC, only to the endpoints and the database tier.
		AllowAllOutbound: jsii.Bool(true),
	})
	n.proxySG = awsec2.NewSecurityGroup(scope, jsii.String("ProxySG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("RDS Proxies: PostgreSQL from the functions"),
		AllowAllOutbound: jsii.Bool(true),
	})
	n.dbSG = awsec2.NewSecurityGroup(scope, jsii.String("DatabaseSG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Aurora clusters: PostgreSQL from the functions, proxies and rotation"),
		AllowAllOutbound: jsii.Bool(false),
	})
	n.rotationSG = awsec2.NewSecurityGroup(scope, jsii.String("RotationSG"), &awsec2.SecurityGroupProps{
		Vpc:              vpc,
		Description:      jsii.String("Secret rotation functions: PostgreSQL and the Secrets Manager endpoint"),
		AllowAllOutbound: jsii.Bool(true),
	})
	pg := awsec2.Port_Tcp(jsii.Number(postgres))
	n.proxySG.AddIngressRule(n.lambdaSG, pg, jsii.String("functions to proxy"), nil)
	n.dbSG.AddIngressRule(n.lambdaSG, pg, jsii.String("functions to database"), nil)
	n.dbSG.AddIngressRule(n.proxySG, pg, jsii.String("proxy to database"), nil)

	// Interface endpoints for the AWS APIs the functions and the rotation
	// functions call, reachable (HTTPS) only from those security groups.
	// SNS: the relay and the fast path of apply and diff publish change
	// events; Lambda: the webhooks consumer hands each POST to the
	// webhook-sender function, which runs outside the VPC (events.go).
	endpoint := func(id string, svc awsec2.InterfaceVpcEndpointAwsService, from ...awsec2.SecurityGroup) awsec2.InterfaceVpcEndpoint {
		ep := vpc.AddInterfaceEndpoint(jsii.String(id), &awsec2.InterfaceVpcEndpointOptions{
			Service:           svc,
			Subnets:           app,
			PrivateDnsEnabled: jsii.Bool(true),
			Open:              jsii.Bool(false),
		})
		for _, sg := range from {
			ep.Connections().AllowDefaultPortFrom(sg, jsii.String("HTTPS to "+id))
		}
		return ep
	}
	endpoint("SqsEndpoint", awsec2.InterfaceVpcEndpointAwsService_SQS(), n.lambdaSG)
	endpoint("SnsEndpoint", awsec2.InterfaceVpcEndpointAwsService_SNS(), n.lambdaSG)
	endpoint("LambdaEndpoint", awsec2.InterfaceVpcEndpointAwsService_LAMBDA(), n.lambdaSG)
	n.secretsManager = endpoint("SecretsManagerEndpoint", awsec2.InterfaceVpcEndpointAwsService_SECRETS_MANAGER(), n.lambdaSG, n.rotationSG)
	return n
}
