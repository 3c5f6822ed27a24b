package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
)

func init() {
	register(&Command{
		Name: "why", Args: "R [P]", Token: AdminToken,
		Summary: "explain why a retailer's catalog (or product P) does not show what they expect",
		Help: `Asks GET /v1/admin/retailers/R/why[?product_id=P]: the checks an on-call
engineer makes for "I uploaded six hours ago and my products still show the
old price", in that order (the retailer; its newest reserved generation; did
its file arrive; its state and age; its chunks applied, in flight and in a
dead-letter queue; with P, the product's row against the newest applied
snapshot; the read replicas), each with what it found, and a verdict: the
first check that explains the complaint (current when none does).

Verdicts: current, no_uploads, awaiting_upload, expired, rejected, held,
in_progress, stuck, superseded, not_in_snapshot, replica_lag; docs/RUNBOOK.md
says what to do about each. --json prints the API's object instead.`,
		Flags: func(fs *flag.FlagSet) Runner {
			asJSON := fs.Bool("json", false, "print the API's JSON object")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) < 1 || len(args) > 2 {
					return c.Usagef("want a retailer id and optionally a product id, got %d arguments", len(args))
				}
				path := fmt.Sprintf("/v1/admin/retailers/%s/why", url.PathEscape(args[0]))
				if len(args) == 2 {
					path += "?product_id=" + url.QueryEscape(args[1])
				}
				var raw json.RawMessage
				if err := c.API.Do(ctx, http.MethodGet, path, c.Token, nil, &raw); err != nil {
					return fmt.Errorf("why %s: %w", strings.Join(args, " "), err)
				}
				if *asJSON {
					return printJSON(c, raw)
				}
				var why struct {
					Verdict string `json:"verdict"`
					Steps   []struct {
						Check  string `json:"check"`
						OK     bool   `json:"ok"`
						Detail string `json:"detail"`
					} `json:"steps"`
				}
				if err := json.Unmarshal(raw, &why); err != nil {
					return fmt.Errorf("why %s: %w", strings.Join(args, " "), err)
				}
				fmt.Fprintf(c.Stdout, "verdict: %s\n\n", why.Verdict)
				tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
				for _, s := range why.Steps {
					mark := "ok"
					if !s.OK {
						mark = "!!"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", mark, s.Check, s.Detail)
				}
				return tw.Flush()
			}
		},
	})
}
