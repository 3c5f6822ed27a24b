package systemtest_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/metrics"
	"github.com/retailcatalog/catalog/functions/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ops"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// failWhile fails the invocations whose messages mention s while *on holds.
func failWhile(on *atomic.Bool, s string) func(eventsource.Handler) eventsource.Handler {
	return func(next eventsource.Handler) eventsource.Handler {
		return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
			for _, m := range ev.Records {
				if on.Load() && strings.Contains(m.Body, s) {
					return lambdaevents.SQSEventResponse{}, errors.New("injected failure for " + s)
				}
			}
			return next(ctx, ev)
		}
	}
}

// waitWhy asks why until ok says the answer is the one awaited.
func (e *env) waitWhy(retailer, what string, ok func(ops.Why) bool) ops.Why {
	e.T.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		w := e.why(retailer, "")
		if ok(w) {
			return w
		}
		if time.Now().After(deadline) {
			e.T.Fatalf("%s: waited a minute for %s; the last answer:\n%s", retailer, what, whyText(w))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The sweeper re-drives a generation whose diff job went to the DLQ (the
// job sent again) and one whose chunk went to the DLQ (the chunk sent again
// from its object); both end applied, their catalogs equal to their
// snapshots, and why tells the story.
func TestSweeperRedrivesDeadLetteredWork(t *testing.T) {
	t.Parallel()
	var diffFails, applyFails atomic.Bool
	diffFails.Store(true)
	applyFails.Store(true)
	var lines metricstest.Capture
	e := newEnv(t, stack.Options{
		MaxReceives: 1, StallAfter: 2 * time.Second, StuckSweepEvery: 250 * time.Millisecond, MaxRedrives: 10,
		HandlerTimeout: time.Second, VisibilityTimeout: 2 * time.Second, Metrics: &lines,
		WrapDiff:  failWhile(&diffFails, "snapshots/dj/"),
		WrapApply: failWhile(&applyFails, `"retailer_id":"cj"`),
	})
	cat := fixtures.Generate("p", 30)
	gens := map[string]int64{}
	for _, r := range []string{"dj", "cj"} {
		e.Onboard(r)
		gens[r] = e.startUpload(r, cat.CSV(nil))
	}
	for _, r := range []string{"dj", "cj"} {
		e.waitWhy(r, "its work in a dead-letter queue", func(w ops.Why) bool {
			return w.Verdict == ops.VerdictStuck && strings.Contains(whyText(w), "-dlq.fifo since")
		})
	}
	diffFails.Store(false)
	applyFails.Store(false)
	for _, r := range []string{"dj", "cj"} {
		require.Equal(t, "applied", e.Wait(r, gens[r]).State, r)
		e.RequireCatalog(r, cat)
		w := e.why(r, cat.IDs()[0])
		requireWhy(t, w, ops.VerdictCurrent, "equal to generation 1's snapshot")
		require.Positive(t, lines.Sum(metrics.GenerationsRedriven, "retailer_id="+r), r)
	}
	require.NoError(t, lines.Validate())
}

// A generation that keeps failing is re-driven MaxRedrives times, then left
// stuck for an operator, counted by GenerationsStuck.
func TestSweeperGivesUp(t *testing.T) {
	t.Parallel()
	var fails atomic.Bool
	fails.Store(true)
	var lines metricstest.Capture
	e := newEnv(t, stack.Options{
		MaxReceives: 1, StallAfter: time.Second, StuckSweepEvery: 200 * time.Millisecond, MaxRedrives: 2,
		HandlerTimeout: time.Second, VisibilityTimeout: 2 * time.Second, Metrics: &lines,
		WrapDiff: failWhile(&fails, "snapshots/bad/"),
	})
	e.Onboard("bad")
	e.startUpload("bad", fixtures.Generate("p", 5).CSV(nil))
	w := e.waitWhy("bad", "the sweeper to give up", func(w ops.Why) bool { return strings.Contains(whyText(w), "the sweeper gave up") })
	requireWhy(t, w, ops.VerdictStuck, "re-driven 2 times by the sweeper")
	require.Eventually(t, func() bool {
		ls := lines.Lines()
		return len(ls) > 0 && lines.Sum(metrics.GenerationsStuck) > 0
	}, 10*time.Second, 100*time.Millisecond, "GenerationsStuck never counted it")
	require.Equal(t, 2.0, lines.Sum(metrics.GenerationsRedriven, "retailer_id=bad"))
}
