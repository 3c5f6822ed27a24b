// Command infra is the CDK app of the catalog: `cdk deploy` (cdk.json at the
// repository root runs it) synthesizes the whole system of DESIGN 2 into one
// CloudFormation stack, sized by context parameters (see Params and
// docs/DEPLOY.md), with the cdk-nag AwsSolutions checks applied.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// Context keys of the app itself (not sizing parameters).
const (
	// CtxStackName is the stack name (default "Catalog").
	CtxStackName = "stackName"
	// CtxLambdaAssetDir is where the build script put the zips (default
	// "dist/lambda", relative to the repository root).
	CtxLambdaAssetDir = "lambdaAssetDir"
	// CtxNag turns the cdk-nag AwsSolutions checks off when "false".
	CtxNag = "nag"
)

func main() {
	code := run()
	jsii.Close()
	os.Exit(code)
}

func run() int {
	props := &awscdk.AppProps{}
	if os.Getenv("CDK_CONTEXT_JSON") == "" && os.Getenv("CONTEXT_OVERFLOW_LOCATION_ENV") == "" {
		// Run without the CDK CLI (go run ./infra): use cdk.json's context
		// (parameters and feature flags) as the CLI would.
		ctx, err := readCDKJSONContext("cdk.json")
		if err != nil {
			fmt.Fprintln(os.Stderr, "infra:", err)
			return 2
		}
		props.Context = &ctx
	}
	app := awscdk.NewApp(props)
	if _, _, err := BuildApp(app); err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		return 2
	}
	app.Synth(nil)
	return 0
}

// BuildApp adds the catalog stack to app as its context says (cdk.json and
// -c key=value): parameters, stack name, asset directory, and the cdk-nag
// checks unless the "nag" context is false.
func BuildApp(app awscdk.App) (awscdk.Stack, Params, error) {
	params, err := ParamsFromContext(app.Node())
	if err != nil {
		return nil, params, fmt.Errorf("invalid context parameters:\n%w", err)
	}
	props := &CatalogStackProps{
		StackProps: awscdk.StackProps{Env: envFromCLI()},
		Params:     params,
		AssetDir:   contextString(app, CtxLambdaAssetDir, "dist/lambda"),
	}
	if err := props.Validate(); err != nil {
		return nil, params, err
	}
	name := contextString(app, CtxStackName, "Catalog")
	if err := ValidateStackName(name); err != nil {
		return nil, params, err
	}
	stack := NewCatalogStack(app, name, props)
	if nag, err := toBool(orDefault(app.Node().TryGetContext(jsii.String(CtxNag)), true)); err != nil || nag {
		ApplyNagChecks(app)
	}
	return stack, params, nil
}

// readCDKJSONContext returns the "context" object of a cdk.json file, or
// an empty context when the file does not exist.
func readCDKJSONContext(path string) (map[string]any, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if cfg.Context == nil {
		cfg.Context = map[string]any{}
	}
	return cfg.Context, nil
}

// envFromCLI pins the stack to the account and region the CDK CLI resolved,
// when it did; otherwise the stack stays environment-agnostic.
func envFromCLI() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}

func contextString(app awscdk.App, key, def string) string {
	if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
		return v
	}
	return def
}

func orDefault(v any, def any) any {
	if v == nil {
		return def
	}
	return v
}
