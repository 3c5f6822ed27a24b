package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

func init() { benches["all"] = benchAll }

// fullRun is the README's table: the benches it is made of, in the order
// they run.
var fullRun = []string{"diff", "apply", "e2e", "read"}

// benchAll runs the benches of the README's table one after another, each
// in a process of its own (no heap or GC state carried from one to the
// next), their tables on stdout as they come, and says when each ran and
// at what load: one full run, as issue 25 asks the table to be.
func benchAll(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	only := fs.String("benches", strings.Join(fullRun, ","), "the benches to run, in order, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	names := strings.Split(*only, ",")
	for _, name := range names {
		if benches[name] == nil || name == "all" {
			return fmt.Errorf("all: no bench %q", name)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	fmt.Printf("full run: %s, one after another, each in a process of its own\n", strings.Join(names, ", "))
	var failed []string
	for _, name := range names {
		start := time.Now().UTC()
		fmt.Fprintf(os.Stderr, "all: %s from %s (load average %s)\n", name, start.Format("15:04:05"), loadAverage())
		cmd := exec.CommandContext(ctx, exe, name)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		runErr := cmd.Run()
		end := time.Now().UTC()
		fmt.Printf("\n(%s: %s-%s UTC, load average at the end %s)\n", name, start.Format("15:04:05"), end.Format("15:04:05"), loadAverage())
		if runErr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(os.Stderr, "all: %s failed: %v\n", name, runErr)
			failed = append(failed, name)
		}
	}
	fmt.Printf("\nfull run: %s\n", machine())
	if len(failed) > 0 {
		return errors.New("all: failed: " + strings.Join(failed, ", "))
	}
	return nil
}
