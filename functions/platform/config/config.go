// Package config reads, once, at a function's entry point, everything the
// functions are told by their environment, into plain values: it opens no
// connection and resolves no secret (package connect builds the adapters
// from a Config, and resolves secrets as an explicit step). It imports no
// handler and no adapter: each function's settings are made from a Config by
// the function's own wiring package (functions/<group>/<name>/<name>wiring), which
// its Lambda entry point calls. The local stack fills a Config itself and
// uses the same wiring. Nothing below the entry points reads the
// environment.
package config

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/platform/logging"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
)

// Defaults the configuration holds itself, so that it imports no handler
// (config_test checks each against the handler's own constant).
const (
	DefaultDiffAttempts  = 3                // diff.DefaultMaxAttempts
	DefaultApplyAttempts = 3                // apply.DefaultMaxAttempts
	DefaultUploadTTL     = 15 * time.Minute // upload.DefaultUploadTTL
)

// AWS is where the AWS clients go: the region, an endpoint per service
// (a stand-in instead of AWS) and, locally, fixed credentials.
type AWS struct {
	Region      string // AWS_REGION, else AWS_DEFAULT_REGION (default us-east-1)
	S3Endpoint  string // AWS_ENDPOINT_URL_S3: an S3-compatible server instead of S3 (path-style addressing)
	SQSEndpoint string // AWS_ENDPOINT_URL_SQS: an SQS-compatible server instead of SQS
	SNSEndpoint string // AWS_ENDPOINT_URL_SNS: an SNS-compatible server instead of SNS
	// Credentials, when set, are the AWS credentials, and neither the
	// environment nor the shared AWS files are read for the AWS clients (the
	// local stack: the key pair its S3 stand-in verifies signatures with);
	// nil takes the SDK's default chain.
	Credentials aws.CredentialsProvider
}

// Databases are the control database and the shards: addresses (a DSN,
// or secret:<arn>), proxies, read replicas and how to log in.
type Databases struct {
	ControlDB      string     // CATALOG_CONTROL_DB: a DSN, or secret:<arn>
	ShardDBs       []string   // CATALOG_SHARD_DBS: comma-separated, shard 0 first
	ControlHost    string     // CATALOG_CONTROL_HOST: "host[:port]" to connect to instead of the control DSN's (an RDS Proxy endpoint)
	ShardHosts     []string   // CATALOG_SHARD_HOSTS: likewise, one entry per shard like CATALOG_SHARD_DBS ("" keeps the DSN's host)
	ShardReaders   [][]string // CATALOG_SHARD_READERS: see ParseReaders
	ControlReaders []string   // CATALOG_CONTROL_READER: "|"-separated readers of the control database
	DBMaxConns     int32      // CATALOG_DB_MAX_CONNS per database per instance (default 4)
	DBUser         string     // CATALOG_DB_USER: the role every DSN given literally logs in as (AWS: the function's own)
	DBIAMAuth      bool       // CATALOG_DB_IAM_AUTH: "true" logs in with an IAM authentication token made for each new connection
	DBRootCert     string     // CATALOG_DB_SSLROOTCERT: CA bundle file; every database DSN then verifies its server (sslmode=verify-full)
}

// Messaging is the pipeline's queues, the change-events topic and the
// consumers' retry schedule.
type Messaging struct {
	DiffQueueURL       string        // CATALOG_DIFF_QUEUE_URL: diff-jobs.fifo
	ApplySmallQueueURL string        // CATALOG_APPLY_SMALL_QUEUE_URL
	ApplyLargeQueueURL string        // CATALOG_APPLY_LARGE_QUEUE_URL
	ChangeTopicARN     string        // CATALOG_CHANGE_TOPIC_ARN: the change-events topic the relay publishes to
	AnalyticsQueueURL  string        // CATALOG_ANALYTICS_QUEUE_URL: the analytics consumer's queue
	WebhooksQueueURL   string        // CATALOG_WEBHOOKS_QUEUE_URL: the webhooks consumer's queue
	AnalyticsDLQURL    string        // CATALOG_ANALYTICS_DLQ_URL: its dead-letter queue (ops: dlq list and redrive)
	WebhooksDLQURL     string        // CATALOG_WEBHOOKS_DLQ_URL: its dead-letter queue (ops: dlq list and redrive)
	BackoffBase        time.Duration // CATALOG_BACKOFF_BASE: a consumer's first retry delay, doubling to 15 min (default 30s)
}

// Limits bound what the pipeline takes and how it works through it: chunk
// sizes, snapshot sizes, upload slots, the diff's sort memory, attempts.
type Limits struct {
	ChunkRows          int           // rows per chunk message [catalog.MaxChunkRows]; set by tests, not by the environment
	ChunkBytes         int           // byte budget of a chunk object [catalog.DefaultChunkBytes]; set by tests, not by the environment
	LargeThresholdRows int           // CATALOG_LARGE_THRESHOLD_ROWS [catalog.DefaultLargeThresholdRows]
	InflightCap        int           // CATALOG_INFLIGHT_CAP [catalog.DefaultInflightCap]
	MaxUploadBytes     int64         // CATALOG_MAX_UPLOAD_BYTES (default 12 GiB)
	MaxInflatedBytes   int64         // CATALOG_MAX_INFLATED_BYTES: a snapshot's decompressed bytes, at most (default 50 GiB)
	MaxProducts        int64         // CATALOG_MAX_PRODUCTS: a snapshot's products, at most (default 50,000,000)
	UploadTTL          time.Duration // CATALOG_UPLOAD_TTL [DefaultUploadTTL]
	UploadGrace        time.Duration // CATALOG_UPLOAD_GRACE: how long after its slot's expiry an upload is still taken (default 1h)
	// CATALOG_RESERVATIONS_PER_HOUR: generations a retailer may reserve per rolling hour (default 30)
	ReservationsPerHour int
	SpillDir            string // CATALOG_SPILL_DIR: where the diff's sorted runs spill (default: the system's temporary directory)
	SortMemoryBytes     int64  // CATALOG_SORT_MEMORY_MB: the diff's memory for sorted runs before they spill (default 256)
	DiffAttempts        int    // CATALOG_DIFF_ATTEMPTS: diff runs of a generation before it ends diff_failed (default 3)
	ApplyAttempts       int    // CATALOG_APPLY_ATTEMPTS: tries of a chunk the database refuses before its generation ends apply_failed (default 3)
	// MaxRowBytes is the longest row the diff reads [the snapshot package's
	// 1 MiB]; set by tests, not by the environment.
	MaxRowBytes int
	// DiffRetryBackoff is the first wait before a failed diff job comes back
	// [the diff's default]; set by the local stack, not by the environment.
	DiffRetryBackoff time.Duration
	// RelaySweepAge is the age from which the relay's sweeper takes an event
	// [the relay's 30s]; set by the local stack, not by the environment.
	RelaySweepAge time.Duration
}

// Webhooks is how retailers' webhooks are sealed, called and retried.
type Webhooks struct {
	WebhookSender       string        // CATALOG_WEBHOOK_SENDER: the webhook-sender function that makes the POSTs (AWS); empty: in process
	WebhookKeys         string        // CATALOG_WEBHOOK_KEYS: keys sealing webhook secrets (base64, or passphrases of 40+ characters), comma-separated, the first sealing; or secret:<arn>
	WebhookRetryWindow  time.Duration // CATALOG_WEBHOOK_RETRY_WINDOW: how long a failing webhook delivery is retried (default 24h)
	WebhookLoopbackHTTP bool          // CATALOG_WEBHOOK_ALLOW_LOOPBACK: "true" also accepts http://127.0.0.1:<port> webhooks (the local stack only)
	WebhookTimeout      time.Duration // how long a receiver has to answer [webhook.Timeout, 10 s]; set by the local stack, not by the environment
}

// Admin is the operators' token, given or named as a secret.
type Admin struct {
	AdminToken       string // CATALOG_ADMIN_TOKEN (connect.AdminToken resolves CATALOG_ADMIN_TOKEN_SECRET when it is empty)
	AdminTokenSecret string // CATALOG_ADMIN_TOKEN_SECRET: a secret ARN
}

// Telemetry is the logs' level and the metrics' namespace.
type Telemetry struct {
	LogLevel         slog.Level // AWS_LAMBDA_LOG_LEVEL (Lambda's logging controls), else CATALOG_LOG_LEVEL (default INFO)
	MetricsNamespace string     // CATALOG_METRICS_NAMESPACE: the CloudWatch namespace of the EMF metrics (default metrics.DefaultNamespace)
}

// Config is the functions' configuration, in groups (each embedded: its
// fields read as the Config's own, c.Region, c.ControlDB, ...).
type Config struct {
	AWS
	Databases
	Messaging
	Bucket string // CATALOG_BUCKET
	Limits
	Webhooks
	Admin
	Telemetry
	Operations            // the ops function's (ops.go)
	Metering   Metering   // the usage meters' (metering.go)
	Storefront Storefront // the read function's access log (storefront.go)
}

// FromEnv reads the configuration from getenv (os.Getenv at entry points).
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	c.Region = firstNonEmpty(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"), "us-east-1")
	c.Bucket = getenv("CATALOG_BUCKET")
	c.ControlDB = getenv("CATALOG_CONTROL_DB")
	c.ControlHost = strings.TrimSpace(getenv("CATALOG_CONTROL_HOST"))
	c.DiffQueueURL = getenv("CATALOG_DIFF_QUEUE_URL")
	c.ApplySmallQueueURL = getenv("CATALOG_APPLY_SMALL_QUEUE_URL")
	c.ApplyLargeQueueURL = getenv("CATALOG_APPLY_LARGE_QUEUE_URL")
	c.AdminToken = getenv("CATALOG_ADMIN_TOKEN")
	c.AdminTokenSecret = getenv("CATALOG_ADMIN_TOKEN_SECRET")
	c.DBUser = strings.TrimSpace(getenv("CATALOG_DB_USER"))
	c.DBRootCert = strings.TrimSpace(getenv("CATALOG_DB_SSLROOTCERT"))
	c.SpillDir = getenv("CATALOG_SPILL_DIR")
	c.ChangeTopicARN = getenv("CATALOG_CHANGE_TOPIC_ARN")
	c.MetricsNamespace = firstNonEmpty(strings.TrimSpace(getenv("CATALOG_METRICS_NAMESPACE")), metrics.DefaultNamespace)
	c.S3Endpoint = getenv("AWS_ENDPOINT_URL_S3")
	c.SQSEndpoint = getenv("AWS_ENDPOINT_URL_SQS")
	c.SNSEndpoint = getenv("AWS_ENDPOINT_URL_SNS")
	c.AnalyticsQueueURL = getenv("CATALOG_ANALYTICS_QUEUE_URL")
	c.WebhooksQueueURL = getenv("CATALOG_WEBHOOKS_QUEUE_URL")
	c.AnalyticsDLQURL = strings.TrimSpace(getenv("CATALOG_ANALYTICS_DLQ_URL"))
	c.WebhooksDLQURL = strings.TrimSpace(getenv("CATALOG_WEBHOOKS_DLQ_URL"))
	c.WebhookSender = strings.TrimSpace(getenv("CATALOG_WEBHOOK_SENDER"))
	c.WebhookKeys = strings.TrimSpace(getenv("CATALOG_WEBHOOK_KEYS"))
	c.WebhookLoopbackHTTP = getenv("CATALOG_WEBHOOK_ALLOW_LOOPBACK") == "true"
	for _, s := range strings.Split(getenv("CATALOG_SHARD_DBS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.ShardDBs = append(c.ShardDBs, s)
		}
	}
	if v := getenv("CATALOG_SHARD_HOSTS"); strings.TrimSpace(v) != "" {
		for _, h := range strings.Split(v, ",") {
			c.ShardHosts = append(c.ShardHosts, strings.TrimSpace(h))
		}
		if len(c.ShardHosts) != len(c.ShardDBs) {
			return c, fmt.Errorf("CATALOG_SHARD_HOSTS has %d comma-separated entries, want one per shard (%d)", len(c.ShardHosts), len(c.ShardDBs))
		}
	}
	var err error
	if c.ShardReaders, err = ParseReaders(getenv("CATALOG_SHARD_READERS"), len(c.ShardDBs)); err != nil {
		return c, err
	}
	for _, r := range strings.Split(getenv("CATALOG_CONTROL_READER"), "|") {
		if r = strings.TrimSpace(r); r != "" {
			c.ControlReaders = append(c.ControlReaders, r)
		}
	}
	if c.LargeThresholdRows, err = intVar(getenv, "CATALOG_LARGE_THRESHOLD_ROWS", catalog.DefaultLargeThresholdRows); err != nil {
		return c, err
	}
	if c.InflightCap, err = intVar(getenv, "CATALOG_INFLIGHT_CAP", catalog.DefaultInflightCap); err != nil {
		return c, err
	}
	maxConns, err := intVar(getenv, "CATALOG_DB_MAX_CONNS", 4)
	if err != nil {
		return c, err
	}
	c.DBMaxConns = int32(maxConns)
	maxUpload, err := intVar(getenv, "CATALOG_MAX_UPLOAD_BYTES", 12<<30)
	if err != nil {
		return c, err
	}
	c.MaxUploadBytes = int64(maxUpload)
	maxInflated, err := intVar(getenv, "CATALOG_MAX_INFLATED_BYTES", snapshot.DefaultMaxFileBytes)
	if err != nil {
		return c, err
	}
	c.MaxInflatedBytes = int64(maxInflated)
	maxProducts, err := intVar(getenv, "CATALOG_MAX_PRODUCTS", snapshot.DefaultMaxProducts)
	if err != nil {
		return c, err
	}
	c.MaxProducts = int64(maxProducts)
	sortMB, err := intVar(getenv, "CATALOG_SORT_MEMORY_MB", 256)
	if err != nil {
		return c, err
	}
	c.SortMemoryBytes = int64(sortMB) << 20
	if c.DiffAttempts, err = intVar(getenv, "CATALOG_DIFF_ATTEMPTS", DefaultDiffAttempts); err != nil {
		return c, err
	}
	if c.ApplyAttempts, err = intVar(getenv, "CATALOG_APPLY_ATTEMPTS", DefaultApplyAttempts); err != nil {
		return c, err
	}
	c.BackoffBase = 30 * time.Second
	if v := getenv("CATALOG_BACKOFF_BASE"); v != "" {
		if c.BackoffBase, err = time.ParseDuration(v); err != nil || c.BackoffBase < time.Second {
			return c, fmt.Errorf("CATALOG_BACKOFF_BASE %q: want a duration of at least 1s (SQS delays are whole seconds)", v)
		}
	}
	c.WebhookRetryWindow = 24 * time.Hour
	if v := getenv("CATALOG_WEBHOOK_RETRY_WINDOW"); v != "" {
		if c.WebhookRetryWindow, err = time.ParseDuration(v); err != nil || c.WebhookRetryWindow <= 0 {
			return c, fmt.Errorf("CATALOG_WEBHOOK_RETRY_WINDOW %q: want a positive duration", v)
		}
	}
	c.UploadTTL = DefaultUploadTTL
	if v := getenv("CATALOG_UPLOAD_TTL"); v != "" {
		if c.UploadTTL, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("CATALOG_UPLOAD_TTL %q: %w", v, err)
		}
	}
	c.UploadGrace = time.Hour
	if v := getenv("CATALOG_UPLOAD_GRACE"); v != "" {
		if c.UploadGrace, err = time.ParseDuration(v); err != nil {
			return c, fmt.Errorf("CATALOG_UPLOAD_GRACE %q: %w", v, err)
		}
	}
	if c.ReservationsPerHour, err = intVar(getenv, "CATALOG_RESERVATIONS_PER_HOUR", 30); err != nil {
		return c, err
	}
	// Lambda's advanced logging controls set AWS_LAMBDA_LOG_LEVEL (and
	// drop lines below it); it wins over our own variable.
	for _, name := range []string{"AWS_LAMBDA_LOG_LEVEL", "CATALOG_LOG_LEVEL"} {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			if c.LogLevel, err = logging.ParseLevel(v); err != nil {
				return c, fmt.Errorf("%s: %w", name, err)
			}
			break
		}
	}
	if v := getenv("CATALOG_DB_IAM_AUTH"); v != "" {
		if c.DBIAMAuth, err = strconv.ParseBool(v); err != nil {
			return c, fmt.Errorf("CATALOG_DB_IAM_AUTH %q: want true or false", v)
		}
	}
	if c.Operations, err = operationsFromEnv(getenv); err != nil {
		return c, err
	}
	if c.Metering, err = meteringFromEnv(getenv); err != nil {
		return c, err
	}
	if c.Storefront, err = storefrontFromEnv(getenv); err != nil {
		return c, err
	}
	c.deriveQueueURLs(strings.TrimSpace(getenv("CATALOG_QUEUE_URL_BASE")))
	if c.ControlDB == "" || len(c.ShardDBs) == 0 {
		return c, fmt.Errorf("CATALOG_CONTROL_DB and CATALOG_SHARD_DBS are required")
	}
	return c, nil
}

// ParseReaders reads CATALOG_SHARD_READERS: one entry per shard, shard 0
// first, separated by commas like CATALOG_SHARD_DBS; within an entry the
// shard's readers separated by "|". A reader is "host" or "host:port" (user,
// password, database and TLS come from the shard's DSN), a whole DSN or URL,
// or secret:<arn>. An empty entry leaves that shard's reads on its writer;
// an empty value, every shard's. Examples, for two shards:
//
//	r0.example.com,r1.example.com            one reader endpoint per shard
//	10.0.0.5|10.0.0.6:5433,                  two readers for shard 0, none for shard 1
func ParseReaders(v string, shards int) ([][]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	entries := strings.Split(v, ",")
	if len(entries) != shards {
		return nil, fmt.Errorf("CATALOG_SHARD_READERS has %d comma-separated entries, want one per shard (%d)", len(entries), shards)
	}
	out := make([][]string, shards)
	for i, e := range entries {
		for _, r := range strings.Split(e, "|") {
			if r = strings.TrimSpace(r); r != "" {
				out[i] = append(out[i], r)
			}
		}
	}
	return out, nil
}

func intVar(getenv func(string) string, name string, def int) (int, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s %q must be a positive integer", name, v)
	}
	return n, nil
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// stdout is the functions' log stream: the logger and the metrics share it
// (Lambda sends stdout to the function's log group, where the EMF lines
// become metrics).
var stdout = logging.NewSyncWriter(os.Stdout)

// Logger is the JSON logger every function uses: the configured level, and
// the request ids of the invocation on every line.
func (c Config) Logger() *slog.Logger { return logging.New(stdout, c.LogLevel) }

// Metrics is the recorder of a function's EMF metrics, on the same stream
// as its logs.
func (c Config) Metrics(function string) *metrics.Recorder {
	return metrics.New(stdout, metrics.Options{Namespace: c.MetricsNamespace, Function: function, Level: c.LogLevel})
}

// LiteralDSN is a DSN given in the environment (not from a secret) with
// CATALOG_DB_USER as its user and, with CATALOG_DB_SSLROOTCERT, verify-full
// TLS against that bundle; unchanged when neither is set (the local stack).
func (c *Config) LiteralDSN(dsn string) (string, error) {
	if c.DBUser == "" && c.DBRootCert == "" {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", fmt.Errorf("CATALOG_DB_USER and CATALOG_DB_SSLROOTCERT apply to postgres:// URLs only")
	}
	if c.DBUser != "" {
		u.User = url.User(c.DBUser)
	}
	if c.DBRootCert != "" {
		q := u.Query()
		q.Set("sslmode", "verify-full")
		q.Set("sslrootcert", c.DBRootCert)
		u.RawQuery = q.Encode()
	}
	return u.String(), nil
}

// Retry is the consumers' retry schedule (CATALOG_BACKOFF_BASE).
func (c *Config) Retry() retry.Schedule { return retry.Schedule{Base: c.BackoffBase} }

// WebhookPolicy is which webhook URLs may be saved and called.
func (c *Config) WebhookPolicy() webhook.Policy {
	return webhook.Policy{AllowLoopbackHTTP: c.WebhookLoopbackHTTP}
}

// DiffJobs sends diff jobs to diff-jobs.fifo through sender: a
// confirmation's, a re-drive's, an undo's (I10).
func (c *Config) DiffJobs(sender queue.Sender) message.DiffJobs {
	return message.DiffJobs{Sender: sender, URL: c.DiffQueueURL, Region: c.Region, Bucket: c.Bucket}
}
