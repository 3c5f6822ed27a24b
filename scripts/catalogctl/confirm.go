package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

func init() {
	register(&Command{
		Name: "confirm", Args: "R G", Token: RetailerToken,
		Summary: "apply a held upload (an empty snapshot, a mass delete or update)",
		Help: `Confirms held generation G of retailer R (POST .../snapshots/G/confirm):
it is applied if it is still the retailer's newest upload (409 otherwise).
Then follows it until it is applied and prints its final status JSON, with
upload's exit codes (0 applied, 1 otherwise); --no-wait prints the status
right after the confirmation.`,
		Flags: func(fs *flag.FlagSet) Runner {
			noWait := fs.Bool("no-wait", false, "do not wait for the apply")
			timeout := fs.Duration("timeout", time.Hour, "how long to wait for the apply")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 2 {
					return c.Usagef("want a retailer id and a generation, got %d arguments", len(args))
				}
				gen, err := parseGenerationArg(c, args[1])
				if err != nil {
					return err
				}
				if _, err := c.API.Confirm(ctx, c.Token, args[0], gen); err != nil {
					return fmt.Errorf("confirm generation %d of %s: %w", gen, args[0], err)
				}
				fmt.Fprintf(c.Stderr, "%s/%d: confirmed\n", args[0], gen)
				if *noWait {
					raw, _, err := getStatus(ctx, c, args[0], gen)
					if err != nil {
						return err
					}
					return printJSON(c, raw)
				}
				// Right after the confirmation it may still read held.
				w := waiter{retailer: args[0], gen: gen, timeout: *timeout,
					done: func(s apiclient.Status) bool { return settled(s.State) && s.State != "held" }}
				raw, st, err := w.wait(ctx, c)
				if err != nil {
					return err
				}
				return finalStatus(c, raw, st)
			}
		},
	})
}
