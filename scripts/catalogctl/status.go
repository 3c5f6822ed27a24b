package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

func init() {
	register(&Command{
		Name: "status", Args: "R [G]", Token: RetailerToken,
		Summary: "show an upload's status, or a retailer's uploads newest first",
		Help: `With a generation G: prints that upload's status JSON (the API's
GET /v1/retailers/R/snapshots/G) on stdout.

Without: lists the retailer's uploads, newest first, as a table (--json for
the API's {"items": [...], "next_before": ...}); --before G lists the ones
older than generation G (the next page: the command names it on stderr).

With G and --wait: follows the upload until it settles, as upload does, and
exits with upload's codes.`,
		Flags: func(fs *flag.FlagSet) Runner {
			limit := fs.Int("limit", 20, "list the newest `N` uploads (1-1000)")
			before := fs.Int64("before", 0, "list the uploads older than generation `G` (the next page)")
			asJSON := fs.Bool("json", false, "list as JSON instead of a table")
			wait := fs.Bool("wait", false, "with G: wait until the upload settles, then exit like upload (0 applied, 2 rejected, 3 held, 1 otherwise)")
			timeout := fs.Duration("timeout", time.Hour, "with --wait: how long to wait")
			return func(ctx context.Context, c *Call, args []string) error {
				switch len(args) {
				case 1:
					if *limit < 1 || *limit > 1000 {
						return c.Usagef("--limit must be from 1 to 1000, got %d", *limit)
					}
					if *before < 0 {
						return c.Usagef("--before must be a generation, a positive integer, got %d", *before)
					}
					return listUploads(ctx, c, args[0], *limit, *before, *asJSON)
				case 2:
					gen, err := parseGenerationArg(c, args[1])
					if err != nil {
						return err
					}
					if *wait {
						raw, st, err := waiter{retailer: args[0], gen: gen, timeout: *timeout}.wait(ctx, c)
						if err != nil {
							return err
						}
						return finalStatus(c, raw, st)
					}
					raw, _, err := getStatus(ctx, c, args[0], gen)
					if err != nil {
						return err
					}
					return printJSON(c, raw)
				default:
					return c.Usagef("want a retailer id and optionally a generation, got %d arguments", len(args))
				}
			}
		},
	})
}

func parseGenerationArg(c *Call, s string) (int64, error) {
	gen, err := strconv.ParseInt(s, 10, 64)
	if err != nil || gen <= 0 {
		return 0, c.Usagef("generation %q must be a positive integer", s)
	}
	return gen, nil
}

// getStatus reads an upload's status: the API's JSON as sent (printed as
// is, so fields added to the API show up) and decoded.
func getStatus(ctx context.Context, c *Call, retailer string, gen int64) (json.RawMessage, apiclient.Status, error) {
	var raw json.RawMessage
	path := fmt.Sprintf("/v1/retailers/%s/snapshots/%d", url.PathEscape(retailer), gen)
	if err := c.API.Do(ctx, http.MethodGet, path, c.Token, nil, &raw); err != nil {
		return nil, apiclient.Status{}, fmt.Errorf("status of %s generation %d: %w", retailer, gen, err)
	}
	var st apiclient.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, apiclient.Status{}, fmt.Errorf("status of %s generation %d: %w", retailer, gen, err)
	}
	return raw, st, nil
}

// printJSON writes a JSON document indented on stdout.
func printJSON(c *Call, raw json.RawMessage) error {
	out, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.Stdout, "%s\n", out)
	return err
}

func listUploads(ctx context.Context, c *Call, retailer string, limit int, before int64, asJSON bool) error {
	var raw json.RawMessage
	path := fmt.Sprintf("/v1/retailers/%s/snapshots?limit=%d", url.PathEscape(retailer), limit)
	if before > 0 {
		path += fmt.Sprintf("&before=%d", before)
	}
	if err := c.API.Do(ctx, http.MethodGet, path, c.Token, nil, &raw); err != nil {
		return fmt.Errorf("uploads of %s: %w", retailer, err)
	}
	var list struct {
		Items      []apiclient.Status `json:"items"`
		NextBefore *int64             `json:"next_before"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("uploads of %s: %w", retailer, err)
	}
	if list.NextBefore != nil {
		defer fmt.Fprintf(c.Stderr, "older uploads: catalogctl status %s --before %d\n", retailer, *list.NextBefore)
	}
	if asJSON {
		return printJSON(c, raw)
	}
	if len(list.Items) == 0 {
		if before > 0 {
			fmt.Fprintf(c.Stderr, "%s has no uploads older than generation %d\n", retailer, before)
		} else {
			fmt.Fprintf(c.Stderr, "%s has no uploads yet\n", retailer)
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GENERATION\tSTATE\tRECEIVED\tINSERTED\tUPDATED\tDELETED\tUNCHANGED\tCHUNKS\tNOTE")
	for _, s := range list.Items {
		received := "-"
		if s.ReceivedAt != nil {
			received = s.ReceivedAt.Format("2006-01-02 15:04:05Z")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%d\t%d\t%d\t%d/%d\t%s\n", s.Generation, s.State, received,
			s.Changes.Inserted, s.Changes.Updated, s.Changes.Deleted, s.Changes.Unchanged,
			s.Chunks.Applied, s.Chunks.Total, statusNote(s))
	}
	return tw.Flush()
}

// statusNote is the one-line why of a status: its error or what superseded it.
func statusNote(s apiclient.Status) string {
	switch {
	case s.SupersededBy != nil:
		return fmt.Sprintf("superseded by %d", *s.SupersededBy)
	case s.Error != nil && s.Error.Line != nil && !strings.HasPrefix(s.Error.Message, fmt.Sprintf("line %d:", *s.Error.Line)):
		return fmt.Sprintf("%s at line %d: %s", s.Error.Code, *s.Error.Line, s.Error.Message)
	case s.Error != nil:
		return fmt.Sprintf("%s: %s", s.Error.Code, s.Error.Message)
	}
	return ""
}
