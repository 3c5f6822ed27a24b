package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/pgserver"
	"github.com/retailcatalog/catalog/scripts/local/sqsemulator"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// test starts one PostgreSQL server and one SQS emulator, then runs
// `go test ./...` (with the given flags) against them, then short fuzzing of
// the snapshot parsers.
func test(ctx context.Context, args []string) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
		fmt.Println(`usage: go run ./scripts/local test [go test flags and packages]

Starts one PostgreSQL server and one SQS emulator (installed on first use),
runs go test against them (default: -count=1 -parallel 4 -timeout 15m ./...), then fuzzes each
snapshot parser for $CATALOG_FUZZTIME inputs (default 40000x). With
arguments, they go to go test as given and nothing is fuzzed.`)
		return flag.ErrHelp
	}
	fmt.Fprintln(os.Stderr, "test: preparing PostgreSQL and the SQS emulator (installed on first use)")
	if _, err := pgserver.EnsureInstalled(ctx, os.Stderr); err != nil {
		return err
	}
	if _, err := sqsemulator.EnsureInstalled(ctx, os.Stderr); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "catalog-test-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	pg, err := pgserver.Start(ctx, pgserver.Options{DataDir: filepath.Join(dir, "pg"), Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer pg.Stop()
	emu, err := sqsemulator.Start(ctx, sqsemulator.Options{})
	if err != nil {
		return err
	}
	defer emu.Stop()
	env := append(os.Environ(),
		testenv.PostgresURLVar+"="+pg.URL("postgres"),
		testenv.SQSEndpointVar+"="+emu.Endpoint())

	timings := &packageTimes{}
	run := func(args ...string) error {
		fmt.Fprintln(os.Stderr, "test: go", args)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, io.MultiWriter(os.Stdout, timings), os.Stderr
		if err := cmd.Run(); err != nil {
			if ee, ok := err.(*exec.ExitError); ok {
				return exitError(ee.ExitCode())
			}
			return err
		}
		return nil
	}
	testArgs := append([]string{"test"}, args...)
	if len(args) == 0 {
		// -parallel 4: the whole-stack tests spend most of their time
		// waiting on their stacks (timers, pollers, PostgreSQL), so twice
		// as many at once as cores keeps the 2 cores busy (systemtest
		// alone: 2m40s instead of about 4 min). -timeout 15m: a package
		// stopped by go test's default 10 min says less than its own
		// failing assertion would (the whole-stack tests bound each wait).
		testArgs = append(testArgs, "-count=1", "-parallel", "4", "-timeout", "15m", "./...")
	}
	started := time.Now()
	err = run(testArgs...)
	timings.report(os.Stderr, time.Since(started))
	if err != nil {
		return err
	}
	if len(args) == 0 {
		// A count, not a duration: with a duration, Go 1.26's fuzzing
		// coordinator can report its own deadline as a failure
		// ("context deadline exceeded", no crasher; golang/go#75804,
		// fixed in Go 1.27). 40,000 inputs take 5-15 s a target here.
		fuzzTime := os.Getenv("CATALOG_FUZZTIME")
		if fuzzTime == "" {
			fuzzTime = "40000x"
		}
		for _, target := range []string{"FuzzCSV", "FuzzJSONL"} {
			if err := run("test", "-run", "^$", "-fuzz", "^"+target+"$", "-fuzztime", fuzzTime, "./functions/core/snapshot/"); err != nil {
				return err
			}
		}
	}
	return nil
}

// packageTimes reads go test's output as it goes by and keeps the time of
// each package ("ok  <package>  12.3s", or FAIL), to say at the end which
// were the slowest.
type packageTimes struct {
	mu      sync.Mutex
	partial []byte
	times   map[string]time.Duration
}

// resultLine is go test's line for a package's result.
var resultLine = regexp.MustCompile(`^(?:ok|FAIL)\s+(\S+)\s+([0-9.]+)s`)

func (p *packageTimes) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		if m := resultLine.FindSubmatch(p.partial[:i]); m != nil {
			if secs, err := strconv.ParseFloat(string(m[2]), 64); err == nil {
				if p.times == nil {
					p.times = map[string]time.Duration{}
				}
				p.times[string(m[1])] = time.Duration(secs * float64(time.Second))
			}
		}
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

// report prints the slowest packages and the wall time of the run.
func (p *packageTimes) report(w io.Writer, wall time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	names := make([]string, 0, len(p.times))
	for name := range p.times {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return p.times[names[i]] > p.times[names[j]] })
	fmt.Fprintf(w, "test: %d packages in %s; the slowest:\n", len(names), wall.Round(time.Second))
	for _, name := range names[:min(len(names), 8)] {
		fmt.Fprintf(w, "test:   %8s  %s\n", p.times[name].Round(100*time.Millisecond), name)
	}
}
