package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
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
