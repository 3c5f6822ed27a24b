package pgserver_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/pgserver"
)

// progress writes progress lines to the test log.
type progress struct{ t *testing.T }

func (p progress) Write(b []byte) (int, error) {
	p.t.Helper()
	p.t.Log(time.Now().Format("15:04:05.000"), string(bytes.TrimSpace(b)))
	return len(b), nil
}

func start(t *testing.T, ctx context.Context, dataDir string) *pgserver.Server {
	t.Helper()
	srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: dataDir, Progress: progress{t}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Stop() })
	return srv
}

func exec1(t *testing.T, ctx context.Context, url, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, args...)
	require.NoError(t, err)
}

func queryInt(t *testing.T, ctx context.Context, url, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&n))
	return n
}

func TestEnsureInstalled(t *testing.T) {
	t.Parallel()
	dir, err := pgserver.EnsureInstalled(context.Background(), progress{t})
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(dir, "postgres"))
}

func TestStartCreateDatabaseRestart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "pg")

	srv := start(t, ctx, dataDir)
	require.NotZero(t, srv.Port())
	require.Equal(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/shard_1?sslmode=disable", srv.Port()), srv.URL("shard_1"))

	// Idempotent, also when racing with itself.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = srv.CreateDatabase(ctx, "shard_1") }()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, srv.CreateDatabase(ctx, "shard_1"))
	require.NoError(t, srv.CreateDatabase(ctx, "Control-DB")) // needs quoting

	exec1(t, ctx, srv.URL("shard_1"), "CREATE TABLE t (id int primary key, s text)")
	exec1(t, ctx, srv.URL("shard_1"), "INSERT INTO t VALUES (1, 'ü')")

	// Settings the local stack relies on.
	require.Equal(t, 200, queryInt(t, ctx, srv.URL("postgres"), "SELECT current_setting('max_connections')::int"))
	require.Equal(t, 10, queryInt(t, ctx, srv.URL("postgres"), "SELECT current_setting('max_wal_senders')::int"))
	require.Equal(t, 1, queryInt(t, ctx, srv.URL("postgres"), "SELECT (current_setting('wal_level') = 'replica')::int"))
	require.Equal(t, 1, queryInt(t, ctx, srv.URL("postgres"), "SELECT (pg_encoding_to_char(encoding) = 'UTF8' AND datcollate = 'C')::int FROM pg_database WHERE datname = 'shard_1'"))

	require.NoError(t, srv.Stop())
	require.NoError(t, srv.Stop()) // idempotent

	// Same data dir, a new port: the data is still there.
	srv2 := start(t, ctx, dataDir)
	require.Equal(t, 1, queryInt(t, ctx, srv2.URL("shard_1"), "SELECT count(*) FROM t WHERE s = 'ü'"))
	require.NoError(t, srv2.CreateDatabase(ctx, "shard_1"))
}

func TestFixedPort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "pg")
	srv := start(t, ctx, dataDir)
	port := srv.Port()

	// A second server on the same port must fail clearly, not hang, and not
	// mistake the first server for itself.
	_, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(t.TempDir(), "pg2"), Port: port})
	require.Error(t, err)
	require.Contains(t, err.Error(), "port")
	require.NoError(t, srv.Stop())

	// Same when something else holds the port.
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	require.NoError(t, err)
	_, err = pgserver.Start(ctx, pgserver.Options{DataDir: dataDir, Port: port})
	require.Error(t, err)
	require.Contains(t, err.Error(), "port")
	require.NoError(t, l.Close())

	srv2, err := pgserver.Start(ctx, pgserver.Options{DataDir: dataDir, Port: port, Progress: progress{t}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv2.Stop() })
	require.Equal(t, port, srv2.Port())
}

// A run killed with SIGKILL leaves postmaster.pid behind; the next Start must
// cope, also when the PID has been reused by an unrelated process.
func TestStalePostmasterPID(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "pg")

	srv := start(t, ctx, dataDir)
	require.NoError(t, srv.CreateDatabase(ctx, "keep"))
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	var pid int
	_, err = fmt.Sscanf(string(b), "%d", &pid)
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	require.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil }, 10*time.Second, 20*time.Millisecond)
	require.FileExists(t, pidFile)
	_ = srv.Stop() // reports that it had exited; reaps the child

	// Reused PID: this test process is alive and is not a postgres.
	content := []byte(strconv.Itoa(os.Getpid()) + "\n" + dataDir + "\n")
	require.NoError(t, os.WriteFile(pidFile, content, 0o600))

	srv2 := start(t, ctx, dataDir)
	require.Equal(t, 1, queryInt(t, ctx, srv2.URL("postgres"), "SELECT count(*) FROM pg_database WHERE datname = 'keep'"))
}

func TestReplica(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	primary := start(t, ctx, filepath.Join(dir, "primary"))
	require.NoError(t, primary.CreateDatabase(ctx, "shard_1"))
	exec1(t, ctx, primary.URL("shard_1"), "CREATE TABLE t (id int primary key)")
	exec1(t, ctx, primary.URL("shard_1"), "INSERT INTO t VALUES (1)")

	replica, err := primary.StartReplica(ctx, filepath.Join(dir, "replica"), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica.Stop() })
	require.NotEqual(t, primary.Port(), replica.Port())
	require.Equal(t, 1, queryInt(t, ctx, replica.URL("shard_1"), "SELECT pg_is_in_recovery()::int"))
	require.Equal(t, 1, queryInt(t, ctx, replica.URL("shard_1"), "SELECT count(*) FROM t"))

	exec1(t, ctx, primary.URL("shard_1"), "INSERT INTO t VALUES (2)")
	require.Eventually(t, func() bool {
		return queryInt(t, ctx, replica.URL("shard_1"), "SELECT count(*) FROM t") == 2
	}, 20*time.Second, 50*time.Millisecond, "replica did not catch up")

	// Read-only.
	conn, err := pgx.Connect(ctx, replica.URL("shard_1"))
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "INSERT INTO t VALUES (3)")
	require.Error(t, err)
	conn.Close(ctx)

	// Restart both (primary on a new port); the replica follows.
	require.NoError(t, replica.Stop())
	require.NoError(t, primary.Stop())
	primary2 := start(t, ctx, filepath.Join(dir, "primary"))
	replica2, err := primary2.StartReplica(ctx, filepath.Join(dir, "replica"), 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = replica2.Stop() })
	exec1(t, ctx, primary2.URL("shard_1"), "INSERT INTO t VALUES (4)")
	require.Eventually(t, func() bool {
		return queryInt(t, ctx, replica2.URL("shard_1"), "SELECT count(*) FROM t") == 3
	}, 20*time.Second, 50*time.Millisecond, "restarted replica did not follow the restarted primary")
}

// Full-page writes are on unless the options turn them off (the benches,
// run as Aurora's storage is); the same data directory restarts either way.
func TestNoFullPageWrites(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := filepath.Join(t.TempDir(), "pg")
	show := func(srv *pgserver.Server) string {
		conn, err := pgx.Connect(ctx, srv.URL("postgres"))
		require.NoError(t, err)
		defer conn.Close(ctx)
		var v string
		require.NoError(t, conn.QueryRow(ctx, "SHOW full_page_writes").Scan(&v))
		return v
	}
	srv := start(t, ctx, dataDir)
	require.Equal(t, "on", show(srv))
	require.NoError(t, srv.Stop())

	srv2, err := pgserver.Start(ctx, pgserver.Options{DataDir: dataDir, NoFullPageWrites: true, Progress: progress{t}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv2.Stop() })
	require.Equal(t, "off", show(srv2))
}
