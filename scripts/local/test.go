package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

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
runs go test against them (default: -count=1 ./...), then fuzzes each
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

	run := func(args ...string) error {
		fmt.Fprintln(os.Stderr, "test: go", args)
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, os.Stdout, os.Stderr
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
		testArgs = append(testArgs, "-count=1", "./...")
	}
	if err := run(testArgs...); err != nil {
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
			if err := run("test", "-run", "^$", "-fuzz", "^"+target+"$", "-fuzztime", fuzzTime, "./functions/snapshot/"); err != nil {
				return err
			}
		}
	}
	return nil
}
