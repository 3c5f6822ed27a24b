// Package awsconf loads the AWS SDK configuration every client of a
// function shares: region and credentials (endpoints are per service, given
// to each adapter's NewClient). It never passes a custom HTTP client to
// config.LoadDefaultConfig: the SDK's own honours AWS_CA_BUNDLE.
package awsconf

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
)

// Load is the configuration of region: the SDK's default chain
// (environment, shared files, the Lambda role), or, with credentials set,
// those credentials and nothing else (the local stack: the key pair its S3
// stand-in verifies signatures with).
func Load(ctx context.Context, region string, credentials aws.CredentialsProvider) (aws.Config, error) {
	if credentials != nil {
		return aws.Config{Region: region, Credentials: credentials}, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
	if err != nil {
		return aws.Config{}, fmt.Errorf("load aws config: %w", err)
	}
	return cfg, nil
}
