// Command local runs the whole system on one machine.
//
//	go run ./scripts/local up   [--addr 127.0.0.1:8080] [--data-dir .local] [--shards 2] [--replicas 0] [--reconcile-every D]
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

	"github.com/retailcatalog/catalog/functions/logging"
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
  go run ./scripts/local up   [--addr 127.0.0.1:8080] [--data-dir .local] [--shards 2] [--replicas 0] [--reconcile-every D] [--stuck-after D] [-v]
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

func up(ctx context.Context, args []string) error {
	fs := newFlagSet("up", "[flags]", `Starts PostgreSQL, the SQS emulator, the S3 stand-in, the event-source pollers
and the HTTP API on loopback (installing what is missing on first use), prints
the API address and the admin token, and runs until Ctrl-C or SIGTERM. Data in
--data-dir survives a restart.`)
	addr := fs.String("addr", "127.0.0.1:8080", "address of the HTTP API")
	dataDir := fs.String("data-dir", ".local", "where PostgreSQL data and S3 objects live (survives restarts)")
	shards := fs.Int("shards", 2, "number of shard databases")
	replicas := fs.Int("replicas", 0, "streaming replicas of the PostgreSQL server for the read path")
	verbose := fs.Bool("v", false, "log every function's JSON lines to stderr, metric (EMF) lines included")
	reconcileEvery := fs.Duration("reconcile-every", 0, "reconcile every retailer's catalog with its snapshot this often (e.g. 24h; 0: only on request)")
	stuckAfter := fs.Duration("stuck-after", 10*time.Minute, "how long a generation may go without progress before the sweeper re-drives it (CATALOG_STUCK_AFTER on AWS)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *replicas < 0 {
		return errors.New("--replicas must be 0 or more")
	}
	if *stuckAfter <= 0 {
		return errors.New("--stuck-after must be a positive duration (e.g. 10m)")
	}
	// Before anything starts: a second up (or anything else) on the address.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("cannot serve the API on %s (is another up running? --addr 127.0.0.1:8081 serves elsewhere): %w", *addr, err)
	}
	ln.Close()
	token, err := adminToken(*dataDir)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	logs := logging.NewSyncWriter(os.Stderr) // the functions' logs and, with -v, their metric lines
	var metricLines io.Writer
	if *verbose {
		level, metricLines = slog.LevelInfo, logs
	}
	st, err := stack.Start(ctx, stack.Options{
		DataDir: *dataDir, Addr: *addr, S3Addr: s3Addr(*dataDir), Shards: *shards, Replicas: *replicas, AdminToken: token, Progress: os.Stderr,
		ReconcileEvery: *reconcileEvery, StallAfter: *stuckAfter,
		Logger: logging.New(logs, level), Metrics: metricLines,
	})
	if err != nil {
		return err
	}
	saveS3Addr(*dataDir, st.S3Endpoint)
	fmt.Printf("API:         %s\n", st.APIURL)
	fmt.Printf("admin token: %s\n", st.AdminToken)
	fmt.Printf("S3:          %s (bucket %s)\n", st.S3Endpoint, st.Bucket)
	fmt.Printf("topic:       %s (change events; SNS and SQS at %s)\n", st.TopicARN, st.SQSEndpoint)
	if len(st.Replicas) > 0 {
		fmt.Printf("replicas:    %s (storefront reads; the writer when none answers)\n", strings.Join(st.Replicas, ", "))
	}
	fmt.Printf("data dir:    %s\n", *dataDir)
	fmt.Println("ready; Ctrl-C stops everything")
	<-ctx.Done()
	fmt.Fprintln(os.Stderr, "stopping...")
	return st.Close()
}

// adminToken is $CATALOG_ADMIN_TOKEN, or one kept in the data dir so that it
// survives restarts.
func adminToken(dataDir string) (string, error) {
	if v := os.Getenv("CATALOG_ADMIN_TOKEN"); v != "" {
		return v, nil
	}
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
