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

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/operate/ops"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
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

// A generation that keeps failing is re-driven MaxRedrives times, then
// ends rejected (diff_failed) rather than stuck (I10): every generation
// ends. (Until I10 the sweeper left it stuck for an operator; only an
// offboarding, which is never given up, still is: the next test.)
func TestSweeperEndsWhatNeverMoves(t *testing.T) {
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
	gen := e.startUpload("bad", fixtures.Generate("p", 5).CSV(nil))
	s := e.Wait("bad", gen)
	require.Equal(t, "rejected", s.State)
	require.Equal(t, catalog.CodeDiffFailed, s.Error.Code)
	require.Contains(t, s.Error.Message, "its diff made no progress for 1s after each of 2 re-drives")
	w := e.why("bad", "")
	requireWhy(t, w, ops.VerdictRejected, "diff_failed", "the pipeline could not finish it")
	require.Eventually(t, func() bool {
		return lines.Sum(metrics.GenerationsFailed, "Code=diff_failed") == 1
	}, 10*time.Second, 100*time.Millisecond, "GenerationsFailed never counted it")
	require.Equal(t, 2.0, lines.Sum(metrics.GenerationsRedriven, "retailer_id=bad"))
	require.NoError(t, lines.Validate())
}

// An offboarding is never given up: one whose work keeps failing is
// re-driven MaxRedrives times, then left stuck for an operator, counted by
// GenerationsStuck (and its retailer stays offboarded).
func TestSweeperNeverGivesUpAnOffboarding(t *testing.T) {
	t.Parallel()
	var fails atomic.Bool
	var lines metricstest.Capture
	e := newEnv(t, stack.Options{
		MaxReceives: 1, StallAfter: time.Second, StuckSweepEvery: 200 * time.Millisecond, MaxRedrives: 2,
		// the first upload's diff must fit its budget on a loaded machine
		HandlerTimeout: 3 * time.Second, VisibilityTimeout: 6 * time.Second, Metrics: &lines,
		WrapDiff: failWhile(&fails, "snapshots/gone/"),
	})
	e.Onboard("gone")
	require.Equal(t, "applied", e.Upload("gone", fixtures.Generate("p", 5).CSV(nil)).State)
	fails.Store(true)
	off, err := e.API.Offboard(context.Background(), e.Stack.AdminToken, "gone")
	require.NoError(t, err)
	w := e.waitWhy("gone", "the sweeper to give up", func(w ops.Why) bool { return strings.Contains(whyText(w), "the sweeper gave up") })
	requireWhy(t, w, ops.VerdictStuck, "re-driven 2 times by the sweeper")
	require.Eventually(t, func() bool {
		return lines.Sum(metrics.GenerationsStuck) > 0
	}, 10*time.Second, 100*time.Millisecond, "GenerationsStuck never counted it")
	st, err := e.Stack.Stores.Generation(context.Background(), "gone", off.Generation)
	require.NoError(t, err)
	require.False(t, st.State.Terminal(), "still %s: never rejected", st.State)
	fails.Store(false)
	// An operator fixes what failed and re-drives: the offboarding applies.
	e.ResendS3Event("gone", off.Generation)
	require.Eventually(t, func() bool {
		st, err := e.Stack.Stores.Generation(context.Background(), "gone", off.Generation)
		require.NoError(t, err)
		return st.State == catalog.StateApplied
	}, time.Minute, 50*time.Millisecond, "the offboarding never applied")
	e.RequireCatalog("gone", nil)
}
