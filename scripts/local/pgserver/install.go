package pgserver

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/retailcatalog/catalog/scripts/local/filelock"
)

// DefaultBinDir is where Debian's postgresql-15 package puts the server binaries.
const DefaultBinDir = "/usr/lib/postgresql/15/bin"

// installLockPath serialises concurrent installs (two test binaries may race).
var installLockPath = filepath.Join(os.TempDir(), "catalog-local-postgresql-15-install.lock")

// EnsureInstalled returns the PostgreSQL 15 bin dir, installing Debian's
// postgresql-15 package with apt-get when the server binary is missing.
// Installing needs root; as another user a missing server is a clear error.
// Concurrent callers (several test processes) are serialised with a file lock,
// and the second one finds the server already installed. apt output goes to
// progress, which may be nil.
func EnsureInstalled(ctx context.Context, progress io.Writer) (binDir string, err error) {
	if progress == nil {
		progress = io.Discard
	}
	if serverPresent(DefaultBinDir) {
		return DefaultBinDir, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("pgserver: PostgreSQL 15 server not found at %s and not running as root to install it; run `sudo apt-get install -y postgresql-15`", DefaultBinDir)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("pgserver: PostgreSQL 15 server not found at %s and apt-get is not available: %w", DefaultBinDir, err)
	}

	unlock, err := filelock.Acquire(ctx, installLockPath, progress, "installing PostgreSQL")
	if err != nil {
		return "", err
	}
	defer unlock()

	// Another process may have installed it while we waited for the lock.
	if serverPresent(DefaultBinDir) {
		return DefaultBinDir, nil
	}

	fmt.Fprintln(progress, "pgserver: PostgreSQL 15 server missing; installing Debian package postgresql-15 (apt-get update && apt-get install -y postgresql-15)")
	if err := runApt(ctx, progress, "update"); err != nil {
		return "", err
	}
	if err := runApt(ctx, progress, "install", "-y", "--no-install-recommends", "postgresql-15"); err != nil {
		return "", err
	}
	if !serverPresent(DefaultBinDir) {
		return "", fmt.Errorf("pgserver: apt-get installed postgresql-15 but %s is still missing", filepath.Join(DefaultBinDir, "postgres"))
	}
	fmt.Fprintln(progress, "pgserver: postgresql-15 installed")
	return DefaultBinDir, nil
}

func serverPresent(binDir string) bool {
	for _, name := range []string{"postgres", "initdb", "pg_basebackup"} {
		fi, err := os.Stat(filepath.Join(binDir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func runApt(ctx context.Context, progress io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	cmd.Stdout = progress
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgserver: apt-get %v: %w", args, err)
	}
	return nil
}
