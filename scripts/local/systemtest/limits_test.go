package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/ingest/diff"
	"github.com/retailcatalog/catalog/functions/ports/blob"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// reserveRaw reserves a generation and returns the raw answer's status,
// Retry-After header and generation.
func (e *env) reserveRaw(retailer string) (status int, retryAfter string, gen int64) {
	e.T.Helper()
	req, err := http.NewRequest(http.MethodPost, e.Stack.APIURL+"/v1/retailers/"+retailer+"/snapshots", nil)
	require.NoError(e.T, err)
	req.Header.Set("Authorization", "Bearer "+e.Token(retailer))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.T, err)
	defer resp.Body.Close()
	var body struct {
		Generation int64 `json:"generation"`
		Error      struct{ Code string }
	}
	require.NoError(e.T, json.NewDecoder(resp.Body).Decode(&body))
	if resp.StatusCode == http.StatusTooManyRequests {
		require.Equal(e.T, "too_many_reservations", body.Error.Code)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), body.Generation
}

// Defect 3: 40 quick reservations: 30 are granted (each superseding the
// unused one before it), the other 10 get 429 with Retry-After (seconds
// until a slot frees, about an hour); another retailer is not limited.
func TestReservationFloodLimited(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{})
	e.Onboard("r1")
	e.Onboard("r2")
	var granted []int64
	for i := 0; i < 40; i++ {
		status, retryAfter, gen := e.reserveRaw("r1")
		if i < 30 {
			require.Equal(t, http.StatusCreated, status, "reservation %d", i+1)
			granted = append(granted, gen)
			continue
		}
		require.Equal(t, http.StatusTooManyRequests, status, "reservation %d", i+1)
		secs, err := strconv.Atoi(retryAfter)
		require.NoError(t, err, "Retry-After %q", retryAfter)
		require.Greater(t, secs, 3500)
		require.LessOrEqual(t, secs, 3600)
	}
	require.Equal(t, int64(30), granted[29], "refused reservations use no generation")
	ctx := context.Background()
	list, err := e.API.List(ctx, e.Token("r1"), "r1", 100)
	require.NoError(t, err)
	require.Len(t, list, 30)
	require.Equal(t, "awaiting_upload", list[0].State)
	for _, s := range list[1:] {
		require.Equal(t, "superseded", s.State, "generation %d", s.Generation)
		require.Equal(t, s.Generation+1, *s.SupersededBy)
	}
	status, _, _ := e.reserveRaw("r2")
	require.Equal(t, http.StatusCreated, status)
}

// Defect 6: an unused slot past its expiry reads expired; its URL is
// refused (403); an upload written behind its back after the expiry and
// the grace is not taken (expired, upload_expired) and the catalog keeps
// the previous generation.
func TestUploadSlotExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{UploadTTL: 2 * time.Second, UploadGrace: time.Second})
	e.Onboard("r1")
	ctx := systemtest.Context(t, time.Minute)
	base := fixtures.Generate("p", 20)
	require.Equal(t, "applied", e.Upload("r1", base.CSV(nil)).State)

	slot, err := e.API.Reserve(ctx, e.Token("r1"), "r1", "")
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(2*time.Second), slot.Upload.ExpiresAt, time.Second)
	s, err := e.API.WaitFor(ctx, e.Token("r1"), "r1", slot.Generation, func(s apiclient.Status) bool { return s.State != "awaiting_upload" }, nil)
	require.NoError(t, err)
	require.Equal(t, "expired", s.State)
	requireHTTPStatus(t, e.API.Put(ctx, slot, fixtures.Generate("late", 20).CSV(nil)), http.StatusForbidden)

	require.Eventually(t, func() bool { return time.Now().After(slot.Upload.ExpiresAt.Add(time.Second)) }, 10*time.Second, 50*time.Millisecond)
	e.replaceUpload("r1", slot.Generation, fixtures.Generate("late", 20).CSV(nil))
	s, err = e.API.WaitFor(ctx, e.Token("r1"), "r1", slot.Generation, func(s apiclient.Status) bool { return s.Error != nil }, nil)
	require.NoError(t, err)
	require.Equal(t, "expired", s.State)
	require.Equal(t, "upload_expired", s.Error.Code)
	require.Nil(t, s.ReceivedAt)
	e.RequireCatalog("r1", base)
}

// diffObserver counts each retailer's diff invocations in flight, and
// holds one retailer's diffs at a gate.
type diffObserver struct {
	mu        sync.Mutex
	running   map[string]int
	maxSeen   map[string]int
	gated     string
	gate      chan struct{}
	opened    map[string]int // upload keys opened by the diff
	firstHeld chan struct{}
	heldOnce  sync.Once
}

func (o *diffObserver) wrap(next eventsource.Handler) eventsource.Handler {
	return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		var retailer string
		for _, m := range ev.Records {
			var s3ev lambdaevents.S3Event
			if json.Unmarshal([]byte(m.Body), &s3ev) == nil && len(s3ev.Records) > 0 {
				retailer, _, _ = keys.ParseUpload(s3ev.Records[0].S3.Object.Key)
			}
		}
		o.mu.Lock()
		o.running[retailer]++
		o.maxSeen[retailer] = max(o.maxSeen[retailer], o.running[retailer])
		o.mu.Unlock()
		defer func() {
			o.mu.Lock()
			o.running[retailer]--
			o.mu.Unlock()
		}()
		if retailer == o.gated {
			o.heldOnce.Do(func() { close(o.firstHeld) })
			<-o.gate
		}
		return next(ctx, ev)
	}
}

type countingBlobs struct {
	diff.Blobs
	o *diffObserver
}

func (b countingBlobs) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	b.o.mu.Lock()
	b.o.opened[key]++
	b.o.mu.Unlock()
	return b.Blobs.Open(ctx, key, ifMatch)
}

// Defect 3: one retailer's burst of uploads neither runs two diffs of it at
// once nor holds up another retailer. Retailer A uploads six snapshots
// while its first diff is held at a gate: A never has two diffs running,
// retailer B's upload is diffed and applied meanwhile, and once the gate
// opens A's older uploads stop at once (superseded by the newest, which has
// arrived: their files are never read) and only the newest is applied.
func TestDiffFairnessAcrossRetailers(t *testing.T) {
	t.Parallel()
	o := &diffObserver{running: map[string]int{}, maxSeen: map[string]int{}, opened: map[string]int{},
		gated: "ra", gate: make(chan struct{}), firstHeld: make(chan struct{})}
	e := newEnv(t, stack.Options{DiffConcurrency: 2, HandlerTimeout: 30 * time.Second, VisibilityTimeout: 35 * time.Second,
		WrapDiff:      o.wrap,
		WrapDiffBlobs: func(next diff.Blobs) diff.Blobs { return countingBlobs{Blobs: next, o: o} }})
	e.Onboard("ra")
	e.Onboard("rb")
	ctx := systemtest.Context(t, 2*time.Minute)
	var gens []int64
	var last fixtures.Catalog
	for i := 0; i < 6; i++ {
		last = fixtures.Generate(fmt.Sprintf("a%d", i), 30)
		gen, err := e.API.Upload(ctx, e.Token("ra"), "ra", "", last.CSV(nil))
		require.NoError(t, err)
		gens = append(gens, gen)
	}
	select {
	case <-o.firstHeld:
	case <-ctx.Done():
		t.Fatal("no diff of ra started")
	}
	for _, g := range gens {
		_, err := e.API.WaitFor(ctx, e.Token("ra"), "ra", g, func(s apiclient.Status) bool { return s.State != "awaiting_upload" }, nil)
		require.NoError(t, err)
	}

	// B is not queued behind A's backlog: applied while A's diff is held.
	other := fixtures.Generate("b", 40)
	sb := e.Upload("rb", other.CSV(nil))
	require.Equal(t, "applied", sb.State)
	e.RequireCatalog("rb", other)

	close(o.gate)
	newest := gens[len(gens)-1]
	require.Equal(t, "applied", e.Wait("ra", newest).State)
	for _, g := range gens[:len(gens)-1] {
		s := e.Wait("ra", g)
		require.Equal(t, "superseded", s.State, "generation %d", g)
		require.Zero(t, o.opened[keys.Upload("ra", g)], "generation %d was read", g)
	}
	e.RequireCatalog("ra", last)
	o.mu.Lock()
	defer o.mu.Unlock()
	require.Equal(t, 1, o.maxSeen["ra"], "one diff of a retailer at a time")
}
