package systemtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// A retailer moves to the other shard on the whole stack while it uploads
// full snapshots and the storefront reads, its move runner crashed
// (abandoned, its lease left to run out) once at each step: the move ends
// done; no storefront read of a product present in every snapshot answered
// 404 or a generation lower than one the reader saw before; every upload
// ended applied (none lost, none applied twice: the catalog equals the
// newest snapshot, its status history reads on); the old shard holds
// nothing of the retailer, and uploads go on on the new one.
func TestMoveWithUploadsAndReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{ReservationsPerHour: 10_000})
	const id = "mover"
	e.Onboard(id)
	cat := fixtures.Generate("p", 1500)
	require.Equal(t, "applied", e.Upload(id, cat.CSV(nil)).State)
	from := e.ShardOf(id)
	stable := cat.IDs()[:10] // in every snapshot

	var crashed sync.Map
	e.Stack.Stores.Moves = pgstore.MoveOptions{Batch: 400, Lease: 300 * time.Millisecond, CatchUpLeft: 20,
		Hook: func(_, step string) error {
			if _, again := crashed.LoadOrStore(step, true); !again {
				return pgstore.ErrMoveAbandoned
			}
			return nil
		}}

	ctx := systemtest.Context(t, 4*time.Minute)
	stop := make(chan struct{})
	var mu sync.Mutex
	newest, gens := cat.Clone(), []int64{1}
	uploads := make(chan error, 1)
	go func() { // full snapshots, one after another
		rnd := rand.New(rand.NewPCG(7, 24))
		next := cat.Clone()
		for n := 0; ; n++ {
			select {
			case <-stop:
				uploads <- nil
				return
			default:
			}
			next = next.Clone()
			ids := next.IDs()
			for range 40 {
				next[ids[rnd.IntN(len(ids))]]["price"] = fmt.Sprintf("%d.%02d", n, rnd.IntN(100))
			}
			for _, s := range stable {
				next[s]["title"] = fmt.Sprintf("stable %d", n)
			}
			// The victim is never one of the stable products ("new-" ids sort
			// before them, so a position in ids says nothing).
			if victim := ids[rnd.IntN(len(ids))]; len(next) > 1400 && !slices.Contains(stable, victim) {
				delete(next, victim)
			}
			next[fmt.Sprintf("new-%05d", n)] = map[string]string{"title": "new", "brand": "Acme", "price": "1.00", "availability": "in stock", "description": "x"}
			gen, err := uploadRetrying(ctx, e.API, e.Token(id), id, next.CSV(nil))
			if err != nil {
				uploads <- fmt.Errorf("upload %d: %w", n, err)
				return
			}
			s, err := e.API.WaitSettled(ctx, e.Token(id), id, gen, nil)
			if err != nil || s.State != "applied" {
				uploads <- fmt.Errorf("upload %d, generation %d: %v %+v", n, gen, err, s)
				return
			}
			mu.Lock()
			newest, gens = next, append(gens, gen)
			mu.Unlock()
		}
	}()
	reads := make(chan error, 1)
	var readCount int
	go func() { // the storefront, beside the move
		seen := map[string]int64{}
		for i := 0; ; i++ {
			select {
			case <-stop:
				reads <- nil
				return
			default:
			}
			pid := stable[i%len(stable)]
			gen, err := storefrontGeneration(ctx, e.API.HTTP, e.Stack.APIURL+"/v1/retailers/"+id+"/products/"+pid)
			if err != nil {
				reads <- fmt.Errorf("read %d of %s: %w", i, pid, err)
				return
			}
			if gen < seen[pid] {
				reads <- fmt.Errorf("read %d of %s: generation %d after %d", i, pid, gen, seen[pid])
				return
			}
			seen[pid] = gen
			readCount = i + 1
			time.Sleep(2 * time.Millisecond)
		}
	}()

	time.Sleep(time.Second) // uploads under way
	var started struct {
		MoveID string `json:"move_id"`
	}
	require.NoError(t, e.API.Do(ctx, http.MethodPost, "/v1/admin/retailers/"+id+"/move", e.Stack.AdminToken, map[string]int{"to_shard": 1 - from}, &started))
	var m catalog.Move
	for {
		require.NoError(t, e.API.Do(ctx, http.MethodGet, "/v1/admin/moves/"+started.MoveID, e.Stack.AdminToken, nil, &m))
		if !m.Running() {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("move not done: %+v", m)
		case <-time.After(200 * time.Millisecond):
		}
	}
	require.Equal(t, catalog.MoveDone, m.State, "move %+v", m)
	mu.Lock()
	before := len(gens)
	mu.Unlock()
	for deadline := time.Now().Add(2 * time.Minute); ; { // uploads on the new shard
		mu.Lock()
		n := len(gens)
		mu.Unlock()
		if n >= before+2 {
			break
		}
		select {
		case err := <-uploads:
			t.Fatalf("uploads stopped: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			st, _ := e.API.Status(ctx, e.Token(id), id, int64(n+1))
			t.Fatalf("no upload applied on the new shard; generation %d: %+v", n+1, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	close(stop)
	require.NoError(t, <-uploads)
	require.NoError(t, <-reads)
	for _, step := range []string{"start", "copy_products", "copy_versions", "catch_up", "freeze", "drain", "switch", "wait_routes", "unfreeze", "cleanup"} {
		_, ok := crashed.Load(step)
		require.True(t, ok, "no crash at step %s", step)
	}

	require.Equal(t, 1-from, e.ShardOf(id))
	mu.Lock()
	want, all := newest, gens
	mu.Unlock()
	e.RequireCatalog(id, want)
	for i, g := range all { // none lost, the history reads on
		require.Equal(t, int64(i+1), g, "generations %v", all)
		require.Equal(t, "applied", e.Status(id, g).State)
	}
	old := e.Stack.Stores.Shards[from].Pool()
	for _, table := range []string{"products", "consumer_versions", "retailer_state", "generations", "applied_chunks",
		"outbox", "generation_redrives", "generation_repairs", "usage_daily", "move_changes"} {
		var n int64
		require.NoError(t, old.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE retailer_id = $1", id).Scan(&n))
		require.Zero(t, n, "rows of %s left in %s on the old shard", id, table)
	}
	t.Logf("%d generations, %d storefront reads, move %+v", len(all), readCount, m)
}

// uploadRetrying reserves and PUTs a snapshot, retrying a reservation that
// meets the move's switch (429 retailer_moving).
func uploadRetrying(ctx context.Context, api *apiclient.Client, token, retailerID string, data []byte) (int64, error) {
	for {
		gen, err := api.Upload(ctx, token, retailerID, "", data)
		var ae *apiclient.APIError
		if errors.As(err, &ae) && ae.Code == "retailer_moving" {
			select {
			case <-ctx.Done():
				return 0, err
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		return gen, err
	}
}

// storefrontGeneration GETs a product and returns the generation of its ETag.
func storefrontGeneration(ctx context.Context, client *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, body)
	}
	tag := strings.Trim(resp.Header.Get("ETag"), `"`)
	g, _, _ := strings.Cut(tag, "-")
	return strconv.ParseInt(g, 10, 64)
}
