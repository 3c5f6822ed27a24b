// Package rdsauth makes IAM database authentication tokens, the passwords
// with which the functions log in to Aurora and RDS Proxy as their database
// role on AWS (docs/DEPLOY.md, "Database roles"). A token is signed locally
// with the function's credentials (no API call), for one endpoint and one
// user, and is valid for 15 minutes: one is made for every new connection.
package rdsauth

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/rds/auth"
)

// Tokens makes tokens in one region with the default credential chain (the
// function's execution role), loaded on first use.
type Tokens struct {
	region string

	once  sync.Once
	creds aws.CredentialsProvider
	err   error
}

// New returns a token maker for region.
func New(region string) *Tokens { return &Tokens{region: region} }

// NewWithCredentials returns a token maker that signs with creds.
func NewWithCredentials(region string, creds aws.CredentialsProvider) *Tokens {
	return &Tokens{region: region, creds: creds}
}

// Token returns a token for user at host:port: the host and port the
// connection is made to (a cluster, reader or proxy endpoint), which the
// server checks the signature against.
func (t *Tokens) Token(ctx context.Context, host string, port uint16, user string) (string, error) {
	t.once.Do(func() {
		if t.creds != nil {
			return
		}
		cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(t.region))
		if err != nil {
			t.err = fmt.Errorf("load aws config: %w", err)
			return
		}
		t.creds = cfg.Credentials
	})
	if t.err != nil {
		return "", t.err
	}
	endpoint := net.JoinHostPort(host, strconv.Itoa(int(port)))
	token, err := auth.BuildAuthToken(ctx, endpoint, t.region, user, t.creds)
	if err != nil {
		return "", fmt.Errorf("iam auth token for %s at %s: %w", user, endpoint, err)
	}
	return token, nil
}
