// Package config reads, once, at a function's entry point, everything the
// functions are told by their environment, and builds the adapters from it.
// Nothing below the entry points reads the environment.
package config

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/retailcatalog/catalog/functions/logging"
	"github.com/retailcatalog/catalog/functions/metrics"
	"github.com/retailcatalog/catalog/functions/pgstore"
	"github.com/retailcatalog/catalog/functions/rdsauth"
	"github.com/retailcatalog/catalog/functions/s3blob"
	"github.com/retailcatalog/catalog/functions/snstopic"
	"github.com/retailcatalog/catalog/functions/sqsqueue"
)

// Config is the functions' configuration.
type Config struct {
	Region             string
	Bucket             string        // CATALOG_BUCKET
	ControlDB          string        // CATALOG_CONTROL_DB: a DSN, or secret:<arn>
	ShardDBs           []string      // CATALOG_SHARD_DBS: comma-separated, shard 0 first
	ControlHost        string        // CATALOG_CONTROL_HOST: "host[:port]" to connect to instead of the control DSN's (an RDS Proxy endpoint)
	ShardHosts         []string      // CATALOG_SHARD_HOSTS: likewise, one entry per shard like CATALOG_SHARD_DBS ("" keeps the DSN's host)
	ShardReaders       [][]string    // CATALOG_SHARD_READERS: see ParseReaders
	ControlReaders     []string      // CATALOG_CONTROL_READER: "|"-separated readers of the control database
	DiffQueueURL       string        // CATALOG_DIFF_QUEUE_URL: diff-jobs.fifo
	ApplySmallQueueURL string        // CATALOG_APPLY_SMALL_QUEUE_URL
	ApplyLargeQueueURL string        // CATALOG_APPLY_LARGE_QUEUE_URL
	LargeThresholdRows int           // CATALOG_LARGE_THRESHOLD_ROWS (default 100000)
	InflightCap        int           // CATALOG_INFLIGHT_CAP (default 20)
	MaxUploadBytes     int64         // CATALOG_MAX_UPLOAD_BYTES (default 12 GiB)
	UploadTTL          time.Duration // CATALOG_UPLOAD_TTL (default 15m)
	UploadGrace        time.Duration // CATALOG_UPLOAD_GRACE: how long after its slot's expiry an upload is still taken (default 1h)
	// CATALOG_RESERVATIONS_PER_HOUR: generations a retailer may reserve per rolling hour (default 30)
	ReservationsPerHour int
	AdminToken          string     // CATALOG_ADMIN_TOKEN, or resolved from CATALOG_ADMIN_TOKEN_SECRET
	AdminTokenSecret    string     // CATALOG_ADMIN_TOKEN_SECRET: a secret ARN
	DBMaxConns          int32      // CATALOG_DB_MAX_CONNS per database per instance (default 4)
	DBUser              string     // CATALOG_DB_USER: the role every DSN given literally logs in as (AWS: the function's own)
	DBIAMAuth           bool       // CATALOG_DB_IAM_AUTH: "true" logs in with an IAM authentication token made for each new connection
	DBRootCert          string     // CATALOG_DB_SSLROOTCERT: CA bundle file; every database DSN then verifies its server (sslmode=verify-full)
	ChangeTopicARN      string     // CATALOG_CHANGE_TOPIC_ARN: the change-events topic the relay publishes to
	LogLevel            slog.Level // AWS_LAMBDA_LOG_LEVEL (Lambda's logging controls), else CATALOG_LOG_LEVEL (default INFO)
	MetricsNamespace    string     // CATALOG_METRICS_NAMESPACE: the CloudWatch namespace of the EMF metrics (default metrics.DefaultNamespace)
	SpillDir            string     // CATALOG_SPILL_DIR: where the diff's sorted runs spill (default: the system's temporary directory)
	SortMemoryBytes     int64      // CATALOG_SORT_MEMORY_MB: the diff's memory for sorted runs before they spill (default 256)

	secrets *secrets
}

// FromEnv reads the configuration from getenv (os.Getenv at entry points).
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{
		Region:             firstNonEmpty(getenv("AWS_REGION"), getenv("AWS_DEFAULT_REGION"), "us-east-1"),
		Bucket:             getenv("CATALOG_BUCKET"),
		ControlDB:          getenv("CATALOG_CONTROL_DB"),
		ControlHost:        strings.TrimSpace(getenv("CATALOG_CONTROL_HOST")),
		DiffQueueURL:       getenv("CATALOG_DIFF_QUEUE_URL"),
		ApplySmallQueueURL: getenv("CATALOG_APPLY_SMALL_QUEUE_URL"),
		ApplyLargeQueueURL: getenv("CATALOG_APPLY_LARGE_QUEUE_URL"),
		AdminToken:         getenv("CATALOG_ADMIN_TOKEN"),
		AdminTokenSecret:   getenv("CATALOG_ADMIN_TOKEN_SECRET"),
		DBUser:             strings.TrimSpace(getenv("CATALOG_DB_USER")),
		DBRootCert:         strings.TrimSpace(getenv("CATALOG_DB_SSLROOTCERT")),
		SpillDir:           getenv("CATALOG_SPILL_DIR"),
		ChangeTopicARN:     getenv("CATALOG_CHANGE_TOPIC_ARN"),
		MetricsNamespace:   firstNonEmpty(strings.TrimSpace(getenv("CATALOG_METRICS_NAMESPACE")), metrics.DefaultNamespace),
	}
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
	if c.LargeThresholdRows, err = intVar(getenv, "CATALOG_LARGE_THRESHOLD_ROWS", 100000); err != nil {
		return c, err
	}
	if c.InflightCap, err = intVar(getenv, "CATALOG_INFLIGHT_CAP", 20); err != nil {
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
	sortMB, err := intVar(getenv, "CATALOG_SORT_MEMORY_MB", 256)
	if err != nil {
		return c, err
	}
	c.SortMemoryBytes = int64(sortMB) << 20
	c.UploadTTL = 15 * time.Minute
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

// OpenStores resolves the database addresses (secret:<arn> through Secrets
// Manager) and connects.
func (c *Config) OpenStores(ctx context.Context) (*pgstore.Stores, error) {
	sec := c.secretStore()
	resolve := func(v string) (string, error) {
		if strings.HasPrefix(v, "secret:") {
			return sec.resolve(ctx, v)
		}
		return c.literalDSN(v)
	}
	control, err := resolve(c.ControlDB)
	if err == nil {
		control, err = sec.withHost(control, c.ControlHost)
	}
	if err != nil {
		return nil, fmt.Errorf("control database: %w", err)
	}
	shards := make([]string, len(c.ShardDBs))
	for i, s := range c.ShardDBs {
		shards[i], err = resolve(s)
		if err == nil && i < len(c.ShardHosts) {
			shards[i], err = sec.withHost(shards[i], c.ShardHosts[i])
		}
		if err != nil {
			return nil, fmt.Errorf("shard %d: %w", i, err)
		}
	}
	if c.AdminToken == "" && c.AdminTokenSecret != "" {
		if c.AdminToken, err = resolve("secret:" + c.AdminTokenSecret); err != nil {
			return nil, err
		}
	}
	opts := pgstore.PoolOptions{MaxConns: c.DBMaxConns, Password: sec.password}
	if c.DBIAMAuth {
		opts.AuthToken = rdsauth.New(c.Region).Token
	}
	return pgstore.Open(ctx, control, shards, opts)
}

// literalDSN is a DSN given in the environment (not from a secret) with
// CATALOG_DB_USER as its user and, with CATALOG_DB_SSLROOTCERT, verify-full
// TLS against that bundle; unchanged when neither is set (the local stack).
func (c *Config) literalDSN(dsn string) (string, error) {
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

// OpenReadStores is OpenStores plus the read replicas of CATALOG_CONTROL_READER
// and CATALOG_SHARD_READERS, for the storefront.
func (c *Config) OpenReadStores(ctx context.Context, log *slog.Logger) (*pgstore.Stores, error) {
	stores, err := c.OpenStores(ctx)
	if err != nil {
		return nil, err
	}
	sec := c.secretStore()
	resolveAll := func(list []string) ([]string, error) {
		out := make([]string, len(list))
		for i, v := range list {
			switch {
			case strings.HasPrefix(v, "secret:"):
				out[i], err = sec.resolve(ctx, v)
			case strings.Contains(v, "://"):
				out[i], err = c.literalDSN(v)
			default: // "host[:port]": the rest comes from the shard's DSN
				out[i] = v
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	control, err := resolveAll(c.ControlReaders)
	if err != nil {
		stores.Close()
		return nil, err
	}
	shards := make([][]string, len(c.ShardReaders))
	for i, list := range c.ShardReaders {
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

// secrets resolves "secret:<arn>" values through Secrets Manager and keeps,
// for every database address it produced, which secret it came from, so
// that new connections can pick up a rotated password.
type secrets struct {
	region   string
	rootCert string // CA bundle of the DSNs built from secrets
	client   *secretsmanager.Client
	mu       sync.Mutex
	byDSN    map[string]string // resolved DSN -> secret ARN
	cache    map[string]cachedSecret
}

type cachedSecret struct {
	value string
	at    time.Time
}

// secretTTL bounds how long a password is reused for new connections after
// a rotation: at most this long, new connections fail with the old one.
const secretTTL = time.Minute

// secretStore returns the configuration's secret resolver, made on first use.
func (c *Config) secretStore() *secrets {
	if c.secrets == nil {
		c.secrets = &secrets{region: c.Region, rootCert: c.DBRootCert, byDSN: map[string]string{}, cache: map[string]cachedSecret{}}
	}
	return c.secrets
}

// fetch reads a secret, from the cache when younger than secretTTL.
func (s *secrets) fetch(ctx context.Context, arn string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.cache[arn]; ok && time.Since(c.at) < secretTTL {
		return c.value, nil
	}
	if s.client == nil {
		cfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(s.region))
		if err != nil {
			return "", fmt.Errorf("load aws config: %w", err)
		}
		s.client = secretsmanager.NewFromConfig(cfg)
	}
	out, err := s.client.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", arn, err)
	}
	v := aws.ToString(out.SecretString)
	s.cache[arn] = cachedSecret{value: v, at: time.Now()}
	return v, nil
}

// resolve returns v itself, or for "secret:<arn>" the DSN (or plain string) the secret holds.
func (s *secrets) resolve(ctx context.Context, v string) (string, error) {
	arn, ok := strings.CutPrefix(v, "secret:")
	if !ok {
		return v, nil
	}
	raw, err := s.fetch(ctx, arn)
	if err != nil {
		return "", err
	}
	dsn := dsnFromSecret(raw, s.rootCert)
	s.mu.Lock()
	s.byDSN[dsn] = arn
	s.mu.Unlock()
	return dsn, nil
}

// withHost returns dsn (a postgres:// URL) connecting to host ("host" keeps
// the DSN's port, "host:port" replaces it) instead; the new DSN follows the
// same secret's password rotations. An empty host returns dsn unchanged.
func (s *secrets) withHost(dsn, host string) (string, error) {
	if host == "" {
		return dsn, nil
	}
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return "", fmt.Errorf("a host override needs a postgres:// URL to apply to")
	}
	if _, _, err := net.SplitHostPort(host); err != nil {
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		host = net.JoinHostPort(host, port)
	}
	u.Host = host
	out := u.String()
	s.mu.Lock()
	if arn := s.byDSN[dsn]; arn != "" {
		s.byDSN[out] = arn
	}
	s.mu.Unlock()
	return out, nil
}

// password is the current password of the secret a DSN came from ("" when
// it did not come from a secret): the pools ask before every new connection.
func (s *secrets) password(ctx context.Context, dsn string) (string, error) {
	s.mu.Lock()
	arn := s.byDSN[dsn]
	s.mu.Unlock()
	if arn == "" {
		return "", nil
	}
	raw, err := s.fetch(ctx, arn)
	if err != nil {
		return "", err
	}
	var sec rdsSecret
	if err := json.Unmarshal([]byte(raw), &sec); err != nil {
		return "", fmt.Errorf("secret %s is not an RDS secret: %w", arn, err)
	}
	return sec.Password, nil
}

// rdsSecret is the JSON of an RDS-generated secret.
type rdsSecret struct {
	Host     string      `json:"host"`
	Port     json.Number `json:"port"`
	Username string      `json:"username"`
	Password string      `json:"password"`
	DBName   string      `json:"dbname"`
}

// dsnFromSecret is the DSN of an RDS secret's JSON, which verifies the
// server's certificate and name (sslmode=verify-full) against rootCert, or
// the system's roots when rootCert is ""; a plain string is returned as it is.
func dsnFromSecret(s, rootCert string) string {
	var sec rdsSecret
	if err := json.Unmarshal([]byte(s), &sec); err != nil || sec.Host == "" {
		return s // a plain secret string (the admin token, or a whole DSN)
	}
	port := sec.Port.String()
	if port == "" {
		port = "5432"
	}
	db := sec.DBName
	if db == "" {
		db = "postgres"
	}
	q := url.Values{"sslmode": {"verify-full"}}
	if rootCert != "" {
		q.Set("sslrootcert", rootCert)
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(sec.Username, sec.Password),
		Host: sec.Host + ":" + port, Path: "/" + db, RawQuery: q.Encode()}
	return u.String()
}

// Blobs builds the S3 store of the configured bucket (AWS_ENDPOINT_URL_S3 is
// honoured by the SDK).
func (c *Config) Blobs(ctx context.Context) (*s3blob.Store, error) {
	client, err := s3blob.NewClient(ctx, s3blob.Options{Region: c.Region})
	if err != nil {
		return nil, err
	}
	return s3blob.New(client, c.Bucket), nil
}

// Sender builds the SQS sender (AWS_ENDPOINT_URL_SQS is honoured by the SDK).
func (c *Config) Sender(ctx context.Context) (*sqsqueue.Sender, error) {
	client, err := sqsqueue.NewClient(ctx, sqsqueue.Options{Region: c.Region})
	if err != nil {
		return nil, err
	}
	return sqsqueue.NewSender(client), nil
}

// Publisher builds the SNS publisher of the change-events topic
// (AWS_ENDPOINT_URL_SNS is honoured by the SDK).
func (c *Config) Publisher(ctx context.Context) (*snstopic.Publisher, error) {
	if c.ChangeTopicARN == "" {
		return nil, fmt.Errorf("CATALOG_CHANGE_TOPIC_ARN is required to publish change events")
	}
	client, err := snstopic.NewClient(ctx, snstopic.Options{Region: c.Region})
	if err != nil {
		return nil, err
	}
	return snstopic.New(client, c.ChangeTopicARN), nil
}
