// Package connect builds the adapters a function uses from its
// configuration (a config.Config, plain values): the stores (database
// addresses resolved through Secrets Manager, IAM tokens), the bucket, the
// SQS and SNS clients, the webhook secrets' box; and resolves the admin
// token, as an explicit step. The functions' wiring packages call it; a
// function that uses no adapter (webhooksend) does not link it. Each
// adapter is made on first use, so a function links and opens only what it
// asks for.
package connect

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/retailcatalog/catalog/functions/adapters/awsconf"
	"github.com/retailcatalog/catalog/functions/adapters/rdsauth"
	"github.com/retailcatalog/catalog/functions/adapters/s3blob"
	"github.com/retailcatalog/catalog/functions/adapters/secrets"
	"github.com/retailcatalog/catalog/functions/adapters/snstopic"
	"github.com/retailcatalog/catalog/functions/adapters/sqsqueue"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// Adapters builds the adapters of one function from its configuration;
// the AWS configuration and the secret resolver are loaded once, on first
// use.
type Adapters struct {
	Config *config.Config

	aws      *aws.Config
	resolver *secrets.Resolver
}

// New returns the adapters' builder for c.
func New(c *config.Config) *Adapters { return &Adapters{Config: c} }

// AdminToken is the admin token: CATALOG_ADMIN_TOKEN, or, when it is empty,
// the secret CATALOG_ADMIN_TOKEN_SECRET names ("" when neither is set).
func (a *Adapters) AdminToken(ctx context.Context) (string, error) {
	if a.Config.AdminToken != "" || a.Config.AdminTokenSecret == "" {
		return a.Config.AdminToken, nil
	}
	token, err := a.secrets().Resolve(ctx, "secret:"+a.Config.AdminTokenSecret)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return token, nil
}

// OpenStores resolves the database addresses (secret:<arn> through Secrets
// Manager) and connects. It resolves nothing else (AdminToken does the
// admin token).
func (a *Adapters) OpenStores(ctx context.Context) (*pgstore.Stores, error) {
	sec := a.secrets()
	resolve := func(v string) (string, error) {
		if strings.HasPrefix(v, "secret:") {
			return sec.Resolve(ctx, v)
		}
		return a.Config.LiteralDSN(v)
	}
	control, err := resolve(a.Config.ControlDB)
	if err == nil {
		control, err = sec.WithHost(control, a.Config.ControlHost)
	}
	if err != nil {
		return nil, fmt.Errorf("control database: %w", err)
	}
	shards := make([]string, len(a.Config.ShardDBs))
	for i, s := range a.Config.ShardDBs {
		shards[i], err = resolve(s)
		if err == nil && i < len(a.Config.ShardHosts) {
			shards[i], err = sec.WithHost(shards[i], a.Config.ShardHosts[i])
		}
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
	}
	opts := pgstore.PoolOptions{MaxConns: a.Config.DBMaxConns, Password: sec.Password}
	if a.Config.DBIAMAuth {
		opts.AuthToken = rdsauth.New(a.Config.Region).Token
	}
	return pgstore.Open(ctx, control, shards, opts)
}

// OpenReadStores is OpenStores plus the read replicas of CATALOG_CONTROL_READER
// and CATALOG_SHARD_READERS, for the storefront.
func (a *Adapters) OpenReadStores(ctx context.Context, log *slog.Logger) (*pgstore.Stores, error) {
	stores, err := a.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	sec := a.secrets()
	resolveAll := func(list []string) ([]string, error) {
		out := make([]string, len(list))
		for i, v := range list {
			switch {
			case strings.HasPrefix(v, "secret:"):
				out[i], err = sec.Resolve(ctx, v)
			case strings.Contains(v, "://"):
				out[i], err = a.Config.LiteralDSN(v)
			default: // "host[:port]": the rest comes from the shard's DSN
				out[i] = v
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	control, err := resolveAll(a.Config.ControlReaders)
	if err != nil {
		stores.Close()
		return nil, err
	}
	shards := make([][]string, len(a.Config.ShardReaders))
	for i, list := range a.Config.ShardReaders {
		if shards[i], err = resolveAll(list); err != nil {
			stores.Close()
			return nil, err
		}
	}
	if err := stores.AttachReaders(control, shards, pgstore.ReaderOptions{Logger: log}); err != nil {
		stores.Close()
		return nil, err
	}
	return stores, nil
}

// secrets returns the configuration's secret resolver, made on first use.
func (a *Adapters) secrets() *secrets.Resolver {
	if a.resolver == nil {
		a.resolver = secrets.New(a.AWS, a.Config.DBRootCert)
	}
	return a.resolver
}

// AWS is the AWS SDK configuration of every client, loaded once
// (awsconf.Load of the configured region and Credentials).
func (a *Adapters) AWS(ctx context.Context) (aws.Config, error) {
	if a.aws != nil {
		return *a.aws, nil
	}
	cfg, err := awsconf.Load(ctx, a.Config.Region, a.Config.Credentials)
	if err != nil {
		return aws.Config{}, err
	}
	a.aws = &cfg
	return cfg, nil
}

// Blobs builds the S3 store of the configured bucket, on S3Endpoint when set.
func (a *Adapters) Blobs(ctx context.Context) (*s3blob.Store, error) {
	cfg, err := a.AWS(ctx)
	if err != nil {
		return nil, err
	}
	return s3blob.New(s3blob.NewClient(cfg, a.Config.S3Endpoint), a.Config.Bucket), nil
}

// SQSClient builds the SQS client, on SQSEndpoint when set.
func (a *Adapters) SQSClient(ctx context.Context) (*sqs.Client, error) {
	cfg, err := a.AWS(ctx)
	if err != nil {
		return nil, err
	}
	return sqsqueue.NewClient(cfg, a.Config.SQSEndpoint), nil
}

// Sender builds the SQS sender.
func (a *Adapters) Sender(ctx context.Context) (*sqsqueue.Sender, error) {
	client, err := a.SQSClient(ctx)
	if err != nil {
		return nil, err
	}
	return sqsqueue.NewSender(client), nil
}

// Visibility builds what a consumer delays its failed messages with, on
// SQSEndpoint when set.
func (a *Adapters) Visibility(ctx context.Context) (*sqsqueue.Visibility, error) {
	client, err := a.SQSClient(ctx)
	if err != nil {
		return nil, err
	}
	return sqsqueue.NewVisibility(client), nil
}

// WebhookSecrets builds the box webhook secrets are sealed in, from
// CATALOG_WEBHOOK_KEYS (its value, or the secret it names).
func (a *Adapters) WebhookSecrets(ctx context.Context) (*webhook.SecretBox, error) {
	keys := a.Config.WebhookKeys
	if keys == "" {
		return nil, fmt.Errorf("CATALOG_WEBHOOK_KEYS is required to seal and open webhook secrets")
	}
	if strings.HasPrefix(keys, "secret:") {
		var err error
		if keys, err = a.secrets().Resolve(ctx, keys); err != nil {
			return nil, fmt.Errorf("webhook keys: %w", err)
		}
	}
	return webhook.ParseKeys(keys)
}

// Publisher builds the SNS publisher of the change-events topic, on
// SNSEndpoint when set.
func (a *Adapters) Publisher(ctx context.Context) (*snstopic.Publisher, error) {
	if a.Config.ChangeTopicARN == "" {
		return nil, fmt.Errorf("CATALOG_CHANGE_TOPIC_ARN is required to publish change events")
	}
	client, err := a.SNSClient(ctx)
	if err != nil {
		return nil, err
	}
	return snstopic.New(client, a.Config.ChangeTopicARN), nil
}

// SNSClient builds the SNS client, on SNSEndpoint when set.
func (a *Adapters) SNSClient(ctx context.Context) (*sns.Client, error) {
	cfg, err := a.AWS(ctx)
	if err != nil {
		return nil, err
	}
	return snstopic.NewClient(cfg, a.Config.SNSEndpoint), nil
}
