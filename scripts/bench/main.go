// Command bench measures the system against reference tools in the same run
// and prints a table: figure, ours, the reference's, the ratio.
//
//	go run ./scripts/bench read   storefront reads vs raw primary-key SELECTs
//	go run ./scripts/bench diff   diff of two 1M-row snapshots vs `comm -3`
//	go run ./scripts/bench apply  chunked fenced apply vs COPY
//	go run ./scripts/bench e2e    PUT to applied on the local stack
//	go run ./scripts/bench reconcile  reconciliation of a catalog vs a SELECT of its hashes
//	go run ./scripts/bench events  change events: relay, Parquet and webhook lag, apply with the relay on vs off
//	go run ./scripts/bench retention  a year of daily uploads: the shard's rows and bytes against the live catalog's, collection on and off
//	go run ./scripts/bench move   a move of a retailer between shards vs COPY, and the storefront's p99 during it
//	go run ./scripts/bench all    the README's table: diff, apply, e2e and read, one after another
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// benches maps each subcommand to its run function; each file of this
// package registers its own in an init function.
var benches = map[string]func(ctx context.Context, args []string) error{}

// children maps the hidden subcommands, the processes a bench starts of
// this binary (a diff, a load generator, a reference), to their run
// functions; they are not benches of their own.
var children = map[string]func(ctx context.Context, args []string) error{}

const usage = `usage: go run ./scripts/bench <read|diff|apply|e2e|reconcile|events|retention|move|all> [flags]
       go run ./scripts/bench <bench> -h    that bench's flags

  read   storefront reads vs raw primary-key SELECTs
  diff   diff of two 1M-row snapshots vs comm -3
  apply  chunked fenced apply vs COPY
  e2e    PUT to applied on the local stack
  reconcile  reconciliation of a 1M-product catalog vs a SELECT of its stored hashes
  events  change events on the local stack: relay events/s vs bare PublishBatch,
          commit to Parquet file and to webhook (p50/p99), apply rows/s with the relay on vs off
  retention  a year (-days) of daily uploads of a -products catalog, 1% deletes and 1% inserts a day:
          the shard's rows and bytes against the live catalog's, collection daily and off
  move   a move of a 1M-product retailer between two shard databases vs COPY between them,
         and the storefront's p99 for that retailer during the move vs before
  all    the README's table: diff, apply, e2e and read one after another, each in a process
         of its own, with when each ran and at what load (~6 minutes idle)`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// run runs one bench and returns the exit code.
func run(ctx context.Context, args []string) int {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Println(usage)
		return 0
	}
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	command := benches[args[0]]
	if command == nil {
		command = children[args[0]]
	}
	if command == nil {
		fmt.Fprintln(os.Stderr, usage)
		return 2
	}
	err := command(ctx, args[1:])
	switch {
	case errors.Is(err, flag.ErrHelp): // the bench's flag set printed its usage
		return 0
	case err != nil:
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	return 0
}
