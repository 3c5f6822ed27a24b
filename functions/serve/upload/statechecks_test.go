package upload_test

// State checks in the transaction of the change they guard (I12), through
// the routes: a request whose registry read is already old when it
// reaches the shard, concurrent token rotations, concurrent reservations
// at the hourly limit.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/servetest"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
)

// stalledRegistry is the real store whose registry reads can be held:
// after Retailer has read the registry, a hook set by the test decides
// whether (and until when) the answer waits, so that a request acts on a
// registry read that the next request has made old.
type stalledRegistry struct {
	*pgstore.Stores
	hook atomic.Pointer[func()]
}

func (s *stalledRegistry) Retailer(ctx context.Context, id string) (catalog.Retailer, error) {
	r, err := s.Stores.Retailer(ctx, id)
	if h := s.hook.Load(); h != nil {
		(*h)()
	}
	return r, err
}

// stallOnce holds the next registry read (only that one) until release is
// closed, and closes read when it has been made.
func (s *stalledRegistry) stallOnce() (read, release chan struct{}) {
	read, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := func() {
		first := false
		once.Do(func() { first = true })
		if first {
			close(read)
			<-release
		}
	}
	s.hook.Store(&h)
	return read, release
}

// barrier holds each of the next n registry reads until all n are made:
// n requests that authenticated before any of them changes anything.
func (s *stalledRegistry) barrier(n int) {
	var mu sync.Mutex
	arrived, all := 0, make(chan struct{})
	h := func() {
		mu.Lock()
		arrived++
		if arrived == n {
			close(all)
		}
		mu.Unlock()
		<-all
	}
	s.hook.Store(&h)
}

func newStalledFixture(t *testing.T, cfg upload.Config) (*fixture, *stalledRegistry) {
	var store *stalledRegistry
	f := servetest.New(t, servetest.Options{Upload: cfg, Wrap: func(s *pgstore.Stores) servetest.Store {
		store = &stalledRegistry{Stores: s}
		return store
	}})
	return f, store
}

// answer is a response's status and error code.
type answer struct {
	status int
	code   string
	token  string
	header http.Header
}

// do makes a request (safe in any goroutine: no assertion).
func do(f *fixture, method, path, token string) answer {
	req := httptest.NewRequest(method, path, strings.NewReader(""))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, req)
	var body struct {
		Token string
		Error struct{ Code string }
	}
	json.Unmarshal(w.Body.Bytes(), &body)
	return answer{status: w.Code, code: body.Error.Code, token: body.Token, header: w.Header()}
}

// Defect 1, made deterministic: a reservation that read the registry
// before the offboarding (not offboarded, the token good) reaches the
// shard after DELETE answered: the shard, which decides, refuses it (409
// retailer_offboarded), and a second DELETE answers the same generation,
// still the retailer's newest. Likewise a confirmation. (Before, the
// reservation got a generation newer than the offboarding's, which it
// superseded, and the confirmation succeeded.)
func TestRequestsPastTheRegistryCheckRefused(t *testing.T) {
	t.Parallel()
	f, store := newStalledFixture(t, upload.Config{})
	ctx := context.Background()
	for _, c := range []struct{ retailer, what string }{{"r1", "reservation"}, {"r2", "confirmation"}} {
		token := f.Onboard(c.retailer)
		var slot struct{ Generation int64 }
		require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/"+c.retailer+"/snapshots", token, "", &slot))
		_, err := f.Store.BeginDiff(ctx, c.retailer, slot.Generation, "")
		require.NoError(t, err)
		require.NoError(t, errOf(f.Store.Hold(ctx, c.retailer, slot.Generation, catalog.HoldEmptySnapshot, "empty", catalog.Counts{})))
		path := "/v1/retailers/" + c.retailer + "/snapshots"
		if c.what == "confirmation" {
			path = fmt.Sprintf("/v1/retailers/%s/snapshots/%d/confirm", c.retailer, slot.Generation)
		}

		read, release := store.stallOnce()
		done := make(chan answer, 1)
		go func() { done <- do(f, "POST", path, token) }()
		select {
		case <-read:
		case a := <-done:
			t.Fatalf("%s answered %d %s before reading the registry", c.what, a.status, a.code)
		}
		store.hook.Store(nil)
		var off control.OffboardResponse
		require.Equal(t, http.StatusAccepted, f.Call("DELETE", "/v1/admin/retailers/"+c.retailer, admin, "", &off), c.what)
		close(release)
		got := <-done
		require.Equal(t, http.StatusConflict, got.status, "%s after DELETE answered", c.what)
		require.Equal(t, "retailer_offboarded", got.code, c.what)

		var again control.OffboardResponse
		require.Equal(t, http.StatusAccepted, f.Call("DELETE", "/v1/admin/retailers/"+c.retailer, admin, "", &again))
		require.Equal(t, off.Generation, again.Generation)
		require.Equal(t, "awaiting_upload", again.State, "the offboarding is never superseded")
		var list struct{ Items []upload.Status }
		require.Equal(t, http.StatusOK, f.Call("GET", path[:strings.LastIndex(path, "/snapshots")]+"/snapshots?limit=1", admin, "", &list))
		require.Equal(t, off.Generation, list.Items[0].Generation, "the offboarding is the newest generation")
		var held upload.Status
		require.Equal(t, http.StatusOK, f.Call("GET", fmt.Sprintf("/v1/retailers/%s/snapshots/%d", c.retailer, slot.Generation), admin, "", &held))
		require.Equal(t, "superseded", held.State)
		require.Equal(t, off.Generation, *held.SupersededBy)
	}
	require.Empty(t, f.Queue.Take("diff-jobs"), "no confirmation sent a diff job")
}

// Concurrent rotations of one token, each authenticated before any
// changed it: exactly one answers 201, and its token is the one that
// works; the others answer 409 token_rotated; the old token gets 401.
// Likewise the admin's recoveries, which replace the token stored when
// they came, and a recovery racing a rotation. (Before, every rotation
// answered 201 and only one of the tokens worked.)
func TestConcurrentTokenRotations(t *testing.T) {
	t.Parallel()
	f, store := newStalledFixture(t, upload.Config{})
	old := f.Onboard("r1")
	const n = 6
	rotate := func(reqs ...[2]string) (winner string) {
		t.Helper()
		store.barrier(len(reqs))
		answers := make([]answer, len(reqs))
		var wg sync.WaitGroup
		for i, r := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				answers[i] = do(f, "POST", r[0], r[1])
			}()
		}
		wg.Wait()
		store.hook.Store(nil)
		for _, a := range answers {
			switch a.status {
			case http.StatusCreated:
				require.Empty(t, winner, "two rotations answered 201: %+v", answers)
				winner = a.token
			case http.StatusConflict:
				require.Equal(t, "token_rotated", a.code)
			default:
				t.Fatalf("rotation answered %d %s", a.status, a.code)
			}
		}
		require.NotEmpty(t, winner, "no rotation answered 201")
		require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots", winner, "", nil), "the 201's token works")
		return winner
	}
	self := [2]string{"/v1/retailers/r1/token", old}
	recovery := [2]string{"/v1/admin/retailers/r1/token", admin}

	var reqs [][2]string
	for range n {
		reqs = append(reqs, self)
	}
	rotated := rotate(reqs...)
	require.Equal(t, http.StatusUnauthorized, f.Call("GET", "/v1/retailers/r1/snapshots", old, "", nil), "the old token stops working")

	reqs = reqs[:0]
	for range n {
		reqs = append(reqs, recovery)
	}
	recovered := rotate(reqs...)
	require.Equal(t, http.StatusUnauthorized, f.Call("GET", "/v1/retailers/r1/snapshots", rotated, "", nil))

	latest := rotate([2]string{"/v1/retailers/r1/token", recovered}, recovery)
	for _, tok := range []string{old, rotated, recovered} {
		if tok != latest {
			require.Equal(t, http.StatusUnauthorized, f.Call("GET", "/v1/retailers/r1/snapshots", tok, "", nil))
		}
	}
}

// Section 5's limit under concurrency, through the route: with k
// reservations left in the hour, n at once give exactly k 201s and n-k
// 429 too_many_reservations with Retry-After.
func TestReservationLimitRace(t *testing.T) {
	t.Parallel()
	const perHour, k, n = 5, 2, 10
	f, _ := newStalledFixture(t, upload.Config{ReservationsPerHour: perHour})
	token := f.Onboard("r1")
	for range perHour - k {
		require.Equal(t, http.StatusCreated, f.Call("POST", "/v1/retailers/r1/snapshots", token, "", nil))
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = do(f, "POST", "/v1/retailers/r1/snapshots", token)
		}()
	}
	close(start)
	wg.Wait()
	created := 0
	for _, a := range answers {
		switch a.status {
		case http.StatusCreated:
			created++
		case http.StatusTooManyRequests:
			require.Equal(t, "too_many_reservations", a.code)
			require.NotEmpty(t, a.header.Get("Retry-After"))
		default:
			t.Fatalf("reservation answered %d %s", a.status, a.code)
		}
	}
	require.Equal(t, k, created)
	var list struct{ Items []upload.Status }
	require.Equal(t, http.StatusOK, f.Call("GET", "/v1/retailers/r1/snapshots?limit=100", token, "", &list))
	require.Len(t, list.Items, perHour)
	require.Equal(t, int64(perHour), list.Items[0].Generation)
}
