package webhooks

import (
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/platform/retry"
)

// DefaultSlowAnswer is how long a receiver may take to answer and still be
// sent every event at once [Config.SlowAnswer].
const DefaultSlowAnswer = 2 * time.Second

// pacing keeps slow receivers from holding the consumer (I12: no head of
// line). A batch ends when its slowest delivery does, so a receiver that
// does not answer for 10 s would hold a batch, and with it one of the
// consumer's few concurrent slots, for every one of its events. Once a
// retailer's receiver answered slowly (over Config.SlowAnswer) or not at
// all, its retailer is paced: at most one delivery of it in flight, and
// none before its window ends (the retry schedule of its strikes in a row:
// 30 s, 1 min, ... 15 min); its other events are deferred without a POST
// (their visibility changed by at least their own schedule, so the queue's
// redrive count still covers 24 h). An answer in time ends the pacing.
// The state is per process (each Lambda instance learns it on its own) and
// holds only the retailers being paced.
type pacing struct {
	schedule retry.Schedule
	slow     time.Duration
	now      func() time.Time

	mu    sync.Mutex
	paced map[string]*paceState
}

// paceState is a paced retailer's: strikes in a row, whether a delivery
// is in flight, and when the next may start.
type paceState struct {
	strikes  int
	inFlight bool
	next     time.Time
}

func newPacing(schedule retry.Schedule, slow time.Duration, now func() time.Time) *pacing {
	return &pacing{schedule: schedule, slow: slow, now: now, paced: map[string]*paceState{}}
}

// begin says whether a delivery for retailerID may start now; when not,
// how long until the next may (at least a moment).
func (p *pacing) begin(retailerID string) (ok bool, wait time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, paced := p.paced[retailerID]
	if !paced {
		return true, 0
	}
	now := p.now()
	switch {
	case st.inFlight:
		return false, max(st.next.Sub(now), time.Second)
	case now.Before(st.next):
		return false, st.next.Sub(now)
	}
	st.inFlight = true
	return true, 0
}

// end records how a delivery for retailerID went: answered (any status)
// within elapsed.
func (p *pacing) end(retailerID string, answered bool, elapsed time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if answered && elapsed <= p.slow {
		delete(p.paced, retailerID)
		return
	}
	st, paced := p.paced[retailerID]
	if !paced {
		st = &paceState{}
		p.paced[retailerID] = st
	}
	st.strikes++
	st.inFlight = false
	st.next = p.now().Add(p.schedule.Delay(st.strikes))
}

// abort ends a delivery for retailerID that could not be attempted (not
// the receiver's doing): no strike.
func (p *pacing) abort(retailerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, paced := p.paced[retailerID]; paced {
		st.inFlight = false
	}
}

// deferred is a delivery not attempted because its retailer is paced; the
// message comes back after at least wait.
type deferred struct {
	retailerID string
	wait       time.Duration
}

func (d deferred) Error() string {
	return "retailer " + d.retailerID + "'s receiver is slow: delivery deferred " + d.wait.Round(time.Second).String()
}
