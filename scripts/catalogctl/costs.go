package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"
)

func init() {
	register(&Command{
		Name: "costs", Token: AdminToken,
		Summary: "the usage and cost report per retailer per day (CSV, HTML or JSON)",
		Help: `Fetches GET /v1/admin/costs for the UTC days --from..--to (both included;
by default the current month so far) and writes it to --out, or stdout.

  --format csv   one row per retailer per day, the columns of DESIGN 10
  --format html  one self-contained page with charts (opens with no network)
  --format json  the whole report: rows, days, retailers, totals

Every report states the price table it used (dated, with how far its prices
were checked), how shared fixed costs are allocated, and
how exact the metered counters are.

  catalogctl costs --format html --out costs.html`,
		Flags: func(fs *flag.FlagSet) Runner {
			now := time.Now().UTC()
			from := fs.String("from", now.Format("2006-01")+"-01", "first UTC day, `YYYY-MM-DD`")
			to := fs.String("to", now.Format(usage.DateLayout), "last UTC day, `YYYY-MM-DD`")
			format := fs.String("format", "csv", "csv, html or json")
			out := fs.String("out", "", "write to `FILE` instead of stdout")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 0 {
					return c.Usagef("no arguments expected, got %q", args)
				}
				for _, d := range []string{*from, *to} {
					if _, err := usage.ParseDay(d); err != nil {
						return c.Usagef("%v", err)
					}
				}
				switch *format {
				case "csv", "html", "json":
				default:
					return c.Usagef("--format %q: want csv, html or json", *format)
				}
				body, err := c.API.Costs(ctx, c.Token, *from, *to, *format)
				if err != nil {
					return fmt.Errorf("costs %s..%s: %w", *from, *to, err)
				}
				if *out == "" {
					_, err := c.Stdout.Write(body)
					return err
				}
				if err := writeFileAtomically(*out, body); err != nil {
					return err
				}
				fmt.Fprintf(c.Stderr, "wrote %s (%d bytes, %s..%s)\n", *out, len(body), *from, *to)
				return nil
			}
		},
	})
}

// writeFileAtomically writes path through a temporary file in its
// directory, so that a reader never sees half a report.
func writeFileAtomically(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
