package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

func init() {
	register(&Command{
		Name: "move", Args: "RETAILER", Token: AdminToken,
		Summary: "move a retailer to another shard, online",
		Help: `Starts a move of the retailer to shard --to-shard (POST
/v1/admin/retailers/{id}/move) and prints its move id. The ops function
copies the retailer's catalog, history, events, consumer versions and
usage to the new shard while uploads go on and the storefront reads,
switches the retailer's shard, then removes its rows from the old one
(docs/RUNBOOK.md, "Moving a retailer").

--wait follows the move to its end with a progress bar (rows copied of
the rows there were when it started) and its steps; --move MOVE follows a
move started before.

Exit codes: 0 the move is done (or started, without --wait), 1 it failed
(the retailer stays whole on its old shard; the error says why) or any
other failure.`,
		Flags: func(fs *flag.FlagSet) Runner {
			toShard := fs.Int("to-shard", -1, "the shard to move to (0-based)")
			wait := fs.Bool("wait", false, "follow the move to its end")
			follow := fs.String("move", "", "follow move `MOVE` instead of starting one")
			timeout := fs.Duration("timeout", 6*time.Hour, "how long to wait with --wait")
			return func(ctx context.Context, c *Call, args []string) error {
				moveID := *follow
				if moveID == "" {
					if len(args) != 1 {
						return c.Usagef("one retailer expected")
					}
					if *toShard < 0 {
						return c.Usagef("--to-shard N is required")
					}
					var out struct {
						MoveID string `json:"move_id"`
					}
					body := map[string]int{"to_shard": *toShard}
					if err := c.API.Do(ctx, http.MethodPost, "/v1/admin/retailers/"+url.PathEscape(args[0])+"/move", c.Token, body, &out); err != nil {
						return fmt.Errorf("move %s to shard %d: %w", args[0], *toShard, err)
					}
					moveID = out.MoveID
					fmt.Fprintf(c.Stderr, "move %s of %s to shard %s started\n", moveID, args[0], strconv.Itoa(*toShard))
					if !*wait {
						fmt.Fprintln(c.Stdout, moveID)
						return nil
					}
				}
				ctx, cancel := context.WithTimeout(ctx, *timeout)
				defer cancel()
				return waitMove(ctx, c, moveID)
			}
		},
	})
}

// waitMove follows a move to its end: a bar of the rows copied, a line at
// each step.
func waitMove(ctx context.Context, c *Call, moveID string) error {
	var bar *meter
	step := ""
	for {
		var m catalog.Move
		if err := c.API.Do(ctx, http.MethodGet, "/v1/admin/moves/"+url.PathEscape(moveID), c.Token, nil, &m); err != nil {
			return fmt.Errorf("move %s: %w", moveID, err)
		}
		if bar == nil && m.RowsTotal > 0 {
			bar = c.newMeter("copied rows", m.RowsTotal, false)
		}
		if bar != nil {
			bar.Set(m.RowsCopied)
		}
		if m.Step != step {
			step = m.Step
			if !c.Terminal || bar == nil {
				fmt.Fprintf(c.Stderr, "%s: %s, step %s (%d of %d rows copied)\n", moveID, m.State, m.Step, m.RowsCopied, m.RowsTotal)
			}
		}
		switch m.State {
		case catalog.MoveDone:
			if bar != nil {
				bar.Finish()
			}
			fmt.Fprintf(c.Stdout, "%s: done: %s is on shard %d (%d rows copied)\n", moveID, m.RetailerID, m.ToShard, m.RowsCopied)
			return nil
		case catalog.MoveFailed:
			if bar != nil {
				bar.Finish()
			}
			return Exit(1, fmt.Errorf("move %s failed, %s stays whole on shard %d: %s", moveID, m.RetailerID, m.FromShard, m.Error))
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return Exit(1, fmt.Errorf("move %s is not done yet (%s, step %s); follow it later with --move %s", moveID, m.State, m.Step, moveID))
			}
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
