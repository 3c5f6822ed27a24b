package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/retailcatalog/catalog/functions/operate/ops"
)

func init() {
	register(&Command{
		Name: "dlq", Args: "list [QUEUE] | redrive QUEUE", Token: AdminToken,
		Summary: "look at the dead-letter queues and move their messages back once the cause is fixed",
		Help: `dlq list: every queue with a dead-letter queue and how many messages it
holds (GET /v1/admin/dlq), and how many change events are parked in the
outboxes (outbox).

dlq list QUEUE: the messages of QUEUE's dead-letter queue, oldest first,
each with when it was first sent, how many times it was received and what
it is (an upload's S3 event, a chunk, a change event); nothing is consumed
(GET /v1/admin/dlq/QUEUE). --json prints the API's object.

dlq redrive QUEUE: moves the messages back to QUEUE (POST
/v1/admin/dlq/QUEUE/redrive, repeated until the dead-letter queue is empty
or --limit messages have moved). Fix what made them fail first: they go
through the whole retry schedule again. Safe to run any number of times:
every step downstream is idempotent (a chunk applied twice counts once, a
change event seen twice writes nothing, a webhook already delivered is not
sent again).

Queues: arrivals, diff-jobs, apply-small, apply-large, analytics, webhooks,
reconcile-jobs; and outbox: the change events the relay could not publish
(SNS refused them, they are over the envelope bound, or they failed 5
times), parked in their shard's outbox. dlq list outbox [--retailer R]
shows them, first parked first, with their retailer, generation, event,
attempts and last error (GET /v1/admin/outbox/parked); dlq redrive outbox
[--retailer R] puts them back, attempts reset, and the relay's sweeper
publishes them at its next run, under their ids (POST
/v1/admin/outbox/redrive).`,
		Flags: func(fs *flag.FlagSet) Runner {
			limit := fs.Int("limit", 0, "list: show at most `N` messages (1-100, default 20); redrive: move at most N (default every one)")
			asJSON := fs.Bool("json", false, "list: print the API's JSON object")
			retailer := fs.String("retailer", "", "outbox only: the parked events of retailer `R` (default every retailer's)")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) == 0 {
					return c.Usagef("want list or redrive")
				}
				if *retailer != "" && (len(args) != 2 || args[1] != ops.OutboxQueue) {
					return c.Usagef("--retailer is for dlq list|redrive %s only", ops.OutboxQueue)
				}
				switch verb, rest := args[0], args[1:]; {
				case verb == "list" && len(rest) == 1 && rest[0] == ops.OutboxQueue:
					n := *limit
					if n == 0 {
						n = 20
					}
					if n < 1 || n > 100 {
						return c.Usagef("--limit must be from 1 to 100 for list, got %d", n)
					}
					return listParked(ctx, c, *retailer, n, *asJSON)
				case verb == "redrive" && len(rest) == 1 && rest[0] == ops.OutboxQueue:
					if *limit < 0 {
						return c.Usagef("--limit must be positive, got %d", *limit)
					}
					return redriveOutbox(ctx, c, *retailer, *limit)
				case verb == "list" && len(rest) == 0:
					return listDeadLetterQueues(ctx, c, *asJSON)
				case verb == "list" && len(rest) == 1:
					n := *limit
					if n == 0 {
						n = 20
					}
					if n < 1 || n > 100 {
						return c.Usagef("--limit must be from 1 to 100 for list, got %d", n)
					}
					return listDeadLetters(ctx, c, rest[0], n, *asJSON)
				case verb == "redrive" && len(rest) == 1:
					if *limit < 0 {
						return c.Usagef("--limit must be positive, got %d", *limit)
					}
					return redrive(ctx, c, rest[0], *limit)
				case verb == "list" || verb == "redrive":
					return c.Usagef("dlq %s takes %s, got %d arguments", verb, map[string]string{"list": "at most one queue", "redrive": "one queue"}[verb], len(rest))
				default:
					return c.Usagef("unknown dlq action %q: want list or redrive", verb)
				}
			}
		},
	})
}

func listDeadLetterQueues(ctx context.Context, c *Call, asJSON bool) error {
	queues, err := c.API.DeadLetterQueues(ctx, c.Token)
	if err != nil {
		return fmt.Errorf("dead-letter queues: %w", err)
	}
	if asJSON {
		return printValue(c, ops.DeadLetterQueuesJSON{Queues: queues})
	}
	parked, err := c.API.ParkedOutbox(ctx, c.Token, "", 1)
	if err != nil {
		return fmt.Errorf("parked change events: %w", err)
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tDEAD-LETTER QUEUE\tMESSAGES")
	for _, q := range queues {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", q.Queue, q.DLQ, q.Depth)
	}
	fmt.Fprintf(tw, "%s\t%s\t%d\n", ops.OutboxQueue, "(parked change events)", parked.Parked)
	return tw.Flush()
}

// listParked prints the change events parked in the outboxes.
func listParked(ctx context.Context, c *Call, retailerID string, limit int, asJSON bool) error {
	p, err := c.API.ParkedOutbox(ctx, c.Token, retailerID, limit)
	if err != nil {
		return fmt.Errorf("parked change events: %w", err)
	}
	if asJSON {
		return printValue(c, p)
	}
	of := ""
	if retailerID != "" {
		of = " of " + retailerID
	}
	fmt.Fprintf(c.Stdout, "outbox: %d change events%s parked", p.Parked, of)
	if int64(len(p.Events)) < p.Parked {
		fmt.Fprintf(c.Stdout, " (the first %d parked shown)", len(p.Events))
	}
	fmt.Fprintln(c.Stdout)
	if len(p.Events) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARKED\tRETAILER\tGENERATION\tEVENT\tATTEMPTS\tLAST ERROR")
	for _, e := range p.Events {
		event := e.Type
		if e.Seq != nil {
			event = fmt.Sprintf("%s (chunk %d)", e.Type, *e.Seq)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", e.ParkedAt.UTC().Format(time.RFC3339), e.RetailerID, e.Generation,
			event, e.Attempts, oneLine(e.LastError, 120))
	}
	return tw.Flush()
}

// oneLine is s on one line, cut to at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

// redriveOutbox asks the API to put parked change events back until none
// is parked (of the retailer), limit have moved, or as many as were
// parked at the start.
func redriveOutbox(ctx context.Context, c *Call, retailerID string, limit int) error {
	total, left, err := redriveRounds(limit, func(ask int) (ops.RedriveResponse, error) {
		return c.API.RedriveOutbox(ctx, c.Token, retailerID, ask)
	}, nil)
	if err != nil {
		return fmt.Errorf("redrive the parked change events (%d moved so far): %w", total, err)
	}
	fmt.Fprintf(c.Stdout, "put %d parked change events back in the outbox; the relay's sweeper publishes them within a minute; %d still parked\n",
		total, left)
	return nil
}

// redriveRounds calls round, asking each time for what is left of limit (0:
// every), until nothing is left, limit have moved, or as many as there were
// at the start (a message that fails again at once does not keep the loop
// going); progress, when not nil, hears of each round but the last. It
// returns how many moved and how many are left.
func redriveRounds(limit int, round func(ask int) (ops.RedriveResponse, error), progress func(total, left int)) (total, left int, err error) {
	start := -1
	for {
		ask := 0
		if limit > 0 {
			ask = limit - total
		}
		r, err := round(ask)
		if err != nil {
			return total, 0, err
		}
		total += r.Moved
		if start < 0 {
			start = r.Moved + max(r.Left, 0)
		}
		done := r.Moved == 0 || r.Left <= 0 || (limit > 0 && total >= limit) || total >= start
		if done {
			return total, max(r.Left, 0), nil
		}
		if progress != nil {
			progress(total, r.Left)
		}
	}
}

func listDeadLetters(ctx context.Context, c *Call, queue string, limit int, asJSON bool) error {
	dl, err := c.API.DeadLetters(ctx, c.Token, queue, limit)
	if err != nil {
		return fmt.Errorf("dead letters of %s: %w", queue, err)
	}
	if asJSON {
		return printValue(c, dl)
	}
	fmt.Fprintf(c.Stdout, "%s: %d messages in %s", dl.Queue, dl.Depth, dl.DLQ)
	if len(dl.Messages) < dl.Depth {
		fmt.Fprintf(c.Stdout, " (the oldest %d shown; a FIFO queue shows one per message group)", len(dl.Messages))
	}
	fmt.Fprintln(c.Stdout)
	if len(dl.Messages) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SENT\tRECEIVES\tMESSAGE")
	for _, m := range dl.Messages {
		sent := "-"
		if m.SentAt != nil {
			sent = m.SentAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", sent, m.Receives, describeDeadLetter(m.Body))
	}
	return tw.Flush()
}

// describeDeadLetter says in a line what a dead letter is: an upload's S3
// event, a chunk message, a change event, or else its start.
func describeDeadLetter(body json.RawMessage) string {
	var m struct {
		// message.Envelope
		ID, Type string
		// message.ChunkMessage (and the envelope's)
		RetailerID string `json:"retailer_id"`
		Generation int64
		Seq        *int
		Total      int
		// an S3 event notification
		Records []struct {
			S3 struct{ Object struct{ Key string } }
		}
	}
	_ = json.Unmarshal(body, &m)
	switch {
	case m.ID != "" && m.Type != "":
		return fmt.Sprintf("%s event %s (retailer %s, generation %d)", m.Type, m.ID, m.RetailerID, m.Generation)
	case m.RetailerID != "" && m.Seq != nil:
		return fmt.Sprintf("chunk %d of %d (retailer %s, generation %d)", *m.Seq, m.Total, m.RetailerID, m.Generation)
	case len(m.Records) > 0:
		var keys []string
		for _, r := range m.Records {
			keys = append(keys, r.S3.Object.Key)
		}
		return "S3 event: " + strings.Join(keys, ", ")
	}
	var s string
	if json.Unmarshal(body, &s) != nil {
		s = string(body)
	}
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return s
}

// redrive asks the API to move messages back until the dead-letter queue is
// empty, limit messages have moved, or as many as it held at the start (a
// message that fails again at once does not keep the loop going).
func redrive(ctx context.Context, c *Call, queue string, limit int) error {
	total, left, err := redriveRounds(limit, func(ask int) (ops.RedriveResponse, error) {
		return c.API.Redrive(ctx, c.Token, queue, ask)
	}, func(total, left int) {
		fmt.Fprintf(c.Stderr, "redrive %s: %d moved, %d left\n", queue, total, left)
	})
	if err != nil {
		return fmt.Errorf("redrive %s (%d moved so far): %w", queue, total, err)
	}
	fmt.Fprintf(c.Stdout, "moved %d messages back to %s; %d left in its dead-letter queue\n", total, queue, left)
	return nil
}

// printValue writes v as indented JSON on stdout.
func printValue(c *Call, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.Stdout, "%s\n", out)
	return err
}
