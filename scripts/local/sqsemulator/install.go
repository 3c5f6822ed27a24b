package sqsemulator

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/retailcatalog/catalog/scripts/local/filelock"
)

// FauxqsVersion is the npm version of fauxqs that is installed and run. 2.x
// needs Node 22; 1.9.2 runs on Node 20.
const FauxqsVersion = "1.9.2"

// launcherName is the small ES module written next to node_modules that
// starts fauxqs on 127.0.0.1 (the fauxqs CLI listens on 0.0.0.0).
const launcherName = "fauxqs-loopback.mjs"

// launcherSource starts fauxqs' HTTP app on 127.0.0.1 and the port given as
// the first argument (0 = any free port), then prints one line
// "fauxqs-loopback listening <host:port>" on stdout. The second argument
// "true" turns on fauxqs' request log (JSON lines on stdout).
const launcherSource = `// Written by the Go package scripts/local/sqsemulator; do not edit.
import { buildApp } from "fauxqs";

const port = Number.parseInt(process.argv[2] ?? "0", 10);
const logger = process.argv[3] === "true";
const app = buildApp({ logger });
await app.listen({ port, host: "127.0.0.1" });
const addr = app.server.address();
process.stdout.write("fauxqs-loopback listening 127.0.0.1:" + addr.port + "\n");
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => { app.close().finally(() => process.exit(0)); });
}
`

// InstallDir returns where EnsureInstalled puts fauxqs:
// os.UserCacheDir()/catalog-local/fauxqs-<FauxqsVersion>. It is outside the
// Go module on purpose: a node_modules folder inside the module breaks
// `go test ./...`.
func InstallDir() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("sqsemulator: user cache dir: %w", err)
	}
	return filepath.Join(cache, "catalog-local", "fauxqs-"+FauxqsVersion), nil
}

// EnsureInstalled installs fauxqs@FauxqsVersion with npm into InstallDir
// unless it is already there, and returns that directory. It needs node (20
// or newer) and npm on PATH. Concurrent callers are serialised with a file
// lock. npm output goes to progress, which may be nil.
func EnsureInstalled(ctx context.Context, progress io.Writer) (dir string, err error) {
	if progress == nil {
		progress = io.Discard
	}
	dir, err = InstallDir()
	if err != nil {
		return "", err
	}
	if installed(dir) {
		return dir, writeLauncher(dir)
	}
	if err := checkNode(ctx); err != nil {
		return "", err
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("sqsemulator: npm is needed to install fauxqs: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", fmt.Errorf("sqsemulator: create %s: %w", filepath.Dir(dir), err)
	}
	unlock, err := filelock.Acquire(ctx, dir+".lock", progress, "installing fauxqs")
	if err != nil {
		return "", err
	}
	defer unlock()
	if installed(dir) { // installed by another process while we waited
		return dir, writeLauncher(dir)
	}

	// Install into a temporary sibling and rename it into place, so that an
	// interrupted install never looks complete.
	tmp := dir + ".installing"
	if err := os.RemoveAll(tmp); err != nil {
		return "", fmt.Errorf("sqsemulator: remove leftover %s: %w", tmp, err)
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return "", fmt.Errorf("sqsemulator: create %s: %w", tmp, err)
	}
	fmt.Fprintf(progress, "sqsemulator: installing fauxqs@%s into %s (npm install)\n", FauxqsVersion, dir)
	cmd := exec.CommandContext(ctx, npm, "install", "--prefix", tmp, "--no-audit", "--no-fund",
		"--loglevel=error", "fauxqs@"+FauxqsVersion)
	cmd.Stdout = progress
	cmd.Stderr = progress
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("sqsemulator: npm install fauxqs@%s: %w", FauxqsVersion, err)
	}
	if !installed(tmp) {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("sqsemulator: npm install finished but fauxqs@%s is not in %s", FauxqsVersion, tmp)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("sqsemulator: remove broken %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("sqsemulator: move install into %s: %w", dir, err)
	}
	fmt.Fprintf(progress, "sqsemulator: fauxqs@%s installed\n", FauxqsVersion)
	return dir, writeLauncher(dir)
}

func installed(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", "fauxqs", "package.json"))
	if err != nil {
		return false
	}
	var pkg struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(b, &pkg) == nil && pkg.Version == FauxqsVersion
}

func writeLauncher(dir string) error {
	path := filepath.Join(dir, launcherName)
	if b, err := os.ReadFile(path); err == nil && string(b) == launcherSource {
		return nil
	}
	tmp := path + ".tmp" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(tmp, []byte(launcherSource), 0o644); err != nil {
		return fmt.Errorf("sqsemulator: write launcher: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("sqsemulator: write launcher: %w", err)
	}
	return nil
}

// checkNode fails unless node 20 or newer is on PATH.
func checkNode(ctx context.Context) error {
	node, err := exec.LookPath("node")
	if err != nil {
		return fmt.Errorf("sqsemulator: node (20 or newer) is needed to run fauxqs: %w", err)
	}
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return fmt.Errorf("sqsemulator: node --version: %w", err)
	}
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	major, _ := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if major < 20 {
		return fmt.Errorf("sqsemulator: fauxqs@%s needs node 20 or newer, found %s", FauxqsVersion, strings.TrimSpace(string(out)))
	}
	return nil
}
