package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// Exit codes of the commands that wait for an upload (DESIGN 6).
const (
	exitApplied  = 0
	exitFailed   = 1 // superseded, expired, timeout, any error
	exitRejected = 2
	exitHeld     = 3
)

// settled reports whether an upload's state is final, or waits for a person.
func settled(state string) bool {
	switch state {
	case "applied", "superseded", "rejected", "held", "expired", "previewed":
		return true
	}
	return false
}

// exitCodeFor is the tool's exit code for a settled state.
func exitCodeFor(state string) int {
	switch state {
	case "applied", "previewed":
		return exitApplied
	case "rejected":
		return exitRejected
	case "held":
		return exitHeld
	}
	return exitFailed
}

// stateNotes say what an upload is doing in each state that is not settled.
var stateNotes = map[string]string{
	"awaiting_upload": " (no file yet: it is taken up a moment after its PUT)",
	"received":        " (the file arrived; its diff starts)",
	"diffing":         " (reading the file whole and comparing it with the applied catalog)",
	"applying":        " (writing the changes, chunk by chunk)",
	"held":            " (confirmed; the diff takes it up again)", // only followed after confirm
}

// waiter follows one upload until it settles.
type waiter struct {
	retailer string
	gen      int64
	timeout  time.Duration
	// done says when to stop [settled(state)].
	done func(apiclient.Status) bool
	// stored: the tool has just PUT the file, so awaiting_upload means it
	// is on its way to the catalog, not missing.
	stored bool
}

// note is what the upload is doing in a state that is not settled.
func (w waiter) note(state string) string {
	if state == "awaiting_upload" && w.stored {
		return " (the file is stored; the catalog takes it up in a moment)"
	}
	return stateNotes[state]
}

// wait polls the upload's status, showing each state and the apply's chunk
// progress on stderr, until done; it returns the last status read. Brief
// failures to read it (a dropped connection, a 5xx, a 429) are retried.
func (w waiter) wait(ctx context.Context, c *Call) (json.RawMessage, apiclient.Status, error) {
	if w.done == nil {
		w.done = func(s apiclient.Status) bool { return settled(s.State) }
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	name := fmt.Sprintf("%s/%d", w.retailer, w.gen)
	lastState := ""
	var chunks *meter
	defer func() {
		if chunks != nil {
			chunks.Finish()
		}
	}()
	interval := 100 * time.Millisecond
	failures := 0
	for {
		raw, st, err := getStatus(ctx, c, w.retailer, w.gen)
		switch {
		case err != nil && ctx.Err() == nil && transient(err) && failures < 5:
			failures++
			fmt.Fprintf(c.Stderr, "%s: reading the status failed (%v); trying again\n", name, err)
		case err != nil:
			return nil, st, w.stopped(ctx, c, lastState, err)
		default:
			failures = 0
			if st.State != lastState {
				if chunks != nil {
					chunks.Finish()
					chunks = nil
				}
				if !w.done(st) { // a settled state is told by the caller, with its details
					fmt.Fprintf(c.Stderr, "%s: %s%s\n", name, st.State, w.note(st.State))
				}
				lastState = st.State
			}
			if st.State == "applying" && st.Chunks.Total > 0 {
				if chunks == nil {
					chunks = c.newMeter(name+": chunks applied", int64(st.Chunks.Total), false)
				}
				chunks.Set(int64(st.Chunks.Applied))
			}
			if w.done(st) {
				return raw, st, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, st, w.stopped(ctx, c, lastState, ctx.Err())
		case <-time.After(interval):
		}
		interval = min(interval*3/2, 2*time.Second)
	}
}

// stopped explains why waiting ended early: the upload itself goes on.
func (w waiter) stopped(ctx context.Context, c *Call, state string, err error) error {
	follow := fmt.Sprintf("follow it with: catalogctl status %s %d --wait", w.retailer, w.gen)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return Exit(exitFailed, fmt.Errorf("generation %d of %s is still %s after %v (--timeout); it goes on without us: %s",
			w.gen, w.retailer, orUnknown(state), w.timeout, follow))
	}
	if ctx.Err() != nil {
		return Exit(exitFailed, fmt.Errorf("stopped waiting (%v); generation %d of %s goes on without us: %s",
			err, w.gen, w.retailer, follow))
	}
	return err
}

func orUnknown(state string) string {
	if state == "" {
		return "unread"
	}
	return state
}

// transient reports whether a failed API call may well succeed if tried again.
func transient(err error) bool {
	var apiErr *apiclient.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status == 429 || apiErr.Status >= 500
	}
	var urlErr *url.Error
	return errors.As(err, &urlErr)
}

// finalStatus prints a settled upload's status JSON on stdout and a line
// saying what it means on stderr, and returns the exit code for its state.
func finalStatus(c *Call, raw json.RawMessage, st apiclient.Status) error {
	if err := printJSON(c, raw); err != nil {
		return err
	}
	name := fmt.Sprintf("%s/%d", st.RetailerID, st.Generation)
	switch st.State {
	case "applied":
		fmt.Fprintf(c.Stderr, "%s: applied: %d inserted, %d updated, %d deleted, %d unchanged\n", name,
			st.Changes.Inserted, st.Changes.Updated, st.Changes.Deleted, st.Changes.Unchanged)
	case "rejected":
		fmt.Fprintf(c.Stderr, "%s: rejected, nothing of it applied: %s\n", name, statusNote(st))
		printProblems(c, raw)
		fmt.Fprintf(c.Stderr, "fix the file and upload it again (docs/RETAILERS.md lists every code)\n")
	case "held":
		fmt.Fprintf(c.Stderr, "%s: held, not applied: %s\n"+
			"if that is what you meant: catalogctl confirm %s %d; otherwise upload a corrected file\n",
			name, statusNote(st), st.RetailerID, st.Generation)
	case "superseded":
		fmt.Fprintf(c.Stderr, "%s: %s: a newer upload of the retailer wins\n", name, statusNote(st))
	case "expired":
		fmt.Fprintf(c.Stderr, "%s: expired: the upload URL expired before a file arrived\n", name)
	case "previewed":
		fmt.Fprintf(c.Stderr, "%s: previewed (a dry run, nothing applied): it would insert %d, update %d, delete %d; %d unchanged\n", name,
			st.Changes.Inserted, st.Changes.Updated, st.Changes.Deleted, st.Changes.Unchanged)
		if st.Error != nil {
			fmt.Fprintf(c.Stderr, "%s: a real upload of it would be held: %s\n", name, statusNote(st))
		}
	default:
		fmt.Fprintf(c.Stderr, "%s: %s\n", name, st.State)
	}
	return Exit(exitCodeFor(st.State), nil)
}

// printProblems lists a rejection's problems (error.problems), the first
// being in the status line already.
func printProblems(c *Call, raw json.RawMessage) {
	var body struct {
		Error struct {
			Problems []struct {
				Code    string `json:"code"`
				Line    *int   `json:"line"`
				Message string `json:"message"`
			} `json:"problems"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) != nil || len(body.Error.Problems) < 2 {
		return
	}
	const shown = 10
	var b strings.Builder
	for i, p := range body.Error.Problems {
		if i == shown {
			fmt.Fprintf(&b, "  ... and %d more in the status JSON\n", len(body.Error.Problems)-shown)
			break
		}
		// The message names its line ("line 12: ..."), when it has one.
		fmt.Fprintf(&b, "  %s: %s\n", p.Code, p.Message)
	}
	fmt.Fprintf(c.Stderr, "%s:\n%s", plural(len(body.Error.Problems), "problem"), b.String())
}
