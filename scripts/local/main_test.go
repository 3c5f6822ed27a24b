package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/config"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// TestHelpExitsZero: -h on the tool and on each command prints usage and
// exits 0 (not "flag: help requested", exit 1), and starts nothing.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-h"}, {"help"}, {"up", "-h"}, {"up", "--help"}, {"demo", "-h"}, {"test", "-h"}} {
		if code := run(context.Background(), args); code != 0 {
			t.Errorf("local %v: exit %d", args, code)
		}
	}
	if code := run(context.Background(), []string{"up", "--no-such-flag"}); code != 1 {
		t.Errorf("a bad flag: exit %d, want 1", code)
	}
}

// TestDemoRefusesADirItDidNotMake: the demo wipes its data dir, so it takes
// only a new or empty one, or one it made (marked), never up's data.
func TestDemoRefusesADirItDidNotMake(t *testing.T) {
	t.Parallel()
	upDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(upDir, "admin-token"), []byte("x\n"), 0o600))
	err := resetDemoDir(upDir)
	require.ErrorContains(t, err, "holds files the demo did not make")
	require.FileExists(t, filepath.Join(upDir, "admin-token"), "nothing deleted")
	require.Equal(t, 1, run(context.Background(), []string{"demo", "--data-dir", upDir}))
	require.FileExists(t, filepath.Join(upDir, "admin-token"))

	// New, then the demo's own (wiped and marked again), and an empty one.
	demoDir := filepath.Join(t.TempDir(), "demo")
	require.NoError(t, resetDemoDir(demoDir))
	require.FileExists(t, filepath.Join(demoDir, demoMarker))
	require.NoError(t, os.WriteFile(filepath.Join(demoDir, "old-run"), nil, 0o644))
	require.NoError(t, resetDemoDir(demoDir))
	require.NoFileExists(t, filepath.Join(demoDir, "old-run"))
	require.FileExists(t, filepath.Join(demoDir, demoMarker))
	require.NoError(t, resetDemoDir(t.TempDir()))
}

// TestDemoHookReceiver: the demo's webhook receiver records each delivery
// with its event id, generation and state, and whether its signature is
// the retailer's (a wrong secret, or none, is not).
func TestDemoHookReceiver(t *testing.T) {
	t.Parallel()
	rc, err := startHookReceiver()
	require.NoError(t, err)
	t.Cleanup(rc.close)
	body := []byte(`{"id":"acme:2:applied","type":"catalog.snapshot.applied","time":"2026-12-01T00:00:00Z","retailer_id":"acme","generation":2,"status":{"retailer_id":"acme","generation":2,"state":"applied"}}`)
	post := func(signature string) {
		req, err := http.NewRequest(http.MethodPost, rc.url, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(webhook.HeaderEventID, "acme:2:applied")
		if signature != "" {
			req.Header.Set(webhook.HeaderSignature, signature)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusNoContent, resp.StatusCode)
	}
	post(webhook.Sign([]byte(demoHookSecret), body))
	post(webhook.Sign([]byte("another secret"), body))
	post("")
	got := rc.deliveries()
	require.Len(t, got, 3)
	for i, want := range []bool{true, false, false} {
		require.Equal(t, "acme:2:applied", got[i].id)
		require.Equal(t, int64(2), got[i].gen)
		require.Equal(t, "applied", got[i].state)
		require.Equal(t, want, got[i].signed, "delivery %d", i)
	}
}

// TestDemoHookReceiverLimits: the demo's receiver cuts off a client that
// sends its headers slowly at the header timeout (however steadily), closes
// an idle keep-alive connection, and takes no body over its bound.
func TestDemoHookReceiverLimits(t *testing.T) {
	t.Parallel()
	rc, err := startHookReceiverWith(hookLimits{readHeader: 400 * time.Millisecond, read: 2 * time.Second,
		write: 2 * time.Second, idle: 400 * time.Millisecond, maxHeader: 4 << 10, maxBody: 1 << 10})
	require.NoError(t, err)
	t.Cleanup(rc.close)
	u, err := url.Parse(rc.url)
	require.NoError(t, err)
	dial := func() net.Conn {
		conn, err := net.Dial("tcp", u.Host)
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	// waitClosed waits for the server to close conn and returns how long it took.
	waitClosed := func(conn net.Conn, r io.Reader) time.Duration {
		start := time.Now()
		require.NoError(t, conn.SetReadDeadline(start.Add(3*time.Second)))
		_, err := io.Copy(io.Discard, r)
		var ne net.Error
		require.False(t, errors.As(err, &ne) && ne.Timeout(), "the receiver kept the connection open")
		return time.Since(start)
	}

	conn := dial()
	go func(conn net.Conn) {
		for _, b := range []byte("POST " + u.Path + " HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 300) + "\r\n\r\n") {
			if _, err := conn.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}(conn)
	took := waitClosed(conn, conn)
	require.GreaterOrEqual(t, took, 350*time.Millisecond)
	require.LessOrEqual(t, took, 1500*time.Millisecond)

	conn = dial()
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", u.Path)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusNoContent, resp.StatusCode)
	took = waitClosed(conn, br)
	require.GreaterOrEqual(t, took, 350*time.Millisecond)
	require.LessOrEqual(t, took, 1500*time.Millisecond)

	resp, err = http.Post(rc.url, "application/json", bytes.NewReader(make([]byte, 2<<10)))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	require.Len(t, rc.deliveries(), 1, "only the small delivery is kept")
}

func TestMain(m *testing.M) { testenv.Main(m) }

// mapEnv is a getenv over env.
func mapEnv(env map[string]string) func(string) string {
	return func(name string) string { return env[name] }
}

// TestUpHonoursEnvironment: the stack started as up starts it, with
// CATALOG_BACKOFF_BASE=1s, retries a failed webhook delivery after about
// a second (the default would wait 30 s), as the webhooks function on AWS
// does with that variable.
func TestUpHonoursEnvironment(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	run, err := upOptions([]string{"--data-dir", t.TempDir(), "--addr", "127.0.0.1:0"}, mapEnv(map[string]string{"CATALOG_BACKOFF_BASE": "1s"}))
	require.NoError(t, err)
	o := run.stack
	o.PostgresURL, o.SQSEndpoint, o.Prefix = testenv.Postgres(t), testenv.SQS(t), testenv.Name("up")
	o.Progress = io.Discard
	st, err := stack.Start(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })

	var mu sync.Mutex
	var attempts []time.Time // of the applied event
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get(webhook.HeaderEventID), ":applied") {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		mu.Lock()
		attempts = append(attempts, time.Now())
		first := len(attempts) == 1
		mu.Unlock()
		if first {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)

	api := apiclient.New(st.APIURL)
	r, err := api.CreateRetailer(ctx, st.AdminToken, "acme")
	require.NoError(t, err)
	require.NoError(t, api.Do(ctx, http.MethodPut, "/v1/retailers/acme/webhook", r.Token,
		map[string]string{"url": hook.URL + "/hook", "secret": demoHookSecret}, nil))
	gen, err := api.Upload(ctx, r.Token, "acme", "", []byte("product_id,title\np1,Thing\n"))
	require.NoError(t, err)
	s, err := api.WaitSettled(ctx, r.Token, "acme", gen, nil)
	require.NoError(t, err)
	require.Equal(t, "applied", s.State)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) >= 2
	}, 15*time.Second, 50*time.Millisecond, "the failed delivery comes back within 15 s (CATALOG_BACKOFF_BASE=1s, not the default 30 s)")
	mu.Lock()
	gap := attempts[1].Sub(attempts[0])
	mu.Unlock()
	t.Logf("the failed delivery came back after %v", gap)
	require.GreaterOrEqual(t, gap, 900*time.Millisecond, "a retry after the backoff, not at once")
	require.Less(t, gap, 10*time.Second)
}

// TestEnvironmentMapping: each local variable, set, reaches the stack's
// option it means, parsed by config.FromEnv; unset, the stack's default
// stays; a variable that names AWS resources is not taken; a bad value is
// an error that names it; an explicit flag wins over its variable.
func TestEnvironmentMapping(t *testing.T) {
	t.Parallel()
	options := func(t *testing.T, env map[string]string, args ...string) upRun {
		t.Helper()
		run, err := upOptions(append([]string{"--data-dir", t.TempDir()}, args...), mapEnv(env))
		require.NoError(t, err)
		return run
	}
	key := webhook.NewKey()
	table := []struct {
		name, value string
		check       func(t *testing.T, run upRun)
	}{
		{"CATALOG_BACKOFF_BASE", "2s", func(t *testing.T, r upRun) { require.Equal(t, 2*time.Second, r.stack.BackoffBase) }},
		{"CATALOG_WEBHOOK_RETRY_WINDOW", "90m", func(t *testing.T, r upRun) { require.Equal(t, 90*time.Minute, r.stack.WebhookRetryWindow) }},
		{"CATALOG_WEBHOOK_ALLOW_LOOPBACK", "false", func(t *testing.T, r upRun) { require.True(t, r.stack.WebhookAWSRules) }},
		{"CATALOG_WEBHOOK_KEYS", key, func(t *testing.T, r upRun) { require.Equal(t, key, r.stack.WebhookKeys) }},
		{"CATALOG_UPLOAD_TTL", "5m", func(t *testing.T, r upRun) { require.Equal(t, 5*time.Minute, r.stack.UploadTTL) }},
		{"CATALOG_UPLOAD_GRACE", "10m", func(t *testing.T, r upRun) { require.Equal(t, 10*time.Minute, r.stack.UploadGrace) }},
		{"CATALOG_RESERVATIONS_PER_HOUR", "3", func(t *testing.T, r upRun) { require.Equal(t, 3, r.stack.ReservationsPerHour) }},
		{"CATALOG_MAX_UPLOAD_BYTES", "1048576", func(t *testing.T, r upRun) { require.Equal(t, int64(1<<20), r.stack.MaxUploadBytes) }},
		{"CATALOG_LARGE_THRESHOLD_ROWS", "5000", func(t *testing.T, r upRun) { require.Equal(t, 5000, r.stack.LargeThreshold) }},
		{"CATALOG_INFLIGHT_CAP", "7", func(t *testing.T, r upRun) { require.Equal(t, 7, r.stack.InflightCap) }},
		{"CATALOG_SORT_MEMORY_MB", "64", func(t *testing.T, r upRun) { require.Equal(t, int64(64<<20), r.stack.SortMemoryBytes) }},
		{"CATALOG_SPILL_DIR", "/tmp/spill", func(t *testing.T, r upRun) { require.Equal(t, "/tmp/spill", r.stack.SpillDir) }},
		{"CATALOG_STUCK_AFTER", "2m", func(t *testing.T, r upRun) { require.Equal(t, 2*time.Minute, r.stack.StallAfter) }},
		{"CATALOG_STUCK_MAX_REDRIVES", "5", func(t *testing.T, r upRun) { require.Equal(t, 5, r.stack.MaxRedrives) }},
		{"CATALOG_TOMBSTONE_AFTER", "48h", func(t *testing.T, r upRun) { require.Equal(t, 48*time.Hour, r.stack.TombstoneAfter) }},
		{"CATALOG_DIFF_ATTEMPTS", "4", func(t *testing.T, r upRun) { require.Equal(t, 4, r.stack.DiffAttempts) }},
		{"CATALOG_MAX_INFLATED_BYTES", "1073741824", func(t *testing.T, r upRun) { require.Equal(t, int64(1<<30), r.stack.MaxInflatedBytes) }},
		{"CATALOG_MAX_PRODUCTS", "1000", func(t *testing.T, r upRun) { require.Equal(t, int64(1000), r.stack.MaxProducts) }},
		{"CATALOG_APPLY_ATTEMPTS", "2", func(t *testing.T, r upRun) { require.Equal(t, 2, r.stack.ApplyAttempts) }},
		{"CATALOG_METRICS_NAMESPACE", "Catalog/dev", func(t *testing.T, r upRun) { require.Equal(t, "Catalog/dev", r.stack.MetricsNamespace) }},
		{"CATALOG_ADMIN_TOKEN", "admin-from-env", func(t *testing.T, r upRun) { require.Equal(t, "admin-from-env", r.stack.AdminToken) }},
		{"CATALOG_LOG_LEVEL", "debug", func(t *testing.T, r upRun) {
			require.True(t, r.stack.Logger.Enabled(context.Background(), slog.LevelDebug))
		}},
	}
	var tested, listed []string
	for _, tc := range table {
		tested = append(tested, tc.name)
	}
	for _, v := range localVariables {
		listed = append(listed, v.name)
	}
	require.ElementsMatch(t, listed, tested, "every local variable has its case")
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			run := options(t, map[string]string{tc.name: tc.value})
			tc.check(t, run)
			require.Equal(t, map[string]bool{tc.name: true}, run.env.taken)
		})
	}

	// Unset: the stack's defaults.
	defaults := options(t, nil)
	require.Empty(t, defaults.env.taken)
	require.Zero(t, defaults.stack.BackoffBase, "unset: the stack's default (30 s)")
	require.Zero(t, defaults.stack.MaxUploadBytes, "unset: the stack's default (1 GiB), not AWS's 12 GiB")
	require.Equal(t, 10*time.Minute, defaults.stack.StallAfter)
	require.False(t, defaults.stack.Logger.Enabled(context.Background(), slog.LevelInfo), "warnings only by default")
	require.Nil(t, defaults.stack.Metrics)

	// AWS-only variables: not taken, even with values that FromEnv refuses.
	aws := map[string]string{}
	for _, name := range awsOnlyVariables {
		aws[name] = "x"
	}
	aws["CATALOG_SHARD_READERS"] = "a,b,c,d,e" // not one per shard: FromEnv's error, were it read
	aws["CATALOG_DB_IAM_AUTH"] = "maybe"
	run := options(t, aws)
	require.Empty(t, run.env.taken)
	require.Equal(t, defaults.stack.WebhookAWSRules, run.stack.WebhookAWSRules)

	// A flag given explicitly wins; a flag left out does not.
	run = options(t, map[string]string{"CATALOG_STUCK_AFTER": "2m", "CATALOG_LOG_LEVEL": "error"}, "--stuck-after", "30m", "-v")
	require.Equal(t, 30*time.Minute, run.stack.StallAfter)
	require.True(t, run.stack.Logger.Enabled(context.Background(), slog.LevelInfo))
	require.NotNil(t, run.stack.Metrics)
	run = options(t, map[string]string{"CATALOG_LOG_LEVEL": "error"})
	require.False(t, run.stack.Logger.Enabled(context.Background(), slog.LevelWarn))
	run = options(t, map[string]string{"CATALOG_TOMBSTONE_AFTER": "48h"}, "--tombstone-after", "1h", "--gc-every", "10m")
	require.Equal(t, time.Hour, run.stack.TombstoneAfter)
	require.Equal(t, 10*time.Minute, run.stack.GCEvery)
	require.Zero(t, defaults.stack.GCEvery, "collection is off unless --gc-every is given")
	require.Zero(t, defaults.stack.TombstoneAfter, "unset: the ops function's default, the chunk objects' retention")

	// Bad values: an error naming the variable, before anything starts.
	for name, bad := range map[string]string{
		"CATALOG_BACKOFF_BASE": "500ms", "CATALOG_UPLOAD_TTL": "soon", "CATALOG_RESERVATIONS_PER_HOUR": "-1",
		"CATALOG_MAX_UPLOAD_BYTES": "1GB", "CATALOG_STUCK_AFTER": "0s", "CATALOG_LOG_LEVEL": "loud",
		"CATALOG_WEBHOOK_KEYS": "short", "CATALOG_SORT_MEMORY_MB": "x", "CATALOG_TOMBSTONE_AFTER": "-1h",
	} {
		_, err := upOptions([]string{"--data-dir", t.TempDir()}, mapEnv(map[string]string{name: bad}))
		require.ErrorContains(t, err, name, "%s=%s", name, bad)
	}
	_, err := upOptions(nil, mapEnv(map[string]string{"CATALOG_WEBHOOK_KEYS": "secret:arn:aws:secretsmanager:us-east-1:1:secret:k"}))
	require.ErrorContains(t, err, "Secrets Manager")
}

// TestEveryFunctionVariableClassified: every variable config.FromEnv reads
// is either taken by up and demo (localVariables) or named as AWS-only
// (awsOnlyVariables), so that a new one cannot be silently ignored
// locally.
func TestEveryFunctionVariableClassified(t *testing.T) {
	t.Parallel()
	known := map[string]bool{}
	for _, v := range localVariables {
		known[v.name] = true
	}
	for _, name := range awsOnlyVariables {
		require.False(t, known[name], "%s is both local and AWS-only", name)
		known[name] = true
	}
	asked := map[string]bool{}
	_, err := config.FromEnv(func(name string) string {
		asked[name] = true
		switch name {
		case "CATALOG_CONTROL_DB", "CATALOG_SHARD_DBS":
			return "postgres://x/y"
		}
		return ""
	})
	require.NoError(t, err)
	for name := range asked {
		require.True(t, known[name], "config.FromEnv reads %s: add it to localVariables or awsOnlyVariables", name)
	}
	for name := range known {
		require.True(t, asked[name], "%s is listed but config.FromEnv does not read it", name)
	}
}

// The test command says, at the end, which packages were the slowest.
func TestSlowestPackagesReported(t *testing.T) {
	t.Parallel()
	p := &packageTimes{}
	for _, chunk := range []string{"ok  \tgithub.com/x/fast\t0.012s\nok  \tgithub.com/x/sl", "ow\t12.500s\n",
		"--- FAIL: TestY (1.00s)\nFAIL\tgithub.com/x/broken\t3.200s\nok  \tgithub.com/x/cached\t(cached)\n"} {
		_, err := p.Write([]byte(chunk))
		require.NoError(t, err)
	}
	var out bytes.Buffer
	p.report(&out, 20*time.Second)
	require.Equal(t, "test: 3 packages in 20s; the slowest:\n"+
		"test:      12.5s  github.com/x/slow\n"+
		"test:       3.2s  github.com/x/broken\n"+
		"test:         0s  github.com/x/fast\n", out.String())
}
