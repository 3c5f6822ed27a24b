package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// planHeadItems is how many field changes `upload --dry-run` shows.
const planHeadItems = 10

func init() {
	register(&Command{
		Name: "plan", Args: "R G", Token: RetailerToken,
		Summary: "print what a previewed or held generation would change, field by field",
		Help: `Prints the plan of retailer R's generation G (GET .../snapshots/G/plan,
DESIGN 13) on stdout, one JSON object a line, in product_id order:
{"product_id", "op": "insert"|"update"|"delete", "fields": {"<attribute>":
{"from", "to"}}}, only the attributes that differ. A previewed (dry run) or
held generation has one, and so does an applied generation that was held
first; any other answers 409 plan_unavailable. Every page is read unless
--limit is given (then one page, after --after).`,
		Flags: func(fs *flag.FlagSet) Runner {
			after := fs.String("after", "", "start after this `product_id` (the next_after of a page)")
			limit := fs.Int("limit", 0, "read one page of at most `N` items (1-1000) instead of every page")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 2 {
					return c.Usagef("want a retailer id and a generation, got %d arguments", len(args))
				}
				gen, err := parseGenerationArg(c, args[1])
				if err != nil {
					return err
				}
				if *limit < 0 || *limit > 1000 {
					return c.Usagef("--limit must be 1-1000, got %d", *limit)
				}
				cursor, n := *after, 1000
				if *limit > 0 {
					n = *limit
				}
				for {
					page, err := c.API.Plan(ctx, c.Token, args[0], gen, cursor, n)
					if err != nil {
						return fmt.Errorf("plan of %s/%d: %w", args[0], gen, err)
					}
					for _, it := range page.Items {
						line, err := json.Marshal(it)
						if err != nil {
							return err
						}
						fmt.Fprintf(c.Stdout, "%s\n", line)
					}
					if page.NextAfter == nil {
						return nil
					}
					if *limit > 0 {
						fmt.Fprintf(c.Stderr, "more: catalogctl plan %s %d --after %q --limit %d\n", args[0], gen, *page.NextAfter, *limit)
						return nil
					}
					cursor = *page.NextAfter
				}
			}
		},
	})
}

// printPlanHead shows the first n items of a generation's plan on stderr,
// one line each; best effort (a failure is one line too).
func printPlanHead(ctx context.Context, c *Call, retailer string, gen int64, n int) {
	page, err := c.API.Plan(ctx, c.Token, retailer, gen, "", n)
	if err != nil {
		fmt.Fprintf(c.Stderr, "%s/%d: the plan cannot be read: %v\n", retailer, gen, err)
		return
	}
	for _, it := range page.Items {
		fmt.Fprintf(c.Stderr, "  %s %s%s\n", it.Op, it.ProductID, fieldSummary(it))
	}
	if page.NextAfter != nil {
		fmt.Fprintf(c.Stderr, "  ... the whole plan: catalogctl plan %s %d\n", retailer, gen)
	}
}

// fieldSummary is an item's changed attributes as ": a: from -> to, ...".
func fieldSummary(it apiclient.PlanItem) string {
	names := make([]string, 0, len(it.Fields))
	for name := range it.Fields {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, name := range names {
		f := it.Fields[name]
		parts = append(parts, fmt.Sprintf("%s: %s -> %s", name, short(f.From), short(f.To)))
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

// short cuts a JSON value for one line.
func short(v json.RawMessage) string {
	if len(v) > 40 {
		return string(v[:37]) + "..."
	}
	return string(v)
}
