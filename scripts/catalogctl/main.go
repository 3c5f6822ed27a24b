// Command catalogctl is the one command line for every user of the catalog:
// retailers, operators and finance. It is a client of the HTTP API
// (docs/openapi.yaml) and nothing else: it works the same against the local
// stack (`go run ./scripts/local up`) and against AWS.
//
//	go run ./scripts/catalogctl [--api URL] [--token T] <command> [flags] [args]
//	go run ./scripts/catalogctl -h            every command, one line each
//	go run ./scripts/catalogctl <command> -h  one command's usage
//
// The API address is --api, else $CATALOG_API, else http://127.0.0.1:8080
// (where `scripts/local up` serves). Retailer commands send --token, else
// $CATALOG_TOKEN, else $CATALOG_ADMIN_TOKEN (the admin may act for any
// retailer); admin commands send --token, else $CATALOG_ADMIN_TOKEN.
//
// Exit codes: 0 success; 1 any failure (bad usage, an unreachable API, an
// API error, a timeout); commands that wait for an upload add 2 rejected and
// 3 held (see upload -h).
//
// # Adding a command
//
// One file per command, so that commands are added without touching the same
// lines: create scripts/catalogctl/<name>.go with an init function that
// registers a Command,
//
//	func init() {
//		register(&Command{
//			Name: "confirm", Args: "R G", Token: RetailerToken,
//			Summary: "apply a held upload",
//			Help:    "Longer text shown by `catalogctl confirm -h`.",
//			Flags: func(fs *flag.FlagSet) Runner {
//				wait := fs.Bool("wait", false, "wait until it is applied")
//				return func(ctx context.Context, c *Call, args []string) error {
//					if len(args) != 2 { return c.Usagef("want R G") }
//					... c.API (an apiclient.Client), c.Token, c.Stdout, c.Stderr ...
//				}
//			},
//		})
//	}
//
// Flags declares the command's own flags and returns the function that runs
// it with the positional arguments (flags and arguments may be mixed;
// --api and --token are accepted after the command too). The tool handles
// -h, checks for the token the command's Token kind needs before Run is
// called, and turns errors into messages and exit codes: return c.Usagef for
// bad usage, Exit(code, err) for a code of your own, and plain errors
// otherwise (an API that cannot be reached, or answers 401/403, is explained
// to the user). Add a test of the command's behaviour beside it;
// TestEveryCommandHasHelp covers -h for every registered command.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], osEnv())
	stop()
	os.Exit(code)
}
