package systemtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// newReplicaEnv starts a stack whose storefront reads go to a streaming
// hot-standby replica (the test process's own primary and replica).
func newReplicaEnv(t *testing.T, o stack.Options) *env {
	t.Helper()
	primary, replica := testenv.PostgresWithReplica(t)
	o.PostgresURL, o.ReplicaURLs = primary, append(o.ReplicaURLs, replica)
	return newEnv(t, o)
}

// syncReplicas waits until the replicas have replayed every write so far.
func (e *env) syncReplicas() {
	e.T.Helper()
	require.NoError(e.T, e.Stack.Stores.WaitReplicas(systemtest.Context(e.T, 30*time.Second)))
}

// readStats sums where the stack's storefront reads went.
func (e *env) readStats() (fromReplicas, fromWriter int64) {
	for _, rs := range append([]*pgstore.ReaderSet{e.Stack.Stores.ControlReaders}, e.Stack.Stores.ShardReaders...) {
		st := rs.Stats()
		fromReplicas += st.FromReplicas
		fromWriter += st.FromWriter
	}
	return fromReplicas, fromWriter
}

// answer is a raw HTTP answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string { return fmt.Sprintf("HTTP %d %s", a.status, a.body) }

// get sends a GET with header name, value pairs.
func (e *env) get(path string, header ...string) answer {
	e.T.Helper()
	req, err := http.NewRequest(http.MethodGet, e.Stack.APIURL+path, nil)
	require.NoError(e.T, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := e.API.HTTP.Do(req)
	require.NoError(e.T, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(e.T, err)
	return answer{resp.StatusCode, resp.Header, body}
}

type page struct {
	Items     []apiclient.Product `json:"items"`
	NextAfter *string             `json:"next_after"`
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(a.body, &v), a.String())
	return v
}

func attrsOf(t *testing.T, p apiclient.Product) map[string]string {
	t.Helper()
	var m map[string]string
	require.NoError(t, json.Unmarshal(p.Attributes, &m))
	return m
}

func requireError(t *testing.T, a answer, status int, code string) {
	t.Helper()
	require.Equal(t, status, a.status, a.String())
	var body struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(a.body, &body), a.String())
	require.Equal(t, code, body.Error.Code, a.String())
	require.NotEmpty(t, body.Error.Message)
}

// Every storefront route and status code, served by a real streaming
// replica: 200 with a versioned ETag and Cache-Control, 304, 400 for bad ids
// and limits, 404 for absent and deleted products (tombstones never leak),
// keyset pages, and the bare product id through the directory (unique,
// shared -> 300, moved, deleted).
func TestStorefrontOnReplica(t *testing.T) {
	t.Parallel()
	gate := &systemtest.HeldQueue{} // holds nothing until the end
	e := newReplicaEnv(t, stack.Options{WrapDiffQueue: gate.Wrap})
	for _, id := range []string{"r1", "r2", "r3"} {
		e.Onboard(id)
	}
	c1 := fixtures.Generate("p", 150)
	c1["a/b c"] = fixtures.Row("slash and space")
	c1["shared"] = fixtures.Row("r1's")
	c1["gone"] = fixtures.Row("deleted by generation 2")
	c2 := fixtures.Catalog{"shared": fixtures.Row("r2's"), "only-r2": fixtures.Row("r2 only")}
	require.Equal(t, "applied", e.Upload("r1", c1.CSV(nil)).State)
	require.Equal(t, "applied", e.Upload("r2", c2.CSV(nil)).State)
	e.syncReplicas()
	replicaReads0, _ := e.readStats()

	// One product: 200, a versioned ETag, Cache-Control for a CDN.
	a := e.get("/v1/retailers/r1/products/p-00001")
	require.Equal(t, 200, a.status, a.String())
	p := decode[apiclient.Product](t, a)
	require.Equal(t, "r1", p.RetailerID)
	require.Equal(t, "p-00001", p.ProductID)
	require.Equal(t, int64(1), p.Generation)
	require.Equal(t, c1["p-00001"], attrsOf(t, p))
	require.False(t, p.UpdatedAt.IsZero())
	etag := a.header.Get("ETag")
	require.Regexp(t, `^"1-[0-9a-f]{24}"$`, etag)
	require.Contains(t, a.header.Get("Cache-Control"), "public, max-age=")
	require.Equal(t, "application/json", a.header.Get("Content-Type"))

	a = e.get("/v1/retailers/r1/products/" + url.PathEscape("a/b c"))
	require.Equal(t, 200, a.status, a.String())
	require.Equal(t, "a/b c", decode[apiclient.Product](t, a).ProductID)

	// If-None-Match: 304 for the tag (alone, in a list, weak), 200 for another.
	for _, inm := range []string{etag, `"0-abc", ` + etag, "W/" + etag} {
		a = e.get("/v1/retailers/r1/products/p-00001", "If-None-Match", inm)
		require.Equal(t, 304, a.status, inm)
		require.Empty(t, a.body)
		require.Equal(t, etag, a.header.Get("ETag"))
		require.NotEmpty(t, a.header.Get("Cache-Control"))
	}
	a = e.get("/v1/retailers/r1/products/p-00001", "If-None-Match", `"1-000000000000000000000000"`)
	require.Equal(t, 200, a.status)
	// A generation no replica knows (nothing of r1 newer than 1 took over)
	// is stale, not a reason to read the writer: anonymous clients cannot
	// send reads to the writers (issue 9). The replica's answer stands.
	_, writerReads0 := e.readStats()
	for _, path := range []string{"/v1/retailers/r1/products/p-00001", "/v1/retailers/r1/products", "/v1/retailers/r1/products/nope"} {
		a = e.get(path, "If-None-Match", `"99-000000000000000000000000"`)
		require.Contains(t, []int{200, 404}, a.status)
	}
	_, writerReads1 := e.readStats()
	require.Equal(t, writerReads0, writerReads1, "no writer read for a made-up generation")

	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/retailers/r1/products/nope", 404, "product_not_found"},
		{"/v1/retailers/nobody/products/p-00001", 404, "retailer_not_found"},
		{"/v1/retailers/bad!id/products/p-00001", 400, "invalid_retailer_id"},
		{"/v1/retailers/" + strings.Repeat("a", 65) + "/products/p-00001", 400, "invalid_retailer_id"},
		{"/v1/retailers/r1/products/" + strings.Repeat("x", 257), 400, "invalid_product_id"},
		{"/v1/retailers/r1/products/a%01b", 400, "invalid_product_id"},
		{"/v1/retailers/r1/products/%FF", 400, "invalid_product_id"},
		{"/v1/retailers/r1/products?limit=0", 400, "invalid_limit"},
		{"/v1/retailers/r1/products?limit=1001", 400, "invalid_limit"},
		{"/v1/retailers/r1/products?limit=abc", 400, "invalid_limit"},
		{"/v1/retailers/r1/products?limit=-5", 400, "invalid_limit"},
		{"/v1/retailers/r1/products?after=%01", 400, "invalid_product_id"},
		{"/v1/retailers/nobody/products", 404, "retailer_not_found"},
		{"/v1/retailers/bad!id/products", 400, "invalid_retailer_id"},
		{"/v1/products/nope", 404, "product_not_found"},
		{"/v1/products/a%01b", 400, "invalid_product_id"},
	} {
		requireError(t, e.get(c.path), c.status, c.code)
	}
	require.Equal(t, "public, max-age=10", e.get("/v1/retailers/r1/products/nope").header.Get("Cache-Control"))

	// Pages: default limit 100, keyset on product_id bytes, next_after null on the last.
	ids := c1.IDs()
	a = e.get("/v1/retailers/r1/products")
	require.Equal(t, 200, a.status)
	pg := decode[page](t, a)
	require.Len(t, pg.Items, 100)
	require.Equal(t, ids[0], pg.Items[0].ProductID)
	require.Equal(t, ids[99], *pg.NextAfter)
	pageTag := a.header.Get("ETag")
	require.Regexp(t, `^"1-[0-9a-f]{24}"$`, pageTag)
	require.NotEmpty(t, a.header.Get("Cache-Control"))
	require.Equal(t, 304, e.get("/v1/retailers/r1/products", "If-None-Match", pageTag).status)
	pg = decode[page](t, e.get("/v1/retailers/r1/products?after="+url.QueryEscape(*pg.NextAfter)))
	require.Len(t, pg.Items, len(ids)-100)
	require.Equal(t, ids[100], pg.Items[0].ProductID)
	require.Nil(t, pg.NextAfter)
	pg = decode[page](t, e.get("/v1/retailers/r1/products?limit=1000"))
	require.Len(t, pg.Items, len(ids))
	require.Nil(t, pg.NextAfter)
	pg = decode[page](t, e.get("/v1/retailers/r1/products?limit=1"))
	require.Len(t, pg.Items, 1)
	require.Equal(t, ids[0], *pg.NextAfter)
	a = e.get("/v1/retailers/r3/products")
	require.Equal(t, 200, a.status)
	require.JSONEq(t, `{"items": [], "next_after": null}`, string(a.body))

	// The bare product id, through the directory.
	a = e.get("/v1/products/p-00001")
	require.Equal(t, 200, a.status, a.String())
	require.Equal(t, "r1", decode[apiclient.Product](t, a).RetailerID)
	require.Equal(t, etag, a.header.Get("ETag"))
	require.Equal(t, 304, e.get("/v1/products/p-00001", "If-None-Match", etag).status)
	require.Equal(t, "r2", decode[apiclient.Product](t, e.get("/v1/products/only-r2")).RetailerID)
	require.Equal(t, "a/b c", decode[apiclient.Product](t, e.get("/v1/products/"+url.PathEscape("a/b c"))).ProductID)
	a = e.get("/v1/products/shared")
	require.Equal(t, 300, a.status, a.String())
	require.JSONEq(t, `{"candidates": [{"retailer_id": "r1", "product_id": "shared"}, {"retailer_id": "r2", "product_id": "shared"}]}`, string(a.body))
	require.NotEmpty(t, a.header.Get("Cache-Control"))

	// Generation 2: r1 deletes "gone" and hands p-00005 over to r2.
	c1b := c1.Clone()
	delete(c1b, "gone")
	delete(c1b, "p-00005")
	c2b := c2.Clone()
	c2b["p-00005"] = c1["p-00005"]
	require.Equal(t, "applied", e.Upload("r1", c1b.CSV(nil)).State)
	require.Equal(t, "applied", e.Upload("r2", c2b.CSV(nil)).State)
	e.syncReplicas()
	var tombstones int
	shard := e.Stack.Stores.Shards[e.ShardOf("r1")]
	require.NoError(t, shard.Pool().QueryRow(context.Background(),
		`SELECT count(*) FROM products WHERE retailer_id = 'r1' AND deleted`).Scan(&tombstones))
	require.Equal(t, 2, tombstones, "the deletes left tombstones on the shard")
	requireError(t, e.get("/v1/retailers/r1/products/gone"), 404, "product_not_found")
	requireError(t, e.get("/v1/retailers/r1/products/p-00005"), 404, "product_not_found")
	requireError(t, e.get("/v1/products/gone"), 404, "product_not_found")
	moved := decode[apiclient.Product](t, e.get("/v1/products/p-00005"))
	require.Equal(t, "r2", moved.RetailerID)
	require.Equal(t, int64(2), moved.Generation)
	pg = decode[page](t, e.get("/v1/retailers/r1/products?limit=1000"))
	require.Len(t, pg.Items, len(c1b))
	for _, it := range pg.Items {
		require.NotContains(t, []string{"gone", "p-00005"}, it.ProductID)
		require.Equal(t, c1b[it.ProductID], attrsOf(t, it))
	}
	// An unchanged product keeps its tag: the CDN's copy stays valid.
	require.Equal(t, 304, e.get("/v1/retailers/r1/products/p-00001", "If-None-Match", etag).status)

	require.Equal(t, 200, e.get("/healthz").status)
	replicaReads1, _ := e.readStats()
	require.Greater(t, replicaReads1-replicaReads0, int64(25), "the storefront reads were served by the replica")

	// Generation 3 of r1 took over and is applying (its chunks held back):
	// a client revalidating generation 3 (served by a fresher replica, say)
	// is answered by the writer, so it does not go back in time; 4 is still
	// made up.
	gate.Hold = func(m message.ChunkMessage) bool { return m.RetailerID == "r1" }
	c1c := c1b.Clone()
	c1c["p-00001"] = fixtures.Row("changed by 3")
	gen3, err := e.API.Upload(systemtest.Context(t, time.Minute), e.Token("r1"), "r1", "", c1c.CSV(nil))
	require.NoError(t, err)
	require.Equal(t, int64(3), gen3)
	e.WaitFor("r1", gen3, "applying", func(s apiclient.Status) bool { return s.State == "applying" })
	e.syncReplicas()
	_, writerReads0 = e.readStats()
	a = e.get("/v1/retailers/r1/products/p-00001", "If-None-Match", `"3-000000000000000000000000"`)
	require.Equal(t, 200, a.status)
	_, writerReads1 = e.readStats()
	require.Equal(t, writerReads0+1, writerReads1, "a generation in flight: the writer answers")
	a = e.get("/v1/retailers/r1/products/p-00001", "If-None-Match", `"4-000000000000000000000000"`)
	require.Equal(t, 200, a.status)
	_, writerReads2 := e.readStats()
	require.Equal(t, writerReads1, writerReads2, "generation 4 was never reserved")
	gate.Hold = nil
	require.NoError(t, gate.Release(systemtest.Context(t, time.Minute)))
	require.Equal(t, "applied", e.Wait("r1", gen3).State)
}

// deadPostgresURL is the URL of a port where nothing listens.
func deadPostgresURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "postgres://postgres@" + addr + "/postgres?sslmode=disable"
}

// Reads go to a replica that answers, skipping one that does not; with no
// replica answering they fall back to the writer. Every read succeeds.
func TestReadFallsBackToWriter(t *testing.T) {
	t.Parallel()
	want := fixtures.Generate("p", 20)
	check := func(e *env) {
		for id, attrs := range want {
			a := e.get("/v1/retailers/r1/products/" + id)
			require.Equal(t, 200, a.status, a.String())
			require.Equal(t, attrs, attrsOf(t, decode[apiclient.Product](t, a)))
		}
		require.Len(t, decode[page](t, e.get("/v1/retailers/r1/products")).Items, len(want))
		require.Equal(t, 200, e.get("/v1/products/p-00003").status)
		// Concurrent lookups share queries, which take the same way around
		// the dead replica.
		rs := e.Stack.Stores.ShardReaders[e.ShardOf("r1")]
		before := rs.Stats().LookupBatches
		var wg sync.WaitGroup
		errs := make(chan error, 32*len(want))
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id, attrs := range want {
					p, err := rs.Product(context.Background(), pgstore.AnyReader, "r1", id)
					var got map[string]string
					if err == nil && (json.Unmarshal(p.Attributes, &got) != nil || !maps.Equal(got, attrs)) {
						err = fmt.Errorf("%s: attributes %s", id, p.Attributes)
					}
					if err != nil {
						errs <- err
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		require.Greater(t, rs.Stats().LookupBatches, before, "32 concurrent readers shared queries")
	}

	// A dead replica and a live one: the live one serves, the dead one is marked down.
	e := newReplicaEnv(t, stack.Options{ReplicaURLs: []string{deadPostgresURL(t)}})
	e.Onboard("r1")
	require.Equal(t, "applied", e.Upload("r1", want.CSV(nil)).State)
	e.syncReplicas()
	check(e)
	fromReplicas, _ := e.readStats()
	require.Greater(t, fromReplicas, int64(len(want)))
	st := e.Stack.Stores.ShardReaders[e.ShardOf("r1")].Stats()
	require.Len(t, st.Replicas, 2)
	require.True(t, st.Replicas[0].Down, "the dead replica is marked down")
	require.False(t, st.Replicas[1].Down)

	// Only a dead replica: the writer serves.
	e = newEnv(t, stack.Options{ReplicaURLs: []string{deadPostgresURL(t)}})
	e.Onboard("r1")
	require.Equal(t, "applied", e.Upload("r1", want.CSV(nil)).State)
	check(e)
	fromReplicas, fromWriter := e.readStats()
	require.Zero(t, fromReplicas)
	require.Greater(t, fromWriter, int64(len(want)))
	require.Equal(t, 200, e.get("/healthz").status)
}

// Bounded staleness: a replica whose replay falls further behind the writer
// than MaxLag is skipped (reads go to the writer) until it catches up.
//
// Not parallel: it pauses the replay of the replica that the parallel tests
// of this package share (sequential tests finish before parallel ones run).
func TestLaggingReplicaSkipped(t *testing.T) {
	ctx := systemtest.Context(t, time.Minute)
	primary, replica := testenv.PostgresWithReplica(t)
	name := testenv.Name("lag")
	controlDSN, err := pgserver.CreateDatabase(ctx, primary, name+"control")
	require.NoError(t, err)
	shardDSN, err := pgserver.CreateDatabase(ctx, primary, name+"shard")
	require.NoError(t, err)
	s, err := pgstore.Open(ctx, controlDSN, []string{shardDSN}, pgstore.PoolOptions{MaxConns: 4})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.Migrate(ctx))
	u, err := url.Parse(replica)
	require.NoError(t, err)
	require.NoError(t, s.AttachReaders(nil, [][]string{{u.Host}}, pgstore.ReaderOptions{
		ProbeInterval: 50 * time.Millisecond, MaxLag: 300 * time.Millisecond, Logger: systemtest.Logger()}))
	rs := s.ShardReaders[0]
	writer := s.Shards[0].Pool()
	_, err = writer.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
		VALUES ('r1', 'x', '{"v": "1"}', '\x00', 1)`)
	require.NoError(t, err)
	require.NoError(t, s.WaitReplicas(ctx))
	value := func() string {
		p, err := rs.Product(ctx, pgstore.AnyReader, "r1", "x")
		require.NoError(t, err)
		return string(p.Attributes)
	}
	require.JSONEq(t, `{"v": "1"}`, value())
	require.Equal(t, int64(1), rs.Stats().FromReplicas)

	conn, err := pgx.Connect(ctx, replica)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, `SELECT pg_wal_replay_pause()`)
	require.NoError(t, err)
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			conn.Exec(context.Background(), `SELECT pg_wal_replay_resume()`)
		}
	})
	_, err = writer.Exec(ctx, `UPDATE products SET attributes = '{"v": "2"}', generation = 2 WHERE product_id = 'x'`)
	require.NoError(t, err)
	// Within the bound the replica still answers, with the old value...
	require.JSONEq(t, `{"v": "1"}`, value())
	// ...beyond it the probe marks it lagging and the writer answers.
	require.Eventually(t, func() bool { rs.Probe(ctx); return rs.Stats().Replicas[0].Lagging }, 10*time.Second, 20*time.Millisecond)
	before, fallbacks := rs.Stats().FromWriter, rs.Stats().Fallbacks
	require.JSONEq(t, `{"v": "2"}`, value())
	require.Equal(t, before+1, rs.Stats().FromWriter)
	require.Equal(t, fallbacks+1, rs.Stats().Fallbacks, "counted for the ReplicaFallbacks metric")

	_, err = conn.Exec(ctx, `SELECT pg_wal_replay_resume()`)
	require.NoError(t, err)
	resumed = true
	require.Eventually(t, func() bool { rs.Probe(ctx); return !rs.Stats().Replicas[0].Lagging }, 10*time.Second, 20*time.Millisecond)
	before = rs.Stats().FromReplicas
	require.JSONEq(t, `{"v": "2"}`, value())
	require.Equal(t, before+1, rs.Stats().FromReplicas)
}

// versioned is a product row whose every attribute names its version, so a
// mix of two versions within a row shows.
func versioned(v int, id string) map[string]string {
	return map[string]string{"title": fmt.Sprintf("v%d %s", v, id), "brand": fmt.Sprintf("v%d", v), "price": fmt.Sprintf("%d.00", v)}
}

// While a new generation applies, readers on the replica see each product
// either at the old or at the new value, never a mix within a row and never
// a tombstone; a product that exists throughout is never missing, and a
// full pass of keyset pages lists it exactly once, in order.
func TestReadsDuringIngestion(t *testing.T) {
	t.Parallel()
	e := newReplicaEnv(t, stack.Options{ChunkRows: 50})
	e.Onboard("r1")
	const n = 2000
	gen1, gen2 := fixtures.Catalog{}, fixtures.Catalog{}
	stable := map[string]bool{}
	for i := range n {
		id := fmt.Sprintf("p-%05d", i)
		gen1[id] = versioned(1, id)
		if i%10 != 0 { // every tenth product is deleted by generation 2
			gen2[id] = versioned(2, id)
			stable[id] = true
		}
		if i%10 == 5 { // and new ones are inserted
			nid := fmt.Sprintf("q-%05d", i)
			gen2[nid] = versioned(2, nid)
		}
	}
	columns := []string{"title", "brand", "price"}
	require.Equal(t, "applied", e.Upload("r1", gen1.CSV(columns)).State)
	e.syncReplicas()
	replicaReads0, _ := e.readStats()

	var seen [3]atomic.Int64 // reads that saw version 1, version 2
	var mixedPasses atomic.Int64
	checkRow := func(p apiclient.Product) error {
		var a map[string]string
		if err := json.Unmarshal(p.Attributes, &a); err != nil || a == nil {
			return fmt.Errorf("%s: attributes %s are not an object (a tombstone?)", p.ProductID, p.Attributes)
		}
		v := 0
		switch {
		case fmt.Sprint(a) == fmt.Sprint(versioned(1, p.ProductID)) && p.Generation == 1:
			v = 1
		case fmt.Sprint(a) == fmt.Sprint(versioned(2, p.ProductID)) && p.Generation == 2:
			v = 2
		default:
			return fmt.Errorf("%s: generation %d with attributes %v: a mix", p.ProductID, p.Generation, a)
		}
		if _, ok := gen1[p.ProductID]; !ok && v == 1 {
			return fmt.Errorf("%s: new product at version 1", p.ProductID)
		}
		if _, ok := gen2[p.ProductID]; !ok && v == 2 {
			return fmt.Errorf("%s: deleted product at version 2", p.ProductID)
		}
		seen[v].Add(1)
		return nil
	}
	pass := func() (int, error) {
		count, versions, after := map[string]int{}, map[int64]bool{}, ""
		for {
			path := "/v1/retailers/r1/products?limit=97"
			if after != "" {
				path += "&after=" + url.QueryEscape(after)
			}
			a := e.get(path)
			if a.status != 200 {
				return 0, fmt.Errorf("page after %q: %s", after, a)
			}
			var pg page
			if err := json.Unmarshal(a.body, &pg); err != nil {
				return 0, err
			}
			for _, it := range pg.Items {
				if it.ProductID <= after {
					return 0, fmt.Errorf("page after %q lists %q: out of order or repeated", after, it.ProductID)
				}
				after = it.ProductID
				count[it.ProductID]++
				versions[it.Generation] = true
				if err := checkRow(it); err != nil {
					return 0, err
				}
			}
			if pg.NextAfter == nil {
				break
			}
			if *pg.NextAfter != after {
				return 0, fmt.Errorf("next_after %q, last item %q", *pg.NextAfter, after)
			}
		}
		for id := range stable {
			if count[id] != 1 {
				return 0, fmt.Errorf("a full pass listed %s %d times", id, count[id])
			}
		}
		if len(versions) > 1 {
			mixedPasses.Add(1)
		}
		return len(count), nil
	}
	ids := append(gen1.IDs(), gen2.IDs()...)
	single := func(rng *rand.Rand) error {
		id := ids[rng.IntN(len(ids))]
		a := e.get("/v1/retailers/r1/products/" + id)
		switch {
		case a.status == 200:
			var p apiclient.Product
			if err := json.Unmarshal(a.body, &p); err != nil {
				return err
			}
			return checkRow(p)
		case a.status == 404 && !stable[id]:
			return nil
		default:
			return fmt.Errorf("product %s: %s", id, a)
		}
	}

	ctx := systemtest.Context(t, 2*time.Minute)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	var passes, singles atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for !stop.Load() {
				var err error
				if w < 2 {
					_, err = pass()
					passes.Add(1)
				} else {
					err = single(rng)
					singles.Add(1)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	gen, err := e.API.Upload(ctx, e.Token("r1"), "r1", "", gen2.CSV(columns))
	require.NoError(t, err)
	s, err := e.API.WaitSettled(ctx, e.Token("r1"), "r1", gen, nil)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, err)
	require.Equal(t, "applied", s.State)

	// Once the replica has caught up, a pass shows exactly generation 2.
	e.syncReplicas()
	seen[1].Store(0)
	got, err := pass()
	require.NoError(t, err)
	require.Equal(t, len(gen2), got)
	require.Zero(t, seen[1].Load())
	replicaReads1, _ := e.readStats()
	require.Greater(t, replicaReads1, replicaReads0)
	t.Logf("%d page passes (%d saw both generations) and %d single reads during the apply", passes.Load(), mixedPasses.Load(), singles.Load())
}
