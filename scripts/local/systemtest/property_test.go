package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/queue"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// lockedRand is a rand shared by the test and the fault injectors.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

func (l *lockedRand) chance(percent int) bool { return l.IntN(100) < percent }

// faults limits injected crashes to two per key (a message or a chunk), so
// that nothing is pushed into a dead-letter queue by the test itself (five
// failed receives would do that, by design).
type faults struct {
	mu    sync.Mutex
	count map[string]int
}

func (f *faults) allow(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count == nil {
		f.count = map[string]int{}
	}
	f.count[key]++
	return f.count[key] <= 2
}

// faultyQueue fails some chunk sends: the diff crashed after writing the chunk object.
type faultyQueue struct {
	next   queue.Sender
	rng    *lockedRand
	faults faults
}

func (q *faultyQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	if q.rng.chance(3) && q.faults.allow(dedupID[:strings.LastIndex(dedupID, ":")]) {
		return errors.New("injected crash before send")
	}
	return q.next.Send(ctx, queueURL, body, groupID, dedupID)
}

// TestPropertyLatestWins runs random sequences of uploads (some out of order,
// some malformed), duplicate S3 events, redeliveries, delays and crashes on
// both sides of every commit; once everything settles, every retailer's
// catalog equals its newest accepted snapshot (I1) and that generation is
// applied, every change event has left the outbox, and the analytics
// files reconstruct every catalog. CATALOG_PROPERTY_SEEDS sets how many sequences run (default 2);
// CATALOG_PROPERTY_SEED replays one.
func TestPropertyLatestWins(t *testing.T) {
	t.Parallel()
	seeds := 2
	if v := os.Getenv("CATALOG_PROPERTY_SEEDS"); v != "" {
		seeds, _ = strconv.Atoi(v)
	}
	base := uint64(time.Now().UnixNano())
	if v := os.Getenv("CATALOG_PROPERTY_SEED"); v != "" {
		base, _ = strconv.ParseUint(v, 10, 64)
		seeds = 1
	}
	for i := 0; i < seeds; i++ {
		seed := base + uint64(i)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Logf("seed %d (replay with CATALOG_PROPERTY_SEED=%d)", seed, seed)
			runProperty(t, seed)
		})
	}
}

func runProperty(t *testing.T, seed uint64) {
	rng := &lockedRand{r: rand.New(rand.NewPCG(seed, 99))}
	var applyFaults faults
	injected := func(ev lambdaevents.SQSEvent, percent int) bool {
		return len(ev.Records) > 0 && rng.chance(percent) && applyFaults.allow(ev.Records[0].MessageId)
	}
	e := newEnv(t, stack.Options{
		ChunkRows: 7, HandlerTimeout: 4 * time.Second, VisibilityTimeout: 4 * time.Second,
		SweepEvery: 500 * time.Millisecond, SweepAge: time.Second,
		WrapDiffQueue: func(next queue.Sender) queue.Sender { return &faultyQueue{next: next, rng: rng} },
		WrapApply: func(next eventsource.Handler) eventsource.Handler {
			return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
				time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
				if injected(ev, 5) {
					return lambdaevents.SQSEventResponse{}, errors.New("injected crash before apply")
				}
				resp, err := next(ctx, ev)
				if err == nil && injected(ev, 10) {
					return resp, errors.New("injected crash after commit, before delete")
				}
				return resp, err
			}
		},
	})
	retailers := []string{"ra", "rb", "rc"}
	snapshots := map[string]map[int64]fixtures.Catalog{}
	current := map[string]fixtures.Catalog{}
	for _, r := range retailers {
		e.Onboard(r)
		snapshots[r] = map[int64]fixtures.Catalog{}
		current[r] = fixtures.Generate(r, 40+rng.IntN(40))
	}
	ctx := systemtest.Context(t, 3*time.Minute)
	mutate := func(c fixtures.Catalog) fixtures.Catalog {
		n := c.Clone()
		ids := n.IDs()
		for k := rng.IntN(8); k > 0; k-- {
			n[ids[rng.IntN(len(ids))]]["price"] = fmt.Sprint(rng.IntN(5))
		}
		for k := rng.IntN(4); k > 0 && len(n) > 30; k-- {
			delete(n, ids[rng.IntN(len(ids))])
		}
		for k := rng.IntN(4); k > 0; k-- {
			n[fmt.Sprintf("x-%d", rng.IntN(200))] = fixtures.Row(fmt.Sprint(rng.IntN(3)))
		}
		return n
	}
	var all []struct {
		r   string
		gen int64
	}
	for round := 0; round < 4; round++ {
		for _, r := range retailers {
			// Two slots, filled in a random order; sometimes one is malformed.
			a, err := e.API.Reserve(ctx, e.Token(r), r, "")
			require.NoError(t, err)
			b, err := e.API.Reserve(ctx, e.Token(r), r, "")
			require.NoError(t, err)
			ca := mutate(current[r])
			cb := mutate(ca)
			current[r] = cb
			dataA, dataB := ca.CSV(nil), fixtures.Gzip(cb.JSONL())
			if rng.chance(15) {
				dataA = []byte("product_id,title\nsame,1\nsame,2\n")
			} else {
				snapshots[r][a.Generation] = ca
			}
			snapshots[r][b.Generation] = cb
			first, second := a, b
			firstData, secondData := dataA, dataB
			if rng.chance(50) {
				first, second, firstData, secondData = b, a, dataB, dataA
			}
			require.NoError(t, e.API.Put(ctx, first, firstData))
			if rng.chance(50) {
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			}
			require.NoError(t, e.API.Put(ctx, second, secondData))
			if rng.chance(30) {
				e.ResendS3Event(r, a.Generation)
			}
			all = append(all, struct {
				r   string
				gen int64
			}{r, a.Generation}, struct {
				r   string
				gen int64
			}{r, b.Generation})
		}
		if rng.chance(50) {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		}
	}
	for _, g := range all {
		s, err := e.API.WaitSettled(ctx, e.Token(g.r), g.r, g.gen, nil)
		require.NoError(t, err, "seed %d", seed)
		require.NotEqual(t, "held", s.State, "seed %d: nothing here should be held", seed)
	}
	for _, r := range retailers {
		var newest int64
		for gen := range snapshots[r] {
			newest = max(newest, gen)
		}
		s := e.Status(r, newest)
		require.Equal(t, "applied", s.State, "seed %d: %s's newest accepted generation %d", seed, r, newest)
		require.Equal(t, snapshots[r][newest], e.Catalog(r), "seed %d: catalog of %s", seed, r)
	}
	e.WaitOutboxEmpty(30 * time.Second)
	for _, r := range retailers {
		e.RequireAnalytics(r, e.Catalog(r), 30*time.Second)
	}
}
