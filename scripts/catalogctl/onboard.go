package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
)

func init() {
	register(&Command{
		Name: "onboard", Args: "R", Token: AdminToken,
		Summary: "onboard a retailer and print its token (shown once)",
		Help: `Creates retailer R (POST /v1/admin/retailers) and prints the API's answer,
{"retailer_id", "token", "shard"}, on stdout. The token is shown this once
and stored only as a hash: keep it (export CATALOG_TOKEN=...).`,
		Flags: func(fs *flag.FlagSet) Runner {
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 1 {
					return c.Usagef("want one retailer id, got %d arguments", len(args))
				}
				var raw json.RawMessage
				err := c.API.Do(ctx, http.MethodPost, "/v1/admin/retailers", c.Token, map[string]string{"retailer_id": args[0]}, &raw)
				if err != nil {
					return fmt.Errorf("onboard %s: %w", args[0], err)
				}
				return printJSON(c, raw)
			}
		},
	})
}
