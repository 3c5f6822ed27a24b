package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
)

func init() {
	register(&Command{
		Name: "gc", Args: "[--retailer R] [--json]", Token: AdminToken,
		Summary: "collect tombstones, directory entries, chunk progress and parked events",
		Help: `Collects what no write and no reader needs again (POST /v1/admin/gc), of
retailer R or of every retailer, one after another, in short transactions of a
bounded batch each; safe while uploads apply and while another collection runs.
It runs daily on its own (EventBridge on AWS, up --gc-every locally).

For each retailer it first raises the write floor, the oldest generation that
may still write to the catalog, to the newest generation applied more than the
tombstone retention ago (19 days, the chunk objects' retention: no message of
an older generation can still exist), then removes:
  tombstones         rows of deleted products stamped at or below the floor
  directory entries  the product directory's entries of those products
  consumer versions  the analytics and webhooks consumers' versions of them
  chunk rows         chunk progress of generations finished before the horizon
  outbox rows        change events parked more than 14 days ago, never redriven
Usage rows (finance) and the generations' status history are kept. A chunk of
a generation below the floor that still arrived would be refused (I3).`,
		Flags: func(fs *flag.FlagSet) Runner {
			retailer := fs.String("retailer", "", "collect only retailer `R` (default: every retailer)")
			asJSON := fs.Bool("json", false, "print the API's answer JSON")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) > 0 {
					return c.Usagef("gc takes no arguments besides its flags, got %q", strings.Join(args, " "))
				}
				r, err := c.API.Collect(ctx, c.Token, *retailer)
				if err != nil {
					if *retailer != "" {
						return fmt.Errorf("gc %s: %w", *retailer, err)
					}
					return fmt.Errorf("gc: %w", err)
				}
				if *asJSON {
					enc := json.NewEncoder(c.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(r)
				}
				fmt.Fprintf(c.Stdout, "collected %d retailers:\n", r.Retailers)
				for _, l := range []struct {
					name string
					n    int64
				}{
					{"tombstones", r.Tombstones}, {"directory entries", r.DirectoryEntries},
					{"consumer versions", r.ConsumerVersions}, {"chunk rows", r.ChunkRows}, {"outbox rows", r.OutboxRows},
					{"move records", r.MoveRecords},
				} {
					fmt.Fprintf(c.Stdout, "  %-18s %d\n", l.name, l.n)
				}
				if len(r.Skipped) > 0 {
					fmt.Fprintf(c.Stdout, "skipped, switching shards (the next run collects them): %s\n", strings.Join(r.Skipped, ", "))
				}
				return nil
			}
		},
	})
}
