// Package stack wires the whole system on one machine: a private PostgreSQL
// server (control + shard databases), the SQS emulator with the arrivals
// queue, the diff-jobs and apply FIFO queues and the change-events topic (its
// SNS), the S3 stand-in with object-created notifications (to arrivals), one
// poller per queue playing the Lambda event source, the relay's sweeper on a
// ticker, and the HTTP API — all running the same handlers as Lambda, built
// by the same constructors (each function's <name>wiring.Build). The local
// command, the demo and the integration tests start it.
package stack

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/platform/connect"

	"github.com/retailcatalog/catalog/functions/ingest/apply/applywiring"
	"github.com/retailcatalog/catalog/functions/ingest/arrival/arrivalwiring"
	"github.com/retailcatalog/catalog/functions/ingest/diff/diffwiring"
	"github.com/retailcatalog/catalog/functions/operate/ops/opswiring"
	"github.com/retailcatalog/catalog/functions/publish/analytics/analyticswiring"
	"github.com/retailcatalog/catalog/functions/publish/relay/relaywiring"
	"github.com/retailcatalog/catalog/functions/publish/webhooks/webhookswiring"
	"github.com/retailcatalog/catalog/functions/serve/read/readwiring"
	"github.com/retailcatalog/catalog/functions/serve/upload/uploadwiring"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/adapters/s3blob"
	"github.com/retailcatalog/catalog/functions/adapters/snstopic"
	"github.com/retailcatalog/catalog/functions/adapters/sqsqueue"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ingest/apply"
	"github.com/retailcatalog/catalog/functions/ingest/arrival"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/platform/logging"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/retry"
	"github.com/retailcatalog/catalog/functions/ports/queue"
	"github.com/retailcatalog/catalog/functions/ports/topic"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/publish/relay"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/functions/publish/webhooks"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/read"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
	"github.com/retailcatalog/catalog/scripts/local/s3server"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
)

// Region is the region every local client uses.
const Region = "us-east-1"

// Options configure a stack. Zero values take the defaults in brackets.
type Options struct {
	DataDir string // [.local] PostgreSQL data, S3 objects
	Addr    string // [127.0.0.1:8080] where the HTTP API listens
	// S3Addr is where the S3 stand-in listens [127.0.0.1:0, a free port];
	// a fixed address keeps presigned URLs valid across restarts.
	S3Addr     string
	Shards     int    // [2]
	AdminToken string // [random]
	Progress   io.Writer
	Logger     *slog.Logger
	// Metrics receives every function's metric lines (CloudWatch EMF, as
	// on Lambda) [discarded].
	Metrics io.Writer

	// PostgresURL reuses a running server (a URL to any of its databases)
	// instead of starting one in DataDir; SQSEndpoint likewise for the emulator.
	PostgresURL string
	SQSEndpoint string
	// NoFullPageWrites starts the stack's own PostgreSQL server without
	// full-page writes, as Aurora's storage runs (pgserver.Options): for the
	// benches, whose data is thrown away.
	NoFullPageWrites bool
	// Replicas is the number of streaming hot-standby replicas of the
	// stack's own PostgreSQL server to start (in DataDir) for the read path
	// [0]. With PostgresURL, ReplicaURLs names running replicas instead.
	Replicas    int
	ReplicaURLs []string
	// ReadConns is the pool size per replica and database [8].
	ReadConns int32
	// LookupSlots is the storefront's product-lookup queries in flight per
	// database (pgstore.ReaderOptions.LookupSlots) [its default].
	LookupSlots int
	// ReplicaMaxLag is the replicas' staleness bound
	// (pgstore.ReaderOptions.MaxLag) [its default].
	ReplicaMaxLag time.Duration
	// Prefix is put before every database and queue name, so that several
	// stacks (tests) share one server and one emulator.
	Prefix string

	ChunkRows        int   // [catalog.MaxChunkRows]
	ChunkBytes       int   // [catalog.DefaultChunkBytes] byte budget of a chunk object
	InflightCap      int   // [catalog.DefaultInflightCap]
	LargeThreshold   int   // [catalog.DefaultLargeThresholdRows] changed rows
	MaxUploadBytes   int64 // [1 GiB]
	DiffConcurrency  int   // [2]
	ApplyConcurrency int   // [4] per apply queue
	// VisibilityTimeout of the queues [30s], at least the handler timeout.
	VisibilityTimeout time.Duration
	HandlerTimeout    time.Duration // [25s]
	// DiffTimeout is the diff's timeout, the budget of one diff run (its
	// Lambda has 15 minutes) [2m]; diff-jobs.fifo's visibility timeout is at
	// least it plus 5 s. A snapshot's product and inflate limits are reached
	// within it (50 million two-byte rows take ~40 s here).
	DiffTimeout time.Duration
	UploadTTL   time.Duration // [upload.DefaultUploadTTL]
	// UploadGrace is how long after its slot's expiry an upload is still
	// taken [arrival.DefaultGrace].
	UploadGrace time.Duration
	// ReservationsPerHour per retailer [upload.DefaultReservationsPerHour].
	ReservationsPerHour int
	// MaxRowBytes is the longest row the diff reads [the snapshot
	// package's 1 MiB]; tests lower it to make oversized rows cheaply.
	MaxRowBytes int
	// SortMemoryBytes is the diff's memory for sorted runs before they
	// spill [diff.DefaultSortMemoryBytes] (CATALOG_SORT_MEMORY_MB), SpillDir
	// where they spill [<DataDir>/tmp] (CATALOG_SPILL_DIR).
	SortMemoryBytes int64
	SpillDir        string
	// MetricsNamespace is the metric lines' CloudWatch namespace
	// [metrics.DefaultNamespace] (CATALOG_METRICS_NAMESPACE).
	MetricsNamespace string
	// WebhookKeys seal webhook secrets (CATALOG_WEBHOOK_KEYS: keys
	// separated by commas, the first sealing) [one key kept in
	// <DataDir>/webhook-key, made on first use].
	WebhookKeys string
	// MaxInflatedBytes, MaxProducts bound a snapshot decompressed and its products [50 GiB, 50 million].
	MaxInflatedBytes, MaxProducts int64

	// SweepEvery is how often the relay's sweeper runs [1m], SweepAge the
	// age from which it takes an event [30s] (DESIGN 8).
	SweepEvery time.Duration
	SweepAge   time.Duration
	// NoFastPath leaves every change event to the sweeper (the apply and
	// the diff do not publish right after they commit).
	NoFastPath bool
	// AnalyticsWindow is how long the analytics consumer gathers events
	// into one batch (its files) [5s]; on AWS the event source's batching
	// window is 20 s.
	AnalyticsWindow time.Duration
	// BackoffBase is the consumers' first retry delay [30s]
	// (CATALOG_BACKOFF_BASE; each retry doubles it, up to 15 min).
	BackoffBase time.Duration
	// MaxReceives is how many times a queue's message is received before
	// it goes to the queue's dead-letter queue [5].
	MaxReceives int
	// StallAfter is how long a generation may go without progress before
	// ops counts it stuck [10m] (ops.Config.StallAfter).
	StallAfter time.Duration
	// WebhookRetryWindow is how long a failing webhook delivery is retried
	// before the DLQ [24h]: the webhooks queue's redrive count covers it.
	WebhookRetryWindow time.Duration
	// WebhookTimeout is how long a webhook receiver has to answer [10s].
	WebhookTimeout time.Duration
	// ReconcileEvery runs a reconciliation of every retailer this often
	// (0: only on request), as the daily schedule does on AWS.
	ReconcileEvery time.Duration
	// GCEvery runs a collection of every retailer this often (0: only on
	// request), as the daily schedule does on AWS; TombstoneAfter is how
	// long after the deleting generation was applied its tombstones may go
	// [0: the chunk objects' retention, 19 days] (DESIGN 14).
	GCEvery, TombstoneAfter time.Duration
	// StuckSweepEvery is how often the stuck-generation sweeper runs [1m];
	// MaxRedrives is how many times it re-drives a generation [3].
	StuckSweepEvery time.Duration
	MaxRedrives     int
	// DiffAttempts is how many runs a generation's diff gets, ApplyAttempts
	// how many tries a chunk the database refuses, before the generation
	// ends rejected and undone (I10) [3 each].
	DiffAttempts, ApplyAttempts int
	// WebhookAWSRules applies AWS's webhook URL rules (https to public
	// addresses only) instead of also taking http://127.0.0.1:<port>.
	WebhookAWSRules bool

	// Test seams: wrap what the diff writes and sends, observe applies,
	// wrap what the relay publishes through.
	WrapDiffBlobs func(diff.Blobs) diff.Blobs
	WrapDiffQueue func(queue.Sender) queue.Sender
	WrapApply     func(eventsource.Handler) eventsource.Handler
	WrapDiff      func(eventsource.Handler) eventsource.Handler
	ApplyObserve  func(msg message.ChunkMessage, start bool)
	WrapPublisher func(topic.Publisher) topic.Publisher
	// NoPollers starts no event-source pollers (tests drive handlers by hand).
	NoPollers bool
	// NotifyDelay sends each S3 object-created notification this long
	// after its PUT answered (a test seam: S3's own are late by a second
	// or more).
	NotifyDelay time.Duration
}

func (o *Options) defaults() {
	if o.DataDir == "" {
		o.DataDir = ".local"
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:8080"
	}
	if o.S3Addr == "" {
		o.S3Addr = "127.0.0.1:0"
	}
	if o.Shards <= 0 {
		o.Shards = 2
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	}
	if o.MaxUploadBytes <= 0 {
		o.MaxUploadBytes = 1 << 30
	}
	if o.DiffConcurrency <= 0 {
		o.DiffConcurrency = 2
	}
	if o.ApplyConcurrency <= 0 {
		o.ApplyConcurrency = 4
	}
	if o.HandlerTimeout <= 0 {
		o.HandlerTimeout = 25 * time.Second
	}
	if o.VisibilityTimeout < o.HandlerTimeout {
		o.VisibilityTimeout = o.HandlerTimeout + 5*time.Second
	}
	if o.DiffTimeout <= 0 {
		o.DiffTimeout = 2 * time.Minute
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 8
	}
	if o.SweepEvery <= 0 {
		o.SweepEvery = time.Minute
	}
	if o.SweepAge <= 0 {
		o.SweepAge = 30 * time.Second
	}
	if o.AnalyticsWindow <= 0 {
		o.AnalyticsWindow = 5 * time.Second
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = retry.DefaultBase
	}
	if o.MaxReceives <= 0 {
		o.MaxReceives = 5
	}
	if o.StuckSweepEvery <= 0 {
		o.StuckSweepEvery = time.Minute
	}
	if o.WebhookRetryWindow <= 0 {
		o.WebhookRetryWindow = 24 * time.Hour
	}
}

// AnalyticsFilter is the analytics queue's subscription filter: change
// events only (infra sets the same).
var AnalyticsFilter = map[string]any{message.AttrType: []string{message.TypeChanges}}

// WebhooksFilter is the webhooks queue's subscription filter: lifecycle
// events only (infra sets the same).
var WebhooksFilter = map[string]any{message.AttrType: []any{map[string]string{"prefix": message.SnapshotTypePrefix}}}

// AnalyticsBatch is the analytics consumer's batch size (events; its event
// source on AWS takes the same).
const AnalyticsBatch = 100

// Queue is one queue of the stack.
type Queue struct {
	Name, URL, DLQURL string
	// the timeout of its function's invocations and its visibility
	// timeout ([Options.HandlerTimeout, Options.VisibilityTimeout])
	handlerTimeout, visibility time.Duration
}

// Stack is a running local system.
type Stack struct {
	Options Options
	// Config is the functions' configuration the stack built its adapters
	// from, as a Lambda builds them from its environment.
	Config     config.Config
	adapters   *connect.Adapters // built from Config, as a Lambda's wiring does
	APIURL     string
	AdminToken string
	Bucket     string
	S3Endpoint string
	Stores     *pgstore.Stores
	Blobs      *s3blob.Store
	SQS        *sqs.Client
	SNS        *sns.Client
	// SQSEndpoint is the emulator's URL (SQS and SNS).
	SQSEndpoint string
	TopicARN    string // the change-events topic, catalog-changes
	// ArrivalQueue receives the bucket's notifications (the arrival
	// function's queue); DiffQueue is diff-jobs.fifo, a group per retailer.
	ArrivalQueue Queue
	DiffQueue    Queue
	SmallQueue   Queue
	LargeQueue   Queue
	// AnalyticsQueue and WebhooksQueue are the consumers', subscribed to the topic.
	AnalyticsQueue Queue
	WebhooksQueue  Queue
	// ReconcileQueue is reconcile-jobs: reconciliation's work, polled by ops.
	ReconcileQueue Queue
	Arrival        *arrival.Handler
	Diff           *diff.Handler
	Apply          *apply.Handler
	Upload         *upload.Handler
	Control        *control.Handler // the control plane's routes, served with Upload by the upload function
	Read           *read.Handler
	Relay          *relay.Relay
	Analytics      *analytics.Handler
	Ops            *ops.Handler
	Webhooks       *webhooks.Handler
	Replicas       []string // host:port of the read replicas serving the storefront
	// Meters count each function's usage as on Lambda (DESIGN 10), with the
	// memory infra gives it; the stack writes them every second (reads every
	// metering.StorefrontFlushEvery) and at Close.
	Meters Meters

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closers []func() error
	server  *http.Server
}

// Start brings the stack up. Close stops everything it started.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	o.defaults()
	// st is not the named result: the goroutines started below use it, and
	// on an error the result is nil while Close stops them.
	st := &Stack{Options: o, AdminToken: o.AdminToken}
	defer func() {
		if err != nil {
			st.Close()
		}
	}()
	if st.AdminToken == "" {
		st.AdminToken = NewAdminToken()
	}
	dataDir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := st.startPostgres(ctx, dataDir); err != nil {
		return nil, err
	}
	if err := st.startSQS(ctx); err != nil {
		return nil, err
	}
	sender := sqsqueue.NewSender(st.SQS)
	if err := st.startTopic(ctx, dataDir); err != nil {
		return nil, err
	}
	if err := st.startS3(ctx, dataDir, sender); err != nil {
		return nil, err
	}
	if err := st.buildHandlers(ctx, dataDir, sender); err != nil {
		return nil, err
	}
	st.startWork(ctx)
	if err := st.serveAPI(); err != nil {
		return nil, err
	}
	if err := st.Resume(ctx); err != nil {
		return nil, err
	}
	return st, nil
}

// progress reports a step of Start on Options.Progress.
func (st *Stack) progress(format string, args ...any) {
	fmt.Fprintf(st.Options.Progress, format+"\n", args...)
}

// startPostgres starts PostgreSQL (unless Options.PostgresURL names one),
// creates and migrates the control and shard databases, opens the stores
// (Config gets their DSNs) and starts the replicas.
func (st *Stack) startPostgres(ctx context.Context, dataDir string) error {
	o := st.Options
	var srv *pgserver.Server
	pgURL := o.PostgresURL
	if pgURL != "" && o.Replicas > 0 {
		return errors.New("stack: Replicas starts replicas of the stack's own server; with PostgresURL pass ReplicaURLs")
	}
	if pgURL == "" {
		st.progress("postgres: checking installation")
		if _, err := pgserver.EnsureInstalled(ctx, o.Progress); err != nil {
			return err
		}
		var err error
		srv, err = pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dataDir, "postgres"), Progress: o.Progress,
			NoFullPageWrites: o.NoFullPageWrites})
		if err != nil {
			return err
		}
		st.closers = append(st.closers, srv.Stop)
		pgURL = srv.URL("postgres")
		st.progress("postgres: listening on 127.0.0.1:%d", srv.Port())
	}
	controlDSN, err := pgserver.CreateDatabase(ctx, pgURL, o.Prefix+"catalog_control")
	if err != nil {
		return err
	}
	var shardDSNs []string
	for i := 0; i < o.Shards; i++ {
		dsn, err := pgserver.CreateDatabase(ctx, pgURL, fmt.Sprintf("%scatalog_shard_%d", o.Prefix, i))
		if err != nil {
			return err
		}
		shardDSNs = append(shardDSNs, dsn)
	}
	// The functions' configuration, filled as the stand-ins come up; every
	// adapter is built from it by the same code as in the Lambdas.
	st.Config = config.Config{
		AWS: config.AWS{
			Region: Region,
			// The key pair the S3 stand-in verifies every signature with.
			Credentials: credentials.NewStaticCredentialsProvider(s3server.DefaultAccessKeyID, s3server.DefaultSecretAccessKey, ""),
		},
		Databases: config.Databases{ControlDB: controlDSN, ShardDBs: shardDSNs,
			DBMaxConns: int32(4 + 2*o.ApplyConcurrency + o.DiffConcurrency)},
		Limits: config.Limits{
			ChunkRows: o.ChunkRows, ChunkBytes: o.ChunkBytes, InflightCap: o.InflightCap, LargeThresholdRows: o.LargeThreshold,
			MaxUploadBytes: o.MaxUploadBytes, UploadTTL: o.UploadTTL,
			UploadGrace: o.UploadGrace, ReservationsPerHour: o.ReservationsPerHour,
			DiffAttempts: o.DiffAttempts, ApplyAttempts: o.ApplyAttempts,
		},
		Admin: config.Admin{AdminToken: st.AdminToken},
	}
	st.adapters = connect.New(&st.Config)
	st.Stores, err = st.adapters.OpenStores(ctx)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, func() error { st.Stores.Close(); return nil })
	if err := st.Stores.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	st.progress("postgres: control + %d shard databases migrated", o.Shards)
	return st.startReplicas(ctx, srv, dataDir)

}

// startSQS starts the SQS emulator (unless Options.SQSEndpoint names one)
// and creates the pipeline's queues (Config gets their URLs).
func (st *Stack) startSQS(ctx context.Context) error {
	o := st.Options
	var err error
	sqsEndpoint := o.SQSEndpoint
	if sqsEndpoint == "" {
		st.progress("sqs: checking the emulator installation")
		if _, err := sqsemulator.EnsureInstalled(ctx, o.Progress); err != nil {
			return err
		}
		emu, err := sqsemulator.Start(ctx, sqsemulator.Options{Progress: o.Progress})
		if err != nil {
			return err
		}
		st.closers = append(st.closers, emu.Stop)
		sqsEndpoint = emu.Endpoint()
		st.progress("sqs: emulator at %s", sqsEndpoint)
	}
	st.SQSEndpoint = sqsEndpoint
	st.Config.SQSEndpoint = sqsEndpoint
	st.SQS, err = st.adapters.SQSClient(ctx)
	if err != nil {
		return err
	}
	for _, q := range []struct {
		name string
		into *Queue
	}{
		{"arrivals", &st.ArrivalQueue}, {"diff-jobs.fifo", &st.DiffQueue},
		{"apply-small.fifo", &st.SmallQueue}, {"apply-large.fifo", &st.LargeQueue},
		{"reconcile-jobs", &st.ReconcileQueue},
	} {
		q.into.Name = o.Prefix + q.name
		q.into.handlerTimeout, q.into.visibility = o.HandlerTimeout, o.VisibilityTimeout
		if q.into == &st.DiffQueue {
			q.into.handlerTimeout, q.into.visibility = o.DiffTimeout, max(o.VisibilityTimeout, o.DiffTimeout+5*time.Second)
		}
		q.into.URL, q.into.DLQURL, err = sqsemulator.EnsureQueue(ctx, st.SQS, q.into.Name, q.into.visibility, o.MaxReceives)
		if err != nil {
			return err
		}
	}
	st.Config.DiffQueueURL, st.Config.ApplySmallQueueURL, st.Config.ApplyLargeQueueURL = st.DiffQueue.URL, st.SmallQueue.URL, st.LargeQueue.URL
	st.Config.Operations = config.Operations{ArrivalsQueueURL: st.ArrivalQueue.URL, ArrivalsDLQURL: st.ArrivalQueue.DLQURL,
		DiffDLQURL: st.DiffQueue.DLQURL, ApplySmallDLQURL: st.SmallQueue.DLQURL, ApplyLargeDLQURL: st.LargeQueue.DLQURL,
		ReconcileQueueURL: st.ReconcileQueue.URL, ReconcileDLQURL: st.ReconcileQueue.DLQURL, StuckAfter: o.StallAfter, StuckMaxRedrives: o.MaxRedrives,
		TombstoneAfter: o.TombstoneAfter}
	return nil
}

// startTopic creates the change-events topic and the consumers' queues
// subscribed to it, and settles the webhooks' retry and keys (Config gets
// them).
func (st *Stack) startTopic(ctx context.Context, dataDir string) error {
	o := st.Options
	var err error
	// SNS: the change-events topic (the emulator keeps no state across a
	// restart; the outbox keeps what is not published yet).
	st.Config.SNSEndpoint = st.SQSEndpoint
	if st.SNS, err = st.adapters.SNSClient(ctx); err != nil {
		return err
	}
	if st.TopicARN, err = sqsemulator.EnsureTopic(ctx, st.SNS, o.Prefix+"catalog-changes"); err != nil {
		return err
	}
	st.Config.ChangeTopicARN = st.TopicARN
	st.progress("sns: topic %s", st.TopicARN)
	// The consumers' queues, each subscribed with raw message delivery and
	// a filter on the event type, as on AWS.
	st.AnalyticsQueue = Queue{Name: o.Prefix + "analytics"}
	if st.AnalyticsQueue.URL, st.AnalyticsQueue.DLQURL, err = sqsemulator.EnsureQueue(ctx, st.SQS, st.AnalyticsQueue.Name, o.VisibilityTimeout, o.MaxReceives); err != nil {
		return err
	}
	if _, err := sqsemulator.Subscribe(ctx, st.SNS, st.TopicARN, st.AnalyticsQueue.Name, AnalyticsFilter); err != nil {
		return err
	}
	// The webhooks queue parks a message only after its whole retry
	// schedule (DESIGN 8): its redrive count is the schedule's receives.
	st.Config.BackoffBase, st.Config.WebhookRetryWindow, st.Config.WebhookLoopbackHTTP = o.BackoffBase, o.WebhookRetryWindow, !o.WebhookAWSRules
	st.WebhooksQueue = Queue{Name: o.Prefix + "webhooks"}
	receives := min(st.Config.Retry().Receives(o.WebhookRetryWindow), 1000)
	if st.WebhooksQueue.URL, st.WebhooksQueue.DLQURL, err = sqsemulator.EnsureQueue(ctx, st.SQS, st.WebhooksQueue.Name, o.VisibilityTimeout, receives); err != nil {
		return err
	}
	if _, err := sqsemulator.Subscribe(ctx, st.SNS, st.TopicARN, st.WebhooksQueue.Name, WebhooksFilter); err != nil {
		return err
	}
	st.Config.AnalyticsQueueURL, st.Config.WebhooksQueueURL = st.AnalyticsQueue.URL, st.WebhooksQueue.URL
	st.Config.AnalyticsDLQURL, st.Config.WebhooksDLQURL = st.AnalyticsQueue.DLQURL, st.WebhooksQueue.DLQURL
	if st.Config.WebhookKeys = o.WebhookKeys; st.Config.WebhookKeys == "" {
		if st.Config.WebhookKeys, err = webhookKeys(dataDir); err != nil {
			return err
		}
	}

	return nil
}

// startS3 starts the S3 stand-in, its object-created notifications sent to
// arrivals through sender, and builds the blob store (Config gets the
// bucket and endpoint).
func (st *Stack) startS3(ctx context.Context, dataDir string, sender *sqsqueue.Sender) error {
	o := st.Options
	var err error
	// S3, with object-created notifications to arrivals.
	st.Bucket = strings.ToLower(strings.ReplaceAll(o.Prefix, "_", "-")) + "catalog-snapshots"
	var s3srv *s3server.Server
	// The stand-in's server goroutines (and the notifications they send)
	// inherit the label of the goroutine that starts them.
	pprof.Do(ctx, pprof.Labels(ProfileLabel, LabelS3), func(ctx context.Context) {
		s3srv, err = st.startS3Server(ctx, dataDir, sender)
	})
	if err != nil {
		return err
	}
	st.closers = append(st.closers, s3srv.Close)
	st.S3Endpoint = s3srv.Endpoint()
	st.Config.Bucket, st.Config.S3Endpoint = st.Bucket, st.S3Endpoint
	if st.Blobs, err = st.adapters.Blobs(ctx); err != nil {
		return err
	}
	st.progress("s3: %s (bucket %s)", st.S3Endpoint, st.Bucket)

	return nil
}

// startS3Server starts the S3 stand-in's server.
func (st *Stack) startS3Server(ctx context.Context, dataDir string, sender *sqsqueue.Sender) (*s3server.Server, error) {
	o := st.Options
	return s3server.Start(ctx, s3server.Options{
		Dir: filepath.Join(dataDir, "s3"), Addr: o.S3Addr, Buckets: []string{st.Bucket},
		MaxUploadBytes: o.MaxUploadBytes, NotifyPrefix: "snapshots/", Logger: o.Logger,
		AccessKeyID: s3server.DefaultAccessKeyID, SecretAccessKey: s3server.DefaultSecretAccessKey,
		Notify: func(ctx context.Context, ev lambdaevents.S3Event) error {
			body, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			if o.NotifyDelay > 0 {
				go func() {
					time.Sleep(o.NotifyDelay)
					if err := sender.Send(context.WithoutCancel(ctx), st.ArrivalQueue.URL, string(body), "", ""); err != nil {
						st.progress("s3: late notification of %s: %v", ev.Records[0].S3.Object.Key, err)
					}
				}()
				return nil
			}
			return sender.Send(ctx, st.ArrivalQueue.URL, string(body), "", "")
		},
	})
}

// buildHandlers builds every function's handler through its wiring
// package's Build, the constructor the Lambda's New calls, with the stack's
// adapters wrapped by the Options' test seams (blobs, queues, publisher);
// the stack's knobs reach the handlers through Config.
func (st *Stack) buildHandlers(ctx context.Context, dataDir string, sender *sqsqueue.Sender) error {
	o := st.Options
	log := func(function string) *slog.Logger { return o.Logger.With("function", function) }
	var diffBlobs diff.Blobs = st.Blobs
	if o.WrapDiffBlobs != nil {
		diffBlobs = o.WrapDiffBlobs(diffBlobs)
	}
	var diffQueue queue.Sender = sender
	if o.WrapDiffQueue != nil {
		diffQueue = o.WrapDiffQueue(diffQueue)
	}
	var publisher topic.Publisher = snstopic.New(st.SNS, st.TopicARN)
	if o.WrapPublisher != nil {
		publisher = o.WrapPublisher(publisher)
	}
	box, err := st.adapters.WebhookSecrets(ctx)
	if err != nil {
		return err
	}
	// The diff's sorted runs spill here (as on Lambda to /tmp); the files
	// are unlinked at creation, so nothing is left behind.
	spillDir := o.SpillDir
	if spillDir == "" {
		spillDir = filepath.Join(dataDir, "tmp")
	}
	if err := os.MkdirAll(spillDir, 0o755); err != nil {
		return err
	}
	st.Config.SpillDir, st.Config.SortMemoryBytes = spillDir, o.SortMemoryBytes
	st.Config.MaxRowBytes, st.Config.MaxInflatedBytes, st.Config.MaxProducts = o.MaxRowBytes, o.MaxInflatedBytes, o.MaxProducts
	st.Config.DiffRetryBackoff = time.Second
	st.Config.RelaySweepAge = o.SweepAge
	st.Config.WebhookTimeout = o.WebhookTimeout
	// The cost report's fixed costs: one cluster per shard and the control's.
	st.Config.Metering.CostDeployment = fmt.Sprintf("clusters=%d", o.Shards+1)
	c := &st.Config

	// One relay: the sweeper's, and the fast path of the diff and the apply
	// (unless Options.NoFastPath).
	st.Relay = relaywiring.Build(c, relaywiring.Deps{Stores: st.Stores, Blobs: st.Blobs, Publisher: publisher,
		Logger: log("relay"), Metrics: st.metrics("relay")})
	var diffEvents diff.Flusher
	var applyEvents apply.Flusher
	if !o.NoFastPath {
		diffEvents, applyEvents = relayFastPath{st.Relay}, relayFastPath{st.Relay}
	}
	st.Diff = diffwiring.Build(c, diffwiring.Deps{Stores: st.Stores, Blobs: diffBlobs, Sender: diffQueue, Jobs: sender,
		Events: diffEvents, Logger: log("diff"), Metrics: st.metrics("diff")})
	st.Arrival = arrivalwiring.Build(c, arrivalwiring.Deps{Stores: st.Stores, Sender: sender, Logger: log("arrival"), Metrics: st.metrics("arrival")})
	st.Apply = applywiring.Build(c, applywiring.Deps{Stores: st.Stores, Blobs: st.Blobs, Jobs: sender, Visibility: sqsqueue.NewVisibility(st.SQS),
		Events: applyEvents, Logger: log("apply"), Metrics: st.metrics("apply")})
	st.Apply.Observe = o.ApplyObserve
	st.Meters = newMeters(st.Stores, o.Logger)
	if st.Upload, st.Control, err = uploadwiring.Build(c, uploadwiring.Deps{Stores: st.Stores, Blobs: st.Blobs, Sender: sender, Secrets: box,
		AdminToken: st.AdminToken, Logger: log("upload"), Metrics: st.metrics("upload")}); err != nil {
		return err
	}
	st.Read = readwiring.Build(c, readwiring.Deps{Stores: st.Stores, Logger: log("read"), Metrics: st.metrics("read")})
	st.Analytics = analyticswiring.Build(c, analyticswiring.Deps{Stores: st.Stores, Blobs: st.Blobs, Visibility: sqsqueue.NewVisibility(st.SQS), Logger: log("analytics")})
	st.Ops = opswiring.Build(c, opswiring.Deps{Stores: st.Stores, Blobs: st.Blobs, SQS: st.SQS, AdminToken: st.AdminToken,
		Logger: log("ops"), Metrics: st.metrics("ops")})
	st.Webhooks = webhookswiring.Build(c, webhookswiring.Deps{Stores: st.Stores, Secrets: box, Visibility: sqsqueue.NewVisibility(st.SQS),
		Logger: log("webhooks"), Metrics: st.metrics("webhooks")})
	return nil
}

// startWork starts the meters, the queues' pollers (unless
// Options.NoPollers) and the scheduled tasks, until Close.
func (st *Stack) startWork(ctx context.Context) {
	o := st.Options
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	st.cancel = cancel
	for _, m := range st.Meters.all() {
		st.wg.Add(1)
		go pprof.Do(runCtx, pprof.Labels(ProfileLabel, "meters"), func(ctx context.Context) { defer st.wg.Done(); m.Run(ctx) })
	}
	if !o.NoPollers {
		applyHandler := eventsource.Handler(metering.Lambda(st.Meters.Apply, st.Apply.HandleSQS))
		if o.WrapApply != nil {
			applyHandler = o.WrapApply(applyHandler)
		}
		diffHandler := eventsource.Handler(metering.Lambda(st.Meters.Diff, st.Diff.HandleSQS))
		if o.WrapDiff != nil {
			diffHandler = o.WrapDiff(diffHandler)
		}
		st.poll(runCtx, st.ArrivalQueue, 10, 0, 2, labelled("arrival", metering.Lambda(st.Meters.Arrival, st.Arrival.HandleSQS)))
		st.poll(runCtx, st.DiffQueue, 1, 0, o.DiffConcurrency, labelled("diff", diffHandler))
		st.poll(runCtx, st.SmallQueue, 10, 0, o.ApplyConcurrency, labelled("apply", applyHandler))
		st.poll(runCtx, st.LargeQueue, 10, 0, o.ApplyConcurrency, labelled("apply", applyHandler))
		st.poll(runCtx, st.AnalyticsQueue, AnalyticsBatch, o.AnalyticsWindow, 2, labelled("analytics", metering.Lambda(st.Meters.Consumers, st.Analytics.HandleSQS)))
		st.poll(runCtx, st.WebhooksQueue, 10, 0, 2, labelled("webhooks", metering.Lambda(st.Meters.Consumers, st.Webhooks.HandleSQS)))
		st.poll(runCtx, st.ReconcileQueue, 1, 0, 1, labelled("ops", st.Ops.HandleSQS))
		if o.ReconcileEvery > 0 {
			st.every(runCtx, o.ReconcileEvery, "ops", "scheduled reconciliation", st.Ops.ScheduledReconcile)
		}
		if o.GCEvery > 0 {
			st.every(runCtx, o.GCEvery, "ops", "scheduled collection", func(ctx context.Context) error {
				return st.Ops.RunTask(ctx, ops.TaskGC)
			})
		}
		st.every(runCtx, o.StuckSweepEvery, "ops", "stuck-generation sweeper", func(ctx context.Context) error {
			_, err := st.Ops.Sweep(ctx)
			return err
		})
		// The moves of retailers between shards (the ops function's
		// schedule on AWS): a running move goes on from its checkpoint.
		st.every(runCtx, time.Second, "ops", "moves", st.Ops.RunMoves)
		st.every(runCtx, o.SweepEvery, "relay", "relay sweeper", metering.Scheduled(st.Meters.Relay, func(ctx context.Context) error {
			_, err := st.Relay.Sweep(ctx)
			return err
		}))
	}
	st.every(runCtx, 10*time.Second, "read", "storefront metrics", func(ctx context.Context) error {
		st.Read.FlushMetrics(ctx) // as after each storefront invocation on Lambda
		return nil
	})

}

// serveAPI serves the HTTP API on Options.Addr (APIURL) until Close.
func (st *Stack) serveAPI() error {
	o := st.Options
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Addr, err)
	}
	st.APIURL = "http://" + ln.Addr().String()
	st.server = newAPIServer(withRequestIDs(st.Handler()), defaultAPILimits, o.Logger)
	st.wg.Add(1)
	// The connections' goroutines inherit the label; each route's handler
	// runs under its function's (Handler).
	go pprof.Do(context.Background(), pprof.Labels(ProfileLabel, LabelAPIServer), func(context.Context) {
		defer st.wg.Done()
		if err := st.server.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			o.Logger.Error("http server", "err", err)
		}
	})

	return nil
}

// apiLimits bound what one client can hold of the API server: a
// connection and a goroutine for at most these times, headers and a body
// of at most these sizes.
type apiLimits struct {
	readHeader time.Duration // the request line and headers
	read       time.Duration // the whole request, body included
	write      time.Duration // from the end of the headers to the end of the answer
	idle       time.Duration // a keep-alive connection waiting for its next request
	maxHeader  int           // bytes of request line and headers
	maxBody    int64         // bytes of body
}

// defaultAPILimits follow API Gateway's where it has one: it takes 10 KB
// of request line and headers and a 10 MB body, and gives a request 30 s.
// The API's bodies are small JSON documents (the handlers bound each
// route's further), so a whole request is read within 30 s; the write
// bound, generous, only ends a client that stops reading its answer.
var defaultAPILimits = apiLimits{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      2 * time.Minute,
	idle:       time.Minute,
	maxHeader:  16 << 10,
	maxBody:    10 << 20,
}

// newAPIServer is the API's HTTP server with limits l: a body over
// l.maxBody is refused before any handler reads it, as API Gateway
// refuses it (413, its own error shape), and cannot grow past it while
// read.
func newAPIServer(h http.Handler, l apiLimits, log *slog.Logger) *http.Server {
	bounded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > l.maxBody {
			w.Header().Set("Connection", "close") // the body is not read
			w.Header().Set("apigw-requestid", randomID())
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			io.WriteString(w, `{"message":"Request Entity Too Large"}`+"\n")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, l.maxBody)
		h.ServeHTTP(w, r)
	})
	return &http.Server{
		Handler:           bounded,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    l.maxHeader,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// startReplicas starts o.Replicas streaming replicas of srv (or takes
// o.ReplicaURLs) and routes the storefront's reads of every database to them
// (to read pools on the writers when there are none).
func (st *Stack) startReplicas(ctx context.Context, srv *pgserver.Server, dataDir string) error {
	o := st.Options
	var addrs []string
	for _, u := range o.ReplicaURLs {
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" {
			return fmt.Errorf("replica url %q: want a postgres://host:port/database URL", u)
		}
		addrs = append(addrs, parsed.Host)
	}
	for i := 1; i <= o.Replicas; i++ {
		rep, err := srv.StartReplica(ctx, filepath.Join(dataDir, fmt.Sprintf("postgres-replica-%d", i)), 0)
		if err != nil {
			return fmt.Errorf("replica %d: %w", i, err)
		}
		st.closers = append(st.closers, rep.Stop)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", rep.Port()))
		fmt.Fprintf(o.Progress, "postgres: replica %d (hot standby) on 127.0.0.1:%d\n", i, rep.Port())
	}
	shardReaders := make([][]string, o.Shards)
	for i := range shardReaders {
		shardReaders[i] = addrs
	}
	// Each replica holds every database of the server: "host:port" takes the
	// database name (and the rest) from each writer's DSN.
	if err := st.Stores.AttachReaders(addrs, shardReaders, pgstore.ReaderOptions{
		MaxConns: o.ReadConns, LookupSlots: o.LookupSlots, MaxLag: o.ReplicaMaxLag, Logger: o.Logger.With("function", "read"),
	}); err != nil {
		return err
	}
	st.Replicas = addrs
	return nil
}

// Handler is the HTTP API: every route of the upload and read functions on one mux.
func (st *Stack) Handler() http.Handler {
	mux := http.NewServeMux()
	uploads := labelledHTTP("upload", metering.HTTP(st.Meters.Upload, uploadwiring.Routes(st.Upload, st.Control)))
	for _, route := range append(st.Upload.Routes(), st.Control.Routes()...) {
		mux.Handle(route, uploads)
	}
	// The storefront's routes, each request metered like a Lambda invocation.
	reads := http.NewServeMux()
	st.Read.Register(reads)
	metered := labelledHTTP("read", metering.HTTP(st.Meters.Read, reads))
	for _, route := range st.Read.Routes() {
		mux.Handle(route, metered)
	}
	for _, route := range st.Ops.Routes() {
		mux.Handle(route, labelledHTTP("ops", st.Ops))
	}
	mux.HandleFunc("/", httpapi.NotFound)
	return mux
}

// metrics is the recorder of a function's metric lines.
func (st *Stack) metrics(function string) *metrics.Recorder {
	if st.Options.Metrics == nil {
		return nil
	}
	return metrics.New(st.Options.Metrics, metrics.Options{Namespace: st.Options.MetricsNamespace, Function: function})
}

// withRequestIDs gives each HTTP request the ids it has behind API Gateway
// and Lambda, for the handlers' log lines, and answers with its API request
// id in X-Request-Id, as LambdaHandler does.
func withRequestIDs(h http.Handler) http.Handler {
	h = httpapi.WithRequestID(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(logging.WithLambdaRequestID(r.Context(), randomID())))
	})
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// webhookKeys is the key that seals webhook secrets: the one kept in
// dataDir (made on first use), so saved webhooks survive a restart.
func webhookKeys(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "webhook-key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	key := webhook.NewKey()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save the webhook key: %w", err)
	}
	return key, nil
}

// poll plays the event source of q: batches of up to batch messages
// gathered for up to window, at most concurrency invocations at once.
func (st *Stack) poll(ctx context.Context, q Queue, batch int, window time.Duration, concurrency int, h eventsource.Handler) {
	st.wg.Add(1)
	// The poller's goroutines run under LabelPollers, each invocation
	// under its function's label (labelled).
	go pprof.Do(ctx, pprof.Labels(ProfileLabel, LabelPollers), func(ctx context.Context) {
		defer st.wg.Done()
		err := eventsource.Run(ctx, st.SQS, eventsource.Options{
			QueueURL: q.URL, BatchSize: batch, BatchWindow: window, Concurrency: concurrency,
			VisibilityTimeout: cmp.Or(q.visibility, st.Options.VisibilityTimeout), HandlerTimeout: cmp.Or(q.handlerTimeout, st.Options.HandlerTimeout),
			WaitTime: time.Second, Logger: st.Options.Logger.With("queue", q.Name),
		}, h)
		if err != nil {
			st.Options.Logger.Error("poller stopped", "queue", q.Name, "err", err)
		}
	})
}

// every runs fn now and then every interval until ctx ends, as
// EventBridge Scheduler runs a scheduled function, under the profiler
// label of function.
func (st *Stack) every(ctx context.Context, interval time.Duration, function, name string, fn func(context.Context) error) {
	st.wg.Add(1)
	go pprof.Do(ctx, pprof.Labels(ProfileLabel, function), func(ctx context.Context) {
		defer st.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			// Each run is an invocation of its own, with its request id.
			if err := fn(logging.WithLambdaRequestID(ctx, randomID())); err != nil && ctx.Err() == nil {
				st.Options.Logger.Error(name+" failed", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// Resume re-sends the diff job of every unfinished generation. Messages do
// not survive an emulator restart; the database does, and a diff re-run is
// idempotent (applied chunks are skipped), so nothing is lost. The job
// names the generation's own upload key, as the sweeper's does: an undo's
// object is another generation's upload, or none (BeginDiff knows which).
func (st *Stack) Resume(ctx context.Context) error {
	for i, sh := range st.Stores.Shards {
		list, err := sh.Unfinished(ctx)
		if err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
		for _, u := range list {
			if err := st.ResendDiffJob(ctx, keys.Upload(u.RetailerID, u.Generation)); err != nil {
				return fmt.Errorf("resume %s/%d: %w", u.RetailerID, u.Generation, err)
			}
			st.Options.Logger.Info("resumed unfinished generation", "retailer_id", u.RetailerID, "generation", u.Generation)
		}
	}
	st.replayRecentEvents(ctx)
	return nil
}

// replayRecentEvents writes every retailer's change and lifecycle events
// of the webhooks' retry window (at least an hour) back into its outbox.
// The emulator keeps its queues in memory: the copies SNS had delivered to
// the consumers' queues, a webhook waiting for its retry included, are
// gone after a restart, while the outbox rows they came from were
// settled. The consumers ignore what they have seen (by event id and by
// version), so a replay delivers exactly what was lost. On AWS the queues
// are durable and nothing of this is needed. A failure is logged, not
// fatal: the stack starts, and `catalogctl replay` does the same by hand.
func (st *Stack) replayRecentEvents(ctx context.Context) {
	since := time.Now().Add(-max(st.Options.WebhookRetryWindow, time.Hour))
	retailers, changes, lifecycle := 0, 0, 0
	after := ""
	for {
		ids, err := st.Stores.RetailerIDs(ctx, after, 500)
		if err != nil {
			st.Options.Logger.Error("replaying recent events after the restart failed; run catalogctl replay", "err", err)
			return
		}
		for _, id := range ids {
			c, l, err := st.Stores.Replay(ctx, id, since)
			if err != nil {
				st.Options.Logger.Error("replaying recent events after the restart failed; run catalogctl replay",
					"retailer_id", id, "since", since, "err", err)
				continue
			}
			if c+l > 0 {
				retailers++
			}
			changes, lifecycle = changes+c, lifecycle+l
		}
		if len(ids) < 500 {
			break
		}
		after = ids[len(ids)-1]
	}
	if retailers > 0 {
		st.Options.Logger.Info("recent change events replayed into the outboxes (the emulator's queues do not survive a restart)",
			"since", since, "retailers", retailers, "changes", changes, "lifecycle", lifecycle)
	}
}

// ResendDiffJob puts the diff job of an upload key (an object-created
// notification) on diff-jobs.fifo, in its retailer's group, as the
// arrival function and a confirmation do.
func (st *Stack) ResendDiffJob(ctx context.Context, key string) error {
	retailerID, _, err := keys.ParseUpload(key)
	if err != nil {
		return err
	}
	body := message.ObjectCreatedMessage(Region, st.Bucket, key, time.Now())
	return sqsqueue.NewSender(st.SQS).Send(ctx, st.DiffQueue.URL, body, message.DiffJobGroupID(retailerID), message.DiffJobDedupID(body))
}

// SendS3Event delivers an S3 event notification where the bucket's
// notifications go (the arrivals queue), as S3 would; tests forge events
// with it.
func (st *Stack) SendS3Event(ctx context.Context, ev lambdaevents.S3Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	return sqsqueue.NewSender(st.SQS).Send(ctx, st.ArrivalQueue.URL, string(body), "", "")
}

// Close stops the pollers, the API and every process the stack started.
func (st *Stack) Close() error {
	if st.server != nil {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st.server.Shutdown(shutdownCtx)
		cancel()
	}
	if st.cancel != nil {
		st.cancel()
	}
	st.wg.Wait()
	var errs []error
	for i := len(st.closers) - 1; i >= 0; i-- {
		errs = append(errs, st.closers[i]())
	}
	st.closers = nil
	return errors.Join(errs...)
}
