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
		Name: "rollback", Args: "R G", Token: RetailerToken,
		Summary: "return a retailer's catalog to an applied generation",
		Help: `Rolls retailer R back to applied generation G (POST .../rollback): a new
generation whose content is G's catalog, through the diff, holds, chunks and
events like any upload. Prints the new generation's status JSON at once; with
--wait, follows it to the end and prints its final status with upload's exit
codes (0 applied, 1 otherwise). 404 generation_not_applied for a generation
never applied, 409 snapshot_expired when G's snapshot is no longer retained.`,
		Flags: func(fs *flag.FlagSet) Runner {
			wait := fs.Bool("wait", false, "follow the rollback until it ends")
			timeout := fs.Duration("timeout", time.Hour, "how long to wait with --wait")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 2 {
					return c.Usagef("want a retailer id and a generation, got %d arguments", len(args))
				}
				to, err := parseGenerationArg(c, args[1])
				if err != nil {
					return err
				}
				st, err := c.API.Rollback(ctx, c.Token, args[0], to)
				if err != nil {
					return fmt.Errorf("roll %s back to generation %d: %w", args[0], to, err)
				}
				fmt.Fprintf(c.Stderr, "%s/%d: rollback to generation %d reserved\n", args[0], st.Generation, to)
				if !*wait {
					raw, _, err := getStatus(ctx, c, args[0], st.Generation)
					if err != nil {
						return err
					}
					return printJSON(c, raw)
				}
				w := waiter{retailer: args[0], gen: st.Generation, timeout: *timeout,
					done: func(s apiclient.Status) bool { return settled(s.State) }}
				raw, final, err := w.wait(ctx, c)
				if err != nil {
					return err
				}
				return finalStatus(c, raw, final)
			}
		},
	})
}
