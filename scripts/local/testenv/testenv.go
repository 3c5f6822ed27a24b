// Package testenv gives integration tests the shared services they need: a
// PostgreSQL server and the SQS emulator. `go run ./scripts/local test` starts
// one of each for the whole run and passes them in CATALOG_TEST_POSTGRES_URL
// and CATALOG_TEST_SQS_ENDPOINT; a plain `go test` of one package starts its
// own (installing them on first use).
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/retailcatalog/catalog/scripts/local/pgserver"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
)

// Environment variables that point tests at running services.
const (
	PostgresURLVar = "CATALOG_TEST_POSTGRES_URL"
	SQSEndpointVar = "CATALOG_TEST_SQS_ENDPOINT"
)

var (
	mu       sync.Mutex
	pgURL    string
	sqsURL   string
	stoppers []func() error
)

// Postgres returns the URL of a PostgreSQL server for tests.
func Postgres(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if pgURL != "" {
		return pgURL
	}
	if v := os.Getenv(PostgresURLVar); v != "" {
		pgURL = v
		return pgURL
	}
	ctx := context.Background()
	if _, err := pgserver.EnsureInstalled(ctx, os.Stderr); err != nil {
		t.Fatalf("install postgres: %v", err)
	}
	dir, err := os.MkdirTemp("", "catalog-test-pg-")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	stoppers = append(stoppers, srv.Stop, func() error { return os.RemoveAll(dir) })
	pgURL = srv.URL("postgres")
	return pgURL
}

var primaryURL, replicaURL string

// PostgresWithReplica returns the URLs of a PostgreSQL server and of a
// streaming hot-standby replica of it, for the read path's tests. The pair
// is the test process's own (started on first use, in a temporary
// directory, stopped by Main), not the shared server: the replica then
// replays only the writes of the tests that read from it, so its lag stays
// small and its base backup quick.
func PostgresWithReplica(t testing.TB) (primary, replica string) {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if replicaURL != "" {
		return primaryURL, replicaURL
	}
	ctx := context.Background()
	if _, err := pgserver.EnsureInstalled(ctx, os.Stderr); err != nil {
		t.Fatalf("install postgres: %v", err)
	}
	dir, err := os.MkdirTemp("", "catalog-test-pgrep-")
	if err != nil {
		t.Fatal(err)
	}
	stoppers = append(stoppers, func() error { return os.RemoveAll(dir) })
	srv, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "primary")})
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	stoppers = append(stoppers, srv.Stop)
	rep, err := srv.StartReplica(ctx, filepath.Join(dir, "replica"), 0)
	if err != nil {
		t.Fatalf("start replica: %v", err)
	}
	stoppers = append(stoppers, rep.Stop)
	primaryURL, replicaURL = srv.URL("postgres"), rep.URL("postgres")
	return primaryURL, replicaURL
}

// SQS returns the endpoint of an SQS emulator for tests.
func SQS(t testing.TB) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if sqsURL != "" {
		return sqsURL
	}
	if v := os.Getenv(SQSEndpointVar); v != "" {
		sqsURL = v
		return sqsURL
	}
	ctx := context.Background()
	if _, err := sqsemulator.EnsureInstalled(ctx, os.Stderr); err != nil {
		t.Fatalf("install sqs emulator: %v", err)
	}
	emu, err := sqsemulator.Start(ctx, sqsemulator.Options{})
	if err != nil {
		t.Fatalf("start sqs emulator: %v", err)
	}
	stoppers = append(stoppers, emu.Stop)
	sqsURL = emu.Endpoint()
	return sqsURL
}

// AtExit registers f to run when Main's tests are over, before the services
// the process started stop (the last registered runs first).
func AtExit(f func()) {
	mu.Lock()
	defer mu.Unlock()
	stoppers = append(stoppers, func() error { f(); return nil })
}

// Main runs a package's tests and then stops what they started: call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	mu.Lock()
	for i := len(stoppers) - 1; i >= 0; i-- {
		stoppers[i]()
	}
	mu.Unlock()
	os.Exit(code)
}

// Name returns a unique lowercase name with prefix, for databases and queues.
func Name(prefix string) string {
	b := make([]byte, 5)
	rand.Read(b)
	return fmt.Sprintf("%s%s_", prefix, hex.EncodeToString(b))
}
