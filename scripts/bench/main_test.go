package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// TestMain lets the test binary play the bench's child processes: the diff
// and read benches re-run their own executable (os.Executable) with a hidden
// command, which under `go test` is this binary. Without this, each child
// ran the tests again and started children of its own (a fork bomb).
// Otherwise it runs the tests and stops the test servers they started.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		_, bench := benches[os.Args[1]]
		_, child := children[os.Args[1]]
		if bench || child {
			os.Exit(run(context.Background(), os.Args[1:]))
		}
	}
	testenv.Main(m)
}

// TestHelpExitsZero: -h on the tool and on every bench prints usage and
// exits 0 (not "flag: help requested", exit 1), and runs nothing.
func TestHelpExitsZero(t *testing.T) {
	t.Parallel()
	if code := run(context.Background(), []string{"-h"}); code != 0 {
		t.Fatalf("bench -h: exit %d", code)
	}
	for _, commands := range []map[string]func(context.Context, []string) error{benches, children} {
		for name := range commands {
			if code := run(context.Background(), []string{name, "-h"}); code != 0 {
				t.Errorf("bench %s -h: exit %d", name, code)
			}
		}
	}
	if code := run(context.Background(), []string{"no-such-bench"}); code != 2 {
		t.Errorf("an unknown bench: exit %d, want 2", code)
	}
}

// TestBenchSmoke runs every bench command on a tiny input, so that CI
// notices a bench that no longer runs; the figures themselves are measured
// by hand, outside CI (docs/PERFORMANCE.md). Each starts its own
// PostgreSQL server (and, for e2e and read, the local stack).
func TestBenchSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	t.Parallel()
	for _, args := range [][]string{
		{"diff", "-rows", "3000", "-runs", "1"},
		{"apply", "-rows", "3000", "-changes", "1"},
		{"e2e", "-rows", "3000", "-comm-runs", "1"},
		{"read", "-products", "400", "-retailers", "2", "-duration", "1s", "-conns", "2"},
		{"read", "-products", "400", "-retailers", "2", "-lambda", "-lambda-environments", "1", "-lambda-requests", "3"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			if code := run(context.Background(), args); code != 0 {
				t.Errorf("bench %v: exit %d", args, code)
			}
		})
	}
}
