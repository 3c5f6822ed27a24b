// Package browser renders pages in headless Chromium for tests: Debian's
// chromium package, installed with apt-get on first use (as PostgreSQL is by
// pgserver), run with no network at all, so a page that needs one shows it.
package browser

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/filelock"
)

// candidates are where Debian and other distributions put the browser.
var candidates = []string{"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"}

var installLockPath = filepath.Join(os.TempDir(), "catalog-local-chromium-install.lock")

// EnsureInstalled returns the path of a Chromium binary, installing Debian's
// chromium package (apt-get, as root, ~75 MB download) when none is there.
// Concurrent callers are serialised with a file lock. apt's output goes to
// progress, which may be nil.
func EnsureInstalled(ctx context.Context, progress io.Writer) (string, error) {
	if progress == nil {
		progress = io.Discard
	}
	if bin := find(); bin != "" {
		return bin, nil
	}
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("browser: Chromium not found (%v) and not running as root to install it; run `sudo apt-get install -y chromium`", candidates)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return "", fmt.Errorf("browser: Chromium not found and apt-get is not available: %w", err)
	}
	unlock, err := filelock.Acquire(ctx, installLockPath, progress, "installing Chromium")
	if err != nil {
		return "", err
	}
	defer unlock()
	if bin := find(); bin != "" {
		return bin, nil
	}
	fmt.Fprintln(progress, "browser: Chromium missing; installing Debian package chromium (apt-get update && apt-get install -y chromium)")
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "chromium"}} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		cmd.Stdout, cmd.Stderr = progress, progress
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("browser: apt-get %v: %w", args, err)
		}
	}
	if bin := find(); bin != "" {
		return bin, nil
	}
	return "", fmt.Errorf("browser: apt-get installed chromium but none of %v exists", candidates)
}

func find() string {
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return c
		}
	}
	return ""
}

// Screenshot renders the HTML file page in headless Chromium at width x
// height CSS pixels and returns the PNG. Every host name resolves to
// nothing and no proxy is reachable, so the page gets no network.
func Screenshot(ctx context.Context, bin, page string, width, height int) ([]byte, error) {
	abs, err := filepath.Abs(page)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "catalog-chromium-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
		"--force-color-profile=srgb", "--force-device-scale-factor=1",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
		"--user-data-dir="+filepath.Join(dir, "profile"),
		fmt.Sprintf("--window-size=%d,%d", width, height),
		"--screenshot="+out,
		"file://"+abs)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("browser: chromium: %w\n%s", err, logs.String())
	}
	png, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("browser: no screenshot written: %w\n%s", err, logs.String())
	}
	return png, nil
}
