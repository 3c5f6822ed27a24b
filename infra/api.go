package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
)

// Route is one HTTP API route of DESIGN 5 and the function serving it.
type Route struct {
	// Method is the HTTP method.
	Method string
	// Path is the API Gateway path; {product_id+} is greedy because a
	// product_id may contain an encoded '/'.
	Path string
	// Function is "upload", "read" or "ops".
	Function string
	// RateLimit and BurstLimit, when set, override the stage throttling for
	// this route (requests per second).
	RateLimit, BurstLimit float64
}

// Key is the API Gateway route key ("METHOD /path").
func (r Route) Key() string { return r.Method + " " + r.Path }

// Routes lists every route of DESIGN 5.
var Routes = []Route{
	{Method: "POST", Path: "/v1/admin/retailers", Function: "upload", RateLimit: 5, BurstLimit: 10},
	{Method: "POST", Path: "/v1/retailers/{retailer_id}/snapshots", Function: "upload", RateLimit: 100, BurstLimit: 200},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/snapshots", Function: "upload"},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/snapshots/{generation}", Function: "upload"},
	{Method: "POST", Path: "/v1/retailers/{retailer_id}/snapshots/{generation}/confirm", Function: "upload", RateLimit: 50, BurstLimit: 100},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/snapshots/{generation}/problems", Function: "upload", RateLimit: 10, BurstLimit: 20},
	{Method: "POST", Path: "/v1/retailers/{retailer_id}/rollback", Function: "upload", RateLimit: 10, BurstLimit: 20},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/snapshots/{generation}/plan", Function: "upload"},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/settings", Function: "upload"},
	{Method: "PUT", Path: "/v1/retailers/{retailer_id}/settings", Function: "upload", RateLimit: 20, BurstLimit: 40},
	{Method: "POST", Path: "/v1/retailers/{retailer_id}/token", Function: "upload", RateLimit: 5, BurstLimit: 10},
	{Method: "POST", Path: "/v1/admin/retailers/{retailer_id}/token", Function: "upload", RateLimit: 5, BurstLimit: 10},
	{Method: "DELETE", Path: "/v1/admin/retailers/{retailer_id}", Function: "upload", RateLimit: 5, BurstLimit: 10},
	{Method: "PUT", Path: "/v1/retailers/{retailer_id}/webhook", Function: "upload", RateLimit: 20, BurstLimit: 40},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/webhook", Function: "upload"},
	{Method: "DELETE", Path: "/v1/retailers/{retailer_id}/webhook", Function: "upload", RateLimit: 20, BurstLimit: 40},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/products/{product_id+}", Function: "read"},
	{Method: "GET", Path: "/v1/retailers/{retailer_id}/products", Function: "read"},
	{Method: "GET", Path: "/v1/products/{product_id+}", Function: "read"},
	{Method: "POST", Path: "/v1/retailers/{retailer_id}/products/batch-get", Function: "read"},
	{Method: "GET", Path: "/healthz", Function: "read"},
	{Method: "GET", Path: "/v1/admin/costs", Function: "upload", RateLimit: 5, BurstLimit: 10},
	// Operations (DESIGN 9 and 8), served by the ops function.
	{Method: "GET", Path: "/v1/admin/retailers/{retailer_id}/why", Function: "ops", RateLimit: 20, BurstLimit: 40},
	{Method: "POST", Path: "/v1/admin/reconcile", Function: "ops", RateLimit: 1, BurstLimit: 5},
	{Method: "POST", Path: "/v1/admin/gc", Function: "ops", RateLimit: 1, BurstLimit: 2},
	{Method: "GET", Path: "/v1/admin/reconcile/{run_id}", Function: "ops", RateLimit: 20, BurstLimit: 40},
	{Method: "POST", Path: "/v1/admin/retailers/{retailer_id}/move", Function: "ops", RateLimit: 2, BurstLimit: 5},
	{Method: "GET", Path: "/v1/admin/moves/{move_id}", Function: "ops", RateLimit: 20, BurstLimit: 40},
	{Method: "GET", Path: "/v1/admin/dlq", Function: "ops", RateLimit: 5, BurstLimit: 10},
	{Method: "GET", Path: "/v1/admin/dlq/{queue}", Function: "ops", RateLimit: 5, BurstLimit: 10},
	{Method: "POST", Path: "/v1/admin/dlq/{queue}/redrive", Function: "ops", RateLimit: 5, BurstLimit: 10},
	{Method: "GET", Path: "/v1/admin/outbox/parked", Function: "ops", RateLimit: 5, BurstLimit: 10},
	{Method: "POST", Path: "/v1/admin/outbox/redrive", Function: "ops", RateLimit: 5, BurstLimit: 10},
	{Method: "POST", Path: "/v1/admin/retailers/{retailer_id}/replay", Function: "ops", RateLimit: 1, BurstLimit: 5},
}

// accessLogFormat is one JSON line per request with the fields needed to
// trace a request to its function invocation.
const accessLogFormat = `{"requestId":"$context.requestId","ip":"$context.identity.sourceIp",` +
	`"requestTime":"$context.requestTime","method":"$context.httpMethod","routeKey":"$context.routeKey",` +
	`"path":"$context.path","status":"$context.status","protocol":"$context.protocol",` +
	`"responseLength":"$context.responseLength","responseLatency":"$context.responseLatency",` +
	`"integrationStatus":"$context.integrationStatus","integrationLatency":"$context.integrationLatency",` +
	`"integrationRequestId":"$context.integration.requestId","integrationError":"$context.integrationErrorMessage",` +
	`"error":"$context.error.message"}`

// api is the HTTP API and its $default stage.
type api struct {
	httpAPI awsapigatewayv2.HttpApi
	stage   awsapigatewayv2.HttpStage
	url     string
}

func newAPI(scope constructs.Construct, p Params, fns *catalogFunctions) *api {
	httpAPI := awsapigatewayv2.NewHttpApi(scope, jsii.String("HttpApi"), &awsapigatewayv2.HttpApiProps{
		Description:        jsii.String("Retailer catalog API (DESIGN 5)"),
		CreateDefaultStage: jsii.Bool(false),
	})
	integrations := map[string]awsapigatewayv2integrations.HttpLambdaIntegration{}
	for name, fn := range map[string]awslambda.Function{"upload": fns.upload, "read": fns.read, "ops": fns.ops} {
		integrations[name] = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(name+"Integration"), fn,
			&awsapigatewayv2integrations.HttpLambdaIntegrationProps{
				PayloadFormatVersion: awsapigatewayv2.PayloadFormatVersion_VERSION_2_0(),
			})
	}
	var routes []awsapigatewayv2.HttpRoute
	for _, r := range Routes {
		added := httpAPI.AddRoutes(&awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integrations[r.Function],
		})
		routes = append(routes, *added...)
	}

	accessLogs := awslogs.NewLogGroup(scope, jsii.String("ApiAccessLogs"), &awslogs.LogGroupProps{
		Retention:     awslogs.RetentionDays_ONE_MONTH,
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	stage := awsapigatewayv2.NewHttpStage(scope, jsii.String("DefaultStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    httpAPI,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle: &awsapigatewayv2.ThrottleSettings{
			RateLimit:  jsii.Number(float64(p.APIRateLimit)),
			BurstLimit: jsii.Number(float64(p.APIBurstLimit)),
		},
	})
	cfnStage := stage.Node().DefaultChild().(awsapigatewayv2.CfnStage)
	cfnStage.SetAccessLogSettings(&awsapigatewayv2.CfnStage_AccessLogSettingsProperty{
		DestinationArn: accessLogs.LogGroupArn(),
		Format:         jsii.String(accessLogFormat),
	})
	routeSettings := map[string]any{}
	for _, r := range Routes {
		if r.RateLimit > 0 {
			routeSettings[r.Key()] = map[string]any{
				"ThrottlingRateLimit":  r.RateLimit,
				"ThrottlingBurstLimit": r.BurstLimit,
			}
		}
	}
	cfnStage.SetRouteSettings(routeSettings)
	// Route settings name route keys: the routes must exist first.
	for _, r := range routes {
		cfnStage.Node().AddDependency(r)
	}
	return &api{httpAPI: httpAPI, stage: stage, url: *httpAPI.ApiEndpoint() + "/"}
}
