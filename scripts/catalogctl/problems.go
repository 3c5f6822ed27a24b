package main

import (
	"context"
	"flag"
	"fmt"
)

func init() {
	register(&Command{
		Name: "problems", Args: "R G", Token: RetailerToken,
		Summary: "print every problem of an upload (JSON Lines)",
		Help: `Streams every problem of retailer R's generation G to stdout as the API sends it
(GET .../snapshots/G/problems): one {"code","line","message"} a line in line
order, up to 100,000, then {"truncated":true} when the file had more; nothing
for a file read without a problem. A list over 5 MB the API answers with a 303
to a presigned URL valid 15 minutes, which catalogctl follows (without the
token). 409 problems_unavailable before the upload was read and once the
problems are past their retention (upload_retention_days).`,
		Flags: func(fs *flag.FlagSet) Runner {
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 2 {
					return c.Usagef("want a retailer id and a generation, got %d arguments", len(args))
				}
				gen, err := parseGenerationArg(c, args[1])
				if err != nil {
					return err
				}
				if err := c.API.Problems(ctx, c.Token, args[0], gen, c.Stdout); err != nil {
					return fmt.Errorf("problems of %s generation %d: %w", args[0], gen, err)
				}
				return nil
			}
		},
	})
}
