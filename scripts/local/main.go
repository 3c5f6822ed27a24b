// Command local runs the whole system on one machine.
//
//	go run ./scripts/local up   [--addr 127.0.0.1:8080] [--data-dir .local] [--shards 2] [--replicas 0] [--reconcile-every D] [--gc-every D] [--tombstone-after D]
//	go run ./scripts/local demo [--data-dir .local/demo]   (a new, empty or demo-made dir: it is wiped)
//	go run ./scripts/local test [go test flags...]
//
// up starts PostgreSQL, the SQS emulator, the S3 stand-in, the event-source
// pollers and the HTTP API, installing what is missing on first use, and
// runs until Ctrl-C or SIGTERM; --replicas N adds N streaming hot-standby
// replicas of the PostgreSQL server, which serve the storefront's reads.
// demo tells a short story on a fresh stack and checks the result. test starts one PostgreSQL and one emulator for the
// whole test run and runs every test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/platform/logging"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs one command and returns the exit code.
func run(ctx context.Context, args []string) int {
	if len(args) < 1 {
		usage(os.Stderr)
		return 2
	}
	var err error
	switch args[0] {
	case "up":
		err = up(ctx, args[1:])
	case "demo":
		err = demo(ctx, args[1:])
	case "test":
		err = test(ctx, args[1:])
	case "-h", "--help", "help":
		usage(os.Stdout)
		return 0
	default:
		usage(os.Stderr)
		return 2
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0 // -h: the command printed its usage
	}
	if err != nil {
		var exit exitError
		if errors.As(err, &exit) {
			return int(exit)
		}
		fmt.Fprintln(os.Stderr, "local:", err)
		return 1
	}
	return 0
}

// exitError carries a child's exit code.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

const usageText = `usage:
  go run ./scripts/local up   [--addr 127.0.0.1:8080] [--data-dir .local] [--shards 2] [--replicas 0] [--reconcile-every D] [--gc-every D] [--tombstone-after D] [--stuck-after D] [-v]
  go run ./scripts/local demo [--data-dir .local/demo]
  go run ./scripts/local test [go test flags and packages]
  go run ./scripts/local <command> -h`

func usage(w io.Writer) { fmt.Fprintln(w, usageText) }

// newFlagSet is a command's flag set whose -h prints a usage line, what the
// command does and its flags.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./scripts/local %s %s\n\n%s\n\nflags:\n", name, synopsis, about)
		fs.PrintDefaults()
	}
	return fs
}

// upRun is what up runs with: the stack's options and up's own settings.
type upRun struct {
	stack   stack.Options
	dataDir string
	addr    string
	env     environment
}

// upOptions reads up's flags and the functions' environment (getenv, see
// readEnvironment) into the stack's options; a flag given explicitly wins
// over its variable.
func upOptions(args []string, getenv func(string) string) (upRun, error) {
	fs := newFlagSet("up", "[flags]", `Starts PostgreSQL, the SQS emulator, the S3 stand-in, the event-source pollers
and the HTTP API on loopback (installing what is missing on first use), prints
the API address and the admin token, and runs until Ctrl-C or SIGTERM. Data in
--data-dir survives a restart.

`+environmentHelp)
	addr := fs.String("addr", "127.0.0.1:8080", "address of the HTTP API")
	dataDir := fs.String("data-dir", ".local", "where PostgreSQL data and S3 objects live (survives restarts)")
	shards := fs.Int("shards", 2, "number of shard databases")
	replicas := fs.Int("replicas", 0, "streaming replicas of the PostgreSQL server for the read path")
	verbose := fs.Bool("v", false, "log every function's JSON lines to stderr, metric (EMF) lines included (wins over CATALOG_LOG_LEVEL)")
	reconcileEvery := fs.Duration("reconcile-every", 0, "reconcile every retailer's catalog with its snapshot this often (e.g. 24h; 0: only on request)")
	gcEvery := fs.Duration("gc-every", 0, "collect what nothing needs again (tombstones, directory entries, chunk progress, parked events) of every retailer this often (e.g. 24h; 0: only on request)")
	tombstoneAfter := fs.Duration("tombstone-after", 0, "how long after the deleting generation was applied collection may remove its tombstones (0: the chunk objects' retention, 19 days; wins over CATALOG_TOMBSTONE_AFTER)")
	stuckAfter := fs.Duration("stuck-after", 10*time.Minute, "how long a generation may go without progress before the sweeper re-drives it (wins over CATALOG_STUCK_AFTER)")
	if err := fs.Parse(args); err != nil {
		return upRun{}, err
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if *replicas < 0 {
		return upRun{}, errors.New("--replicas must be 0 or more")
	}
	if *gcEvery < 0 || *tombstoneAfter < 0 {
		return upRun{}, errors.New("--gc-every and --tombstone-after must be 0 or a positive duration (e.g. 24h)")
	}
	if *stuckAfter <= 0 {
		return upRun{}, errors.New("--stuck-after must be a positive duration (e.g. 10m)")
	}
	run := upRun{dataDir: *dataDir, addr: *addr, stack: stack.Options{
		DataDir: *dataDir, Addr: *addr, Shards: *shards, Replicas: *replicas, Progress: os.Stderr,
		ReconcileEvery: *reconcileEvery, StallAfter: *stuckAfter, GCEvery: *gcEvery,
	}}
	var err error
	if run.env, err = readEnvironment(getenv, &run.stack); err != nil {
		return upRun{}, err
	}
	if explicit["stuck-after"] {
		run.stack.StallAfter = *stuckAfter
	}
	if explicit["tombstone-after"] {
		run.stack.TombstoneAfter = *tombstoneAfter
	}
	level := slog.LevelWarn
	if run.env.taken["CATALOG_LOG_LEVEL"] {
		level = run.env.logLevel
	}
	logs := logging.NewSyncWriter(os.Stderr) // the functions' logs and, with -v, their metric lines
	if *verbose {
		level, run.stack.Metrics = slog.LevelInfo, logs
	}
	run.stack.Logger = logging.New(logs, level)
	return run, nil
}

// localVariables are the functions' variables (config.FromEnv) that mean
// on one machine what they mean on AWS, each with what it sets of the
// stack's options. up and demo read them through config.FromEnv, once, as
// the functions do; one that is not set leaves the stack's own default
// (which for CATALOG_MAX_UPLOAD_BYTES is 1 GiB, not AWS's 12 GiB).
var localVariables = []struct {
	name string
	set  func(c config.Config, o *stack.Options)
}{
	{"CATALOG_BACKOFF_BASE", func(c config.Config, o *stack.Options) { o.BackoffBase = c.BackoffBase }},
	{"CATALOG_WEBHOOK_RETRY_WINDOW", func(c config.Config, o *stack.Options) { o.WebhookRetryWindow = c.WebhookRetryWindow }},
	{"CATALOG_WEBHOOK_ALLOW_LOOPBACK", func(c config.Config, o *stack.Options) { o.WebhookAWSRules = !c.WebhookLoopbackHTTP }},
	{"CATALOG_WEBHOOK_KEYS", func(c config.Config, o *stack.Options) { o.WebhookKeys = c.WebhookKeys }},
	{"CATALOG_UPLOAD_TTL", func(c config.Config, o *stack.Options) { o.UploadTTL = c.UploadTTL }},
	{"CATALOG_UPLOAD_GRACE", func(c config.Config, o *stack.Options) { o.UploadGrace = c.UploadGrace }},
	{"CATALOG_RESERVATIONS_PER_HOUR", func(c config.Config, o *stack.Options) { o.ReservationsPerHour = c.ReservationsPerHour }},
	{"CATALOG_MAX_UPLOAD_BYTES", func(c config.Config, o *stack.Options) { o.MaxUploadBytes = c.MaxUploadBytes }},
	{"CATALOG_LARGE_THRESHOLD_ROWS", func(c config.Config, o *stack.Options) { o.LargeThreshold = c.LargeThresholdRows }},
	{"CATALOG_INFLIGHT_CAP", func(c config.Config, o *stack.Options) { o.InflightCap = c.InflightCap }},
	{"CATALOG_SORT_MEMORY_MB", func(c config.Config, o *stack.Options) { o.SortMemoryBytes = c.SortMemoryBytes }},
	{"CATALOG_SPILL_DIR", func(c config.Config, o *stack.Options) { o.SpillDir = c.SpillDir }},
	{"CATALOG_STUCK_AFTER", func(c config.Config, o *stack.Options) { o.StallAfter = c.StuckAfter }},
	{"CATALOG_STUCK_MAX_REDRIVES", func(c config.Config, o *stack.Options) { o.MaxRedrives = c.StuckMaxRedrives }},
	{"CATALOG_TOMBSTONE_AFTER", func(c config.Config, o *stack.Options) { o.TombstoneAfter = c.TombstoneAfter }},
	{"CATALOG_DIFF_ATTEMPTS", func(c config.Config, o *stack.Options) { o.DiffAttempts = c.DiffAttempts }},
	{"CATALOG_MAX_INFLATED_BYTES", func(c config.Config, o *stack.Options) { o.MaxInflatedBytes = c.MaxInflatedBytes }},
	{"CATALOG_MAX_PRODUCTS", func(c config.Config, o *stack.Options) { o.MaxProducts = c.MaxProducts }},
	{"CATALOG_APPLY_ATTEMPTS", func(c config.Config, o *stack.Options) { o.ApplyAttempts = c.ApplyAttempts }},
	{"CATALOG_METRICS_NAMESPACE", func(c config.Config, o *stack.Options) { o.MetricsNamespace = c.MetricsNamespace }},
	{"CATALOG_ADMIN_TOKEN", func(c config.Config, o *stack.Options) { o.AdminToken = c.AdminToken }},
	{"CATALOG_LOG_LEVEL", func(config.Config, *stack.Options) {}}, // the logger's level: environment.logLevel
}

// awsOnlyVariables are the functions' variables that up and demo never take
// from the environment: they name AWS resources (the stack makes its own
// databases, queues, topic and bucket on loopback, and an AWS_ENDPOINT_URL_*
// or a real DSN must never point it elsewhere), or set what only Lambda has
// (its log control, the webhook-sender function, one pool per instance:
// the stack sizes its pools from its own concurrency).
var awsOnlyVariables = []string{
	"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_SQS", "AWS_ENDPOINT_URL_SNS",
	"AWS_LAMBDA_LOG_LEVEL", "CATALOG_BUCKET", "CATALOG_CONTROL_DB", "CATALOG_SHARD_DBS", "CATALOG_CONTROL_HOST",
	"CATALOG_SHARD_HOSTS", "CATALOG_SHARD_READERS", "CATALOG_CONTROL_READER", "CATALOG_DB_USER",
	"CATALOG_DB_SSLROOTCERT", "CATALOG_DB_IAM_AUTH", "CATALOG_DB_MAX_CONNS", "CATALOG_ADMIN_TOKEN_SECRET",
	"CATALOG_DIFF_QUEUE_URL", "CATALOG_APPLY_SMALL_QUEUE_URL", "CATALOG_APPLY_LARGE_QUEUE_URL",
	"CATALOG_ANALYTICS_QUEUE_URL", "CATALOG_WEBHOOKS_QUEUE_URL", "CATALOG_ANALYTICS_DLQ_URL", "CATALOG_WEBHOOKS_DLQ_URL",
	"CATALOG_ARRIVALS_QUEUE_URL", "CATALOG_ARRIVALS_DLQ_URL", "CATALOG_DIFF_DLQ_URL", "CATALOG_APPLY_SMALL_DLQ_URL",
	"CATALOG_APPLY_LARGE_DLQ_URL", "CATALOG_RECONCILE_QUEUE_URL", "CATALOG_RECONCILE_DLQ_URL", "CATALOG_QUEUE_URL_BASE",
	"CATALOG_CHANGE_TOPIC_ARN", "CATALOG_WEBHOOK_SENDER",
	// the meters' and the cost report's: the stack makes its own meters and
	// sizes its deployment from its shards.
	"AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "CATALOG_METER_FLUSH", "CATALOG_OBJECT_RETENTION_DAYS", "CATALOG_COST_DEPLOYMENT",
	// the read function's access-log sampling: the stack logs the
	// storefront's errors and slow requests only (docs/RUNBOOK.md).
	"CATALOG_READ_ACCESS_LOG_SAMPLE", "CATALOG_READ_SLOW_REQUEST",
}

// secretVariables are printed by name only.
var secretVariables = map[string]bool{"CATALOG_ADMIN_TOKEN": true, "CATALOG_WEBHOOK_KEYS": true}

// environmentHelp is the -h text on the environment.
var environmentHelp = func() string {
	var names []string
	for _, v := range localVariables {
		names = append(names, v.name)
	}
	return "Environment: the functions' variables that mean on one machine what they mean\n" +
		"on AWS are read, once, as the functions read them (config.FromEnv); a bad\n" +
		"value stops the start:\n" + indentWords(strings.Join(names, ", ")+".", "  ", 80) + "\n" +
		"A flag given explicitly wins over its variable (--stuck-after over\n" +
		"CATALOG_STUCK_AFTER, -v over CATALOG_LOG_LEVEL). Variables that name AWS\n" +
		"resources (databases, queues, the topic, the bucket, AWS_ENDPOINT_URL_*) are\n" +
		"not taken: the stack makes its own (README.md, \"Two commands\")."
}()

// indentWords breaks text into lines of at most width, each after indent.
func indentWords(text, indent string, width int) string {
	var lines []string
	line := indent
	for _, w := range strings.Fields(text) {
		if line != indent && len(line)+1+len(w) > width {
			lines, line = append(lines, line), indent
		}
		if line != indent {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

// environment is what up and demo took from the functions' environment.
type environment struct {
	taken    map[string]bool // the local variables that were set
	names    []string        // the same, in localVariables' order, with their values (secrets by name only)
	logLevel slog.Level      // CATALOG_LOG_LEVEL, when taken
}

// readEnvironment reads the local variables set in getenv into o, through
// config.FromEnv (the functions' one parser: a bad value is its error).
// Every other variable is hidden from FromEnv, and the databases it
// requires are given placeholders that nothing uses: the stack makes its
// own.
func readEnvironment(getenv func(string) string, o *stack.Options) (environment, error) {
	local := map[string]bool{}
	for _, v := range localVariables {
		local[v.name] = true
	}
	env := environment{taken: map[string]bool{}}
	c, err := config.FromEnv(func(name string) string {
		switch {
		case name == "CATALOG_CONTROL_DB" || name == "CATALOG_SHARD_DBS":
			return "local-stack" // required by FromEnv; never opened
		case !local[name]:
			return ""
		}
		v := getenv(name)
		if strings.TrimSpace(v) != "" {
			env.taken[name] = true
		}
		return v
	})
	if err != nil {
		return env, fmt.Errorf("environment: %w", err)
	}
	if env.taken["CATALOG_WEBHOOK_KEYS"] {
		if strings.HasPrefix(c.WebhookKeys, "secret:") {
			return env, errors.New("environment: CATALOG_WEBHOOK_KEYS: a secret:<arn> needs AWS Secrets Manager; give the keys themselves locally")
		}
		if _, err := webhook.ParseKeys(c.WebhookKeys); err != nil {
			return env, fmt.Errorf("environment: CATALOG_WEBHOOK_KEYS: %w", err)
		}
	}
	for _, v := range localVariables {
		if !env.taken[v.name] {
			continue
		}
		v.set(c, o)
		if secretVariables[v.name] {
			env.names = append(env.names, v.name)
		} else {
			env.names = append(env.names, v.name+"="+strings.TrimSpace(getenv(v.name)))
		}
	}
	env.logLevel = c.LogLevel
	return env, nil
}

func up(ctx context.Context, args []string) error {
	run, err := upOptions(args, os.Getenv)
	if err != nil {
		return err
	}
	// Before anything starts: a second up (or anything else) on the address.
	ln, err := net.Listen("tcp", run.addr)
	if err != nil {
		return fmt.Errorf("cannot serve the API on %s (is another up running? --addr 127.0.0.1:8081 serves elsewhere): %w", run.addr, err)
	}
	ln.Close()
	if run.stack.AdminToken == "" {
		if run.stack.AdminToken, err = adminToken(run.dataDir); err != nil {
			return err
		}
	}
	if len(run.env.names) > 0 {
		fmt.Printf("environment: %s\n", strings.Join(run.env.names, ", "))
	}
	run.stack.S3Addr = s3Addr(run.dataDir)
	st, err := stack.Start(ctx, run.stack)
	if err != nil {
		return err
	}
	saveS3Addr(run.dataDir, st.S3Endpoint)
	fmt.Printf("API:         %s\n", st.APIURL)
	fmt.Printf("admin token: %s\n", st.AdminToken)
	fmt.Printf("S3:          %s (bucket %s)\n", st.S3Endpoint, st.Bucket)
	fmt.Printf("topic:       %s (change events; SNS and SQS at %s)\n", st.TopicARN, st.SQSEndpoint)
	if len(st.Replicas) > 0 {
		fmt.Printf("replicas:    %s (storefront reads; the writer when none answers)\n", strings.Join(st.Replicas, ", "))
	}
	fmt.Printf("data dir:    %s\n", run.dataDir)
	fmt.Println("ready; Ctrl-C stops everything")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping...")
	return st.Close()
}

// adminToken is the admin token kept in the data dir (made on first use),
// so that it survives restarts; $CATALOG_ADMIN_TOKEN, when set, is taken
// instead (readEnvironment).
func adminToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, "admin-token")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", err
	}
	token := stack.NewAdminToken()
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save admin token: %w", err)
	}
	return token, nil
}

// s3Addr is the S3 stand-in's address of the previous run in dataDir, when
// that port is free again, so that presigned URLs survive a restart; else a
// free port.
func s3Addr(dataDir string) string {
	b, err := os.ReadFile(filepath.Join(dataDir, "s3-addr"))
	if err != nil {
		return "127.0.0.1:0"
	}
	addr := strings.TrimSpace(string(b))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "127.0.0.1:0"
	}
	ln.Close()
	return addr
}

// saveS3Addr remembers the S3 stand-in's address for the next start.
func saveS3Addr(dataDir, endpoint string) {
	addr := strings.TrimPrefix(endpoint, "http://")
	_ = os.WriteFile(filepath.Join(dataDir, "s3-addr"), []byte(addr+"\n"), 0o644)
}
