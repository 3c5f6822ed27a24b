//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// riePackage is AWS's Lambda Runtime Interface Emulator, pinned: the
// Lambda runtime API and its REPORT lines (Init Duration, Duration), in
// front of the real read function's bootstrap.
const riePackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie@v0.0.0-20261030222936-bef5c4ba774d"

// lambdaSample is one invocation: the client's latency and the REPORT
// line's Duration (its Init Duration is not an init time: see
// benchReadLambda).
type lambdaSample struct {
	latency, duration time.Duration
	status            int
}

// benchReadLambda measures the storefront the way it runs in production:
// the read function's own bootstrap (built as buildlambdas builds it, for
// this machine) behind the Runtime Interface Emulator, one request at a
// time, as Lambda sends them to an environment. Each of o.colds
// environments is started fresh: its init duration, its first request,
// then o.warm single requests. The reference is the same primary-key
// SELECT, one at a time, on one warm connection.
func benchReadLambda(ctx context.Context, st *stack.Stack, dir string, retailers []readRetailer, o lambdaOptions) error {
	bin := filepath.Join(dir, "lambda")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "read --lambda: building the read function's bootstrap and the emulator")
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	// As buildlambdas builds it, for this machine, less -trimpath and the
	// stripped symbols: the build then shares the test builds' cache.
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc",
		"-o", filepath.Join(bin, "bootstrap"), "./functions/serve/read/lambda")
	build.Dir, build.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("build the read function: %v: %s", err, out)
	}
	install := exec.CommandContext(ctx, "go", "install", riePackage)
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=-mod=mod")
	if out, err := install.CombinedOutput(); err != nil {
		return fmt.Errorf("install the emulator (%s): %v: %s", riePackage, err, out)
	}

	env := lambdaEnv(st)
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func() string {
		r := retailers[rng.IntN(len(retailers))]
		return "/v1/retailers/" + r.ID + "/products/" + r.IDs[rng.IntN(len(r.IDs))]
	}
	var colds, warms []lambdaSample
	for i := 0; i < o.colds; i++ {
		first, rest, err := runLambdaEnvironment(ctx, bin, env, pick, o.warm)
		if err != nil {
			return fmt.Errorf("environment %d: %w", i+1, err)
		}
		colds = append(colds, first)
		warms = append(warms, rest...)
	}
	for _, s := range append(slices.Clone(colds), warms...) {
		if s.status != http.StatusOK {
			return fmt.Errorf("an invocation answered %d", s.status)
		}
	}

	// The reference: the SELECT the function runs, one at a time, warm.
	ref, err := sequentialSelects(ctx, st, retailers, len(warms))
	if err != nil {
		return err
	}

	field := func(ss []lambdaSample, f func(lambdaSample) time.Duration) []time.Duration {
		out := make([]time.Duration, len(ss))
		for i, s := range ss {
			out[i] = f(s)
		}
		slices.Sort(out)
		return out
	}
	q := func(d []time.Duration, p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
	firsts := field(colds, func(s lambdaSample) time.Duration { return s.latency })
	warmLat := field(warms, func(s lambdaSample) time.Duration { return s.latency })
	// The emulator's "Init Duration" is not the init: it times the hand-off
	// of the init to its sandbox, which starts the bootstrap in the
	// background (0.03-0.07 ms, measured). The init is what a fresh
	// environment's first request takes more than a warm one: the process
	// start, the function's init (config, pools), the first connection.
	inits := field(colds, func(s lambdaSample) time.Duration { return max(0, s.latency-q(warmLat, 0.5)) })
	warmDur := field(warms, func(s lambdaSample) time.Duration { return s.duration })
	rows := [][]string{
		{fmt.Sprintf("init: a fresh environment's first request less a warm p50 (%d cold starts)", len(colds)), ms(q(inits, 0.5)), ms(q(inits, 0.9)), ms(inits[len(inits)-1]), "-"},
		{"first request of an environment (init + request), at the client", ms(q(firsts, 0.5)), ms(q(firsts, 0.9)), ms(firsts[len(firsts)-1]), "-"},
		{fmt.Sprintf("single request, warm, at the client (%d)", len(warms)), ms(q(warmLat, 0.5)), ms(q(warmLat, 0.99)), ms(warmLat[len(warmLat)-1]), ratio(q(warmLat, 0.5).Seconds(), q(ref, 0.5).Seconds())},
		{"single request, warm, in the function (REPORT Duration)", ms(q(warmDur, 0.5)), ms(q(warmDur, 0.99)), ms(warmDur[len(warmDur)-1]), ratio(q(warmDur, 0.5).Seconds(), q(ref, 0.5).Seconds())},
		{"reference: the SELECT, one at a time on a warm connection", ms(q(ref, 0.5)), ms(q(ref, 0.99)), ms(ref[len(ref)-1]), "1.00"},
	}
	printColumns(os.Stdout, fmt.Sprintf("read --lambda: the read function's bootstrap under AWS's Runtime Interface Emulator (%s), one request at a time; GET of a product (%d products, %d retailers, %d shards, %d replicas); %s",
		strings.TrimPrefix(riePackage, "github.com/aws/"), countProducts(retailers), len(retailers), len(st.Stores.Shards), len(st.Replicas), machine()),
		[]string{"figure", "p50", "p90 / p99", "max", "p50 / reference"}, rows)
	return nil
}

// lambdaEnv is the read function's environment on the local stack, as
// infra gives it on AWS: the databases (each DSN logging in as the read
// role), its readers, memory and timeout.
func lambdaEnv(st *stack.Stack) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CATALOG_") && !strings.HasPrefix(kv, "AWS_LAMBDA_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"CATALOG_CONTROL_DB="+st.Config.ControlDB,
		"CATALOG_SHARD_DBS="+strings.Join(st.Config.ShardDBs, ","),
		"CATALOG_DB_USER="+catalogsql.RoleRead,
		"CATALOG_LOG_LEVEL=warn",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=1024",
		"AWS_LAMBDA_FUNCTION_TIMEOUT=10",
		"AWS_REGION="+stack.Region,
	)
	if len(st.Replicas) > 0 {
		readers := make([]string, len(st.Config.ShardDBs))
		for i := range readers {
			readers[i] = strings.Join(st.Replicas, "|")
		}
		env = append(env, "CATALOG_SHARD_READERS="+strings.Join(readers, ","), "CATALOG_CONTROL_READER="+strings.Join(st.Replicas, "|"))
	}
	return env
}

// reportLine is the emulator's REPORT line of an invocation.
var reportLine = regexp.MustCompile(`^REPORT RequestId: \S+\s+(?:Init Duration: [0-9.]+ ms\s+)?Duration: ([0-9.]+) ms`)

// runLambdaEnvironment starts one environment (the emulator and, at the
// first invocation, the bootstrap), invokes it 1+warm times one after the
// other, and stops it.
func runLambdaEnvironment(ctx context.Context, bin string, env []string, path func() string, warm int) (lambdaSample, []lambdaSample, error) {
	rieAddr, err := freeAddr()
	if err != nil {
		return lambdaSample{}, nil, err
	}
	apiAddr, err := freeAddr()
	if err != nil {
		return lambdaSample{}, nil, err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "aws-lambda-rie"),
		"--runtime-interface-emulator-address", rieAddr, "--runtime-api-address", apiAddr, "--log-level", "error",
		filepath.Join(bin, "bootstrap"))
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the bootstrap is its child: stopped together
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return lambdaSample{}, nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return lambdaSample{}, nil, err
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	reports := make(chan time.Duration, warm+1) // the REPORT lines' Durations
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := reportLine.FindStringSubmatch(sc.Text()); m != nil {
				durMS, _ := strconv.ParseFloat(m[1], 64)
				reports <- time.Duration(durMS * float64(time.Millisecond))
			}
		}
	}()
	if err := waitListening(ctx, rieAddr); err != nil {
		return lambdaSample{}, nil, fmt.Errorf("%w; emulator: %s", err, stderr.String())
	}
	client := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	invoke := func() (lambdaSample, error) {
		p := path()
		body, _ := json.Marshal(events.APIGatewayV2HTTPRequest{Version: "2.0", RouteKey: "$default", RawPath: p,
			Headers:        map[string]string{"accept": "application/json"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: strconv.FormatUint(rand.Uint64(), 16), HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: p, SourceIP: "127.0.0.1"}}})
		start := time.Now()
		resp, err := client.Post("http://"+rieAddr+"/2015-03-31/functions/function/invocations", "application/json", bytes.NewReader(body))
		if err != nil {
			return lambdaSample{}, err
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		latency := time.Since(start)
		if err != nil {
			return lambdaSample{}, err
		}
		var r events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &r); err != nil {
			return lambdaSample{}, fmt.Errorf("invocation answered %s: %s", resp.Status, out)
		}
		s := lambdaSample{latency: latency, status: r.StatusCode}
		select {
		case s.duration = <-reports:
		case <-time.After(5 * time.Second):
			return s, errors.New("no REPORT line from the emulator")
		}
		return s, nil
	}
	first, err := invoke()
	if err != nil {
		return first, nil, fmt.Errorf("%w; emulator: %s", err, stderr.String())
	}
	rest := make([]lambdaSample, 0, warm)
	for range warm {
		s, err := invoke()
		if err != nil {
			return first, nil, err
		}
		rest = append(rest, s)
	}
	return first, rest, nil
}

// sequentialSelects times n storefront lookups (the read path's SELECT),
// one at a time on one warm connection per shard.
func sequentialSelects(ctx context.Context, st *stack.Stack, retailers []readRetailer, n int) ([]time.Duration, error) {
	conns := make([]*pgx.Conn, len(st.Config.ShardDBs))
	for i, dsn := range st.Config.ShardDBs {
		c, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return nil, err
		}
		defer c.Close(ctx)
		conns[i] = c
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var out []time.Duration
	for i := 0; i < n+50; i++ {
		r := retailers[rng.IntN(len(retailers))]
		start := time.Now()
		rows, err := conns[r.Shard].Query(ctx, pgstore.StorefrontProductSQL(), r.ID, r.IDs[rng.IntN(len(r.IDs))])
		if err != nil {
			return nil, err
		}
		for rows.Next() {
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		if i >= 50 { // the first ones warm the connection and its plan
			out = append(out, time.Since(start))
		}
	}
	slices.Sort(out)
	return out, nil
}

func countProducts(retailers []readRetailer) int {
	n := 0
	for _, r := range retailers {
		n += len(r.IDs)
	}
	return n
}

// moduleRoot is the directory of the repository's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run the bench from the repository (go env GOMOD: %q, %v)", mod, err)
	}
	return filepath.Dir(mod), nil
}

// freeAddr is a loopback address with a free port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitListening waits until something accepts connections at addr.
func waitListening(ctx context.Context, addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing listens at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
