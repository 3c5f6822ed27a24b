package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/operate/ops"
)

func init() {
	register(&Command{
		Name: "reconcile", Args: "", Token: AdminToken,
		Summary: "compare catalogs with their newest applied snapshots (and repair what diverged)",
		Help: `Starts a reconciliation (POST /v1/admin/reconcile) of one retailer
(--retailer R) or of every one, waits for it and prints what it found: for
each retailer whose catalog differs from its newest applied snapshot, the
products missing, extra and different, with examples. Each row's stored
attributes are hashed afresh and compared with the snapshot's index; a
retailer whose newest upload is being applied is skipped.

--repair rewrites exactly the divergent rows to the snapshot's values, with
fenced writes (a newer generation always wins) and a change event, then
reports what it repaired. --run RUN shows a run started before (the
scheduled one too). --json prints the API's report instead.

Exit codes: 0 no divergence left (none found, or all repaired), 2
divergence left, 1 any failure (a retailer the run could not check, or a
run not done within --timeout, too).`,
		Flags: func(fs *flag.FlagSet) Runner {
			retailer := fs.String("retailer", "", "only this retailer (default: every retailer)")
			repair := fs.Bool("repair", false, "rewrite the divergent rows to the snapshot's values")
			run := fs.String("run", "", "show run `RUN` instead of starting one")
			noWait := fs.Bool("no-wait", false, "print the run id and return at once")
			asJSON := fs.Bool("json", false, "print the API's report JSON")
			timeout := fs.Duration("timeout", time.Hour, "how long to wait for the run")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 0 {
					return c.Usagef("no arguments expected, got %q", strings.Join(args, " "))
				}
				runID := *run
				if runID == "" {
					var err error
					if runID, err = c.API.Reconcile(ctx, c.Token, *retailer, *repair); err != nil {
						return fmt.Errorf("start a reconciliation: %w", err)
					}
					fmt.Fprintf(c.Stderr, "reconciliation %s started\n", runID)
					if *noWait {
						fmt.Fprintln(c.Stdout, runID)
						return nil
					}
				}
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				raw, rep, err := waitRun(ctx, c, runID)
				if err != nil {
					return err
				}
				if *asJSON {
					if err := printJSON(c, raw); err != nil {
						return err
					}
				} else {
					printReport(c, rep)
				}
				for _, d := range rep.Divergent {
					if d.Missing+d.Extra+d.Different > d.Repaired {
						return Exit(2, nil)
					}
				}
				for _, s := range rep.Skipped {
					if s.Failed {
						return Exit(1, fmt.Errorf("reconciliation %s could not check %s: see the ops function's logs (run_id %s)", runID, s.RetailerID, runID))
					}
				}
				return nil
			}
		},
	})
}

// waitRun polls a run until it is done, showing its progress on stderr.
func waitRun(ctx context.Context, c *Call, runID string) (json.RawMessage, ops.ReconcileRunReport, error) {
	last := ""
	for {
		var raw json.RawMessage
		if err := c.API.Do(ctx, http.MethodGet, "/v1/admin/reconcile/"+url.PathEscape(runID), c.Token, nil, &raw); err != nil {
			return nil, ops.ReconcileRunReport{}, fmt.Errorf("reconciliation %s: %w", runID, err)
		}
		var rep ops.ReconcileRunReport
		if err := json.Unmarshal(raw, &rep); err != nil {
			return nil, rep, fmt.Errorf("reconciliation %s: %w", runID, err)
		}
		if rep.State == "done" {
			return raw, rep, nil
		}
		progress := fmt.Sprintf("checked %d retailers", rep.RetailersChecked)
		if rep.RetailersTotal != nil {
			progress = fmt.Sprintf("checked %d of %d retailers", rep.RetailersChecked, *rep.RetailersTotal)
		}
		if progress != last {
			fmt.Fprintf(c.Stderr, "%s: %s\n", runID, progress)
			last = progress
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, rep, Exit(1, fmt.Errorf("reconciliation %s is not done yet (%s); see it later with --run %s", runID, progress, runID))
			}
			return nil, rep, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func printReport(c *Call, rep ops.ReconcileRunReport) {
	total := rep.RetailersChecked
	if rep.RetailersTotal != nil {
		total = *rep.RetailersTotal
	}
	fmt.Fprintf(c.Stdout, "run %s: %d of %d retailers checked, %d divergent\n", rep.RunID, rep.RetailersChecked, total, len(rep.Divergent))
	for _, d := range rep.Divergent {
		line := fmt.Sprintf("  %s (generation %d): %d missing, %d extra, %d different", d.RetailerID, d.Generation, d.Missing, d.Extra, d.Different)
		if rep.Repair {
			line += fmt.Sprintf("; repaired %d", d.Repaired)
			if d.Unrepaired > 0 {
				line += fmt.Sprintf(", %d could not be", d.Unrepaired)
			}
		}
		fmt.Fprintf(c.Stdout, "%s; e.g. %s\n", line, strings.Join(d.Examples, ", "))
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(c.Stdout, "  %s skipped: %s\n", s.RetailerID, s.Reason)
	}
	if len(rep.Divergent) > 0 && !rep.Repair {
		fmt.Fprintf(c.Stdout, "repair with: catalogctl reconcile --repair [--retailer R]\n")
	}
}
