package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

func init() {
	register(&Command{
		Name: "replay", Args: "--retailer R --since T", Token: AdminToken,
		Summary: "publish a retailer's change events since a time again",
		Help: `Writes the change events of retailer R since T back into its outbox (POST
/v1/admin/retailers/R/replay): the changes of every chunk applied since T
(from the change objects in S3, the same objects the first events referred
to) and the outcome of every upload whose state changed since T (applied,
rejected, held, superseded; as it is now). The relay publishes them within
about a minute, each under its original event id and time.

Safe to run any number of times: an event that still waits to be published
is not written twice, and every consumer keeps the highest generation it has
seen of each product and ignores the rest (analytics writes nothing it has;
a webhook already delivered is not sent again). Use it after a consumer
lost data, or to feed a new consumer. Change objects are kept 19 days: an
older chunk's event is dropped by the relay (it logs each).

T is an RFC 3339 time (2026-11-30T06:00:00Z), a date (2026-11-30, midnight
UTC), or a time ago (90m, 6h, 2d).`,
		Flags: func(fs *flag.FlagSet) Runner {
			retailer := fs.String("retailer", "", "the retailer `R` (required)")
			since := fs.String("since", "", "replay what changed at or after `T` (required)")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) > 0 {
					return c.Usagef("replay takes no arguments besides its flags, got %q", strings.Join(args, " "))
				}
				if *retailer == "" || *since == "" {
					return c.Usagef("--retailer and --since are required")
				}
				t, err := parseSince(*since, time.Now())
				if err != nil {
					return c.Usagef("%v", err)
				}
				r, err := c.API.Replay(ctx, c.Token, *retailer, t)
				if err != nil {
					return fmt.Errorf("replay %s since %s: %w", *retailer, t.Format(time.RFC3339), err)
				}
				fmt.Fprintf(c.Stdout, "%s since %s: %d chunks' change events and %d upload outcomes written to the outbox again;\n"+
					"the relay publishes them within about a minute, under their original ids (consumers ignore what they have seen)\n",
					r.RetailerID, r.Since.Format(time.RFC3339), r.Changes, r.Lifecycle)
				return nil
			}
		},
	})
}

// parseSince reads an RFC 3339 time, a date (midnight UTC) or a time ago
// (a Go duration, or whole days like 2d).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	ago, err := time.ParseDuration(s)
	if days, ok := strings.CutSuffix(s, "d"); ok && err != nil {
		n, derr := strconv.Atoi(days)
		ago, err = time.Duration(n)*24*time.Hour, derr
	}
	if err != nil || ago <= 0 {
		return time.Time{}, fmt.Errorf("--since %q: want an RFC 3339 time (2026-11-30T06:00:00Z), a date (2026-11-30) or a time ago (90m, 6h, 2d)", s)
	}
	return now.Add(-ago), nil
}
