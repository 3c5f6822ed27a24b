// Command bench measures the system against reference tools in the same run
// and prints a table: figure, ours, the reference's, the ratio.
//
//	go run ./scripts/bench read   storefront reads vs raw primary-key SELECTs
//	go run ./scripts/bench diff   diff of two 1M-row snapshots vs `comm -3`
//	go run ./scripts/bench apply  chunked fenced apply vs COPY
//	go run ./scripts/bench e2e    PUT to applied on the local stack
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// benches maps each subcommand to its run function; each file of this
// package registers its own in an init function.
var benches = map[string]func(ctx context.Context, args []string) error{}

func main() {
	if len(os.Args) < 2 || benches[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: go run ./scripts/bench <read|diff|apply|e2e> [flags]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := benches[os.Args[1]](ctx, os.Args[2:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
