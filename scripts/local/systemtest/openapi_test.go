package systemtest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
	"github.com/retailcatalog/catalog/scripts/local/systemtest"
)

// openAPIPath is the published API document, from this package's directory.
const openAPIPath = "../../../docs/openapi.yaml"

// validatingTransport checks every answer of the API against the OpenAPI
// document (status documented for the route, body and headers valid) and
// records which statuses each documented route produced.
type validatingTransport struct {
	t      *testing.T
	apiURL *url.URL
	router routers.Router
	mu     sync.Mutex
	seen   map[string]map[int]bool // "METHOD /path/{template}" -> statuses
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || req.URL.Host != v.apiURL.Host {
		return resp, err // not the API (the presigned S3 PUT)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if resp.Header.Get("X-Request-Id") == "" {
		v.t.Errorf("%s %s -> %d: no X-Request-Id header", req.Method, req.URL.Path, resp.StatusCode)
	}

	// Route on the path as sent, still encoded, so that a product_id
	// holding %2F stays one segment.
	routed := req.Clone(context.Background())
	routed.URL.Path, routed.URL.RawPath = req.URL.EscapedPath(), ""
	route, params, err := v.router.FindRoute(routed)
	if err != nil {
		if resp.StatusCode != http.StatusNotFound {
			v.t.Errorf("%s %s answered %d but no documented route matches: %v", req.Method, req.URL.Path, resp.StatusCode, err)
		}
		return resp, nil
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: routed, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	})
	if err != nil {
		v.t.Errorf("%s %s -> %d %s: does not match docs/openapi.yaml: %v", req.Method, req.URL.Path, resp.StatusCode, body, err)
	}
	key := route.Method + " " + route.Path
	v.mu.Lock()
	if v.seen[key] == nil {
		v.seen[key] = map[int]bool{}
	}
	v.seen[key][resp.StatusCode] = true
	v.mu.Unlock()
	return resp, nil
}

// The OpenAPI document lists exactly the routes the server registers, and
// real answers of every route (success and error statuses, on a stack
// whose storefront reads from a replica) validate against it.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(openAPIPath)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(loader.Context))

	e := newReplicaEnv(t, stack.Options{ReservationsPerHour: 5})
	registered := map[string]bool{}
	for _, route := range append(append(append(e.Stack.Upload.Routes(), e.Stack.Control.Routes()...), e.Stack.Read.Routes()...), e.Stack.Ops.Routes()...) {
		registered[route] = true
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented[method+" "+path] = true
		}
	}
	require.Equal(t, registered, documented, "routes registered (upload, read and ops Handler.Routes) vs documented (docs/openapi.yaml)")

	doc.Servers = nil // match any host: the test API listens on a random port
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)
	apiURL, err := url.Parse(e.Stack.APIURL)
	require.NoError(t, err)
	v := &validatingTransport{t: t, apiURL: apiURL, router: router, seen: map[string]map[int]bool{}}
	e.API.HTTP.Transport = v
	ctx := context.Background()
	api := e.API

	// admin
	tok1 := e.Onboard("r1")
	e.Onboard("r2")
	e.Onboard("r3")
	_, err = api.CreateRetailer(ctx, "", "x")
	requireStatus(t, err, 401)
	_, err = api.CreateRetailer(ctx, tok1, "x")
	requireStatus(t, err, 403)
	_, err = api.CreateRetailer(ctx, e.Stack.AdminToken, "r1")
	requireStatus(t, err, 409)
	_, err = api.CreateRetailer(ctx, e.Stack.AdminToken, "bad id!")
	requireStatus(t, err, 400)

	// retailer
	_, err = api.Reserve(ctx, tok1, "r1", "xml")
	requireStatus(t, err, 400)
	_, err = api.Reserve(ctx, e.Token("r2"), "r1", "")
	requireStatus(t, err, 403)
	c1 := fixtures.Generate("p", 30)
	c1["shared"] = fixtures.Row("r1's")
	require.Equal(t, "applied", e.Upload("r1", c1.CSV(nil)).State)
	require.Equal(t, "applied", e.Upload("r2", fixtures.Catalog{"shared": fixtures.Row("r2's")}.JSONL()).State)
	_, err = api.List(ctx, tok1, "r1", 10)
	require.NoError(t, err)
	_, err = api.List(ctx, "", "r1", 10)
	requireStatus(t, err, 401)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots?limit=0", tok1, nil, nil), 400)
	var page struct {
		Items      []struct{ Generation int64 }
		NextBefore *int64 `json:"next_before"`
	}
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots?limit=1&before=2", tok1, nil, &page))
	require.Len(t, page.Items, 1)
	require.Nil(t, page.NextBefore)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots?before=0", tok1, nil, nil), 400)
	_, err = api.Status(ctx, tok1, "r1", 99)
	requireStatus(t, err, 404)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/snapshots/abc", tok1, nil, nil), 400)
	_, err = api.Confirm(ctx, tok1, "r1", 1)
	requireStatus(t, err, 409)
	require.NoError(t, api.Problems(ctx, tok1, "r1", 1, io.Discard)) // read, no problem: 200 and empty
	badGen, err := api.Upload(ctx, tok1, "r1", "", []byte("product_id,title\nx,1,2\n"))
	require.NoError(t, err)
	require.Equal(t, "rejected", e.Wait("r1", badGen).State)
	require.NoError(t, api.Problems(ctx, tok1, "r1", badGen, io.Discard))
	requireStatus(t, api.Problems(ctx, tok1, "r1", 99, io.Discard), 404)
	slot, err := api.Reserve(ctx, tok1, "r1", "")
	require.NoError(t, err)
	requireStatus(t, api.Problems(ctx, tok1, "r1", slot.Generation, io.Discard), 409) // not read yet
	requireStatus(t, api.Problems(ctx, e.Token("r2"), "r1", badGen, io.Discard), 403)
	held := e.Upload("r3", []byte("product_id,title\n")) // empty: held (I8)
	require.Equal(t, "held", held.State)
	_, err = api.Confirm(ctx, e.Token("r3"), "r3", held.Generation)
	require.NoError(t, err)
	e.WaitFor("r3", held.Generation, "applied", func(s apiclient.Status) bool { return s.State == "applied" })
	back, err := api.Rollback(ctx, e.Token("r3"), "r3", held.Generation)
	require.NoError(t, err)
	e.Wait("r3", back.Generation)
	_, err = api.Rollback(ctx, e.Token("r3"), "r3", 99)
	requireStatus(t, err, 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/retailers/r3/rollback", e.Token("r3"), map[string]any{"to_generation": "x"}, nil), 400)
	// dry runs and plans (DESIGN 13)
	slot, err = api.ReserveDryRun(ctx, tok1, "r1", "csv")
	require.NoError(t, err)
	require.NoError(t, api.Put(ctx, slot, c1.CSV(nil)))
	require.Equal(t, "previewed", e.Wait("r1", slot.Generation).State)
	_, err = api.Plan(ctx, tok1, "r1", slot.Generation, "", 10)
	require.NoError(t, err)
	_, err = api.Plan(ctx, e.Token("r3"), "r3", held.Generation, "", 0)
	require.NoError(t, err, "an applied generation that was held keeps its plan")
	_, err = api.Plan(ctx, tok1, "r1", 1, "", 0)
	require.NoError(t, err, "an applied generation has its plan")
	awaiting, err := api.Reserve(ctx, tok1, "r1", "")
	require.NoError(t, err)
	_, err = api.Plan(ctx, tok1, "r1", awaiting.Generation, "", 0)
	requireStatus(t, err, 409)
	requireStatus(t, api.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/retailers/r1/snapshots/%d/plan?limit=0", slot.Generation), tok1, nil, nil), 400)

	// settings, tokens, limits, offboarding
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/settings", tok1, nil, nil))
	require.NoError(t, api.Do(ctx, http.MethodPut, "/v1/retailers/r1/settings", tok1, map[string]any{"hold_update_pct": 80}, nil))
	requireStatus(t, api.Do(ctx, http.MethodPut, "/v1/retailers/r1/settings", tok1, map[string]any{"hold_delete_pct": 101}, nil), 400)
	tok4 := e.Onboard("r4")
	for i := 0; ; i++ {
		if _, err := api.Reserve(ctx, tok4, "r4", ""); err != nil {
			requireStatus(t, err, 429)
			break
		}
		require.Less(t, i, 5)
	}
	newTok, err := api.RotateToken(ctx, tok4, "r4")
	require.NoError(t, err)
	_, err = api.RotateToken(ctx, tok4, "r4")
	requireStatus(t, err, 401)
	_, err = api.RecoverToken(ctx, newTok, "r4")
	requireStatus(t, err, 403)
	_, err = api.RecoverToken(ctx, e.Stack.AdminToken, "r4")
	require.NoError(t, err)
	_, err = api.Offboard(ctx, e.Stack.AdminToken, "r4")
	require.NoError(t, err)
	_, err = api.Offboard(ctx, e.Stack.AdminToken, "nobody")
	requireStatus(t, err, 404)
	// webhook
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/webhook", tok1, nil, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodPut, "/v1/retailers/r1/webhook", tok1,
		map[string]any{"url": "http://169.254.169.254/", "secret": "0123456789abcdef"}, nil), 400)
	require.NoError(t, api.Do(ctx, http.MethodPut, "/v1/retailers/r1/webhook", tok1,
		map[string]any{"url": "http://127.0.0.1:9/hook", "secret": "0123456789abcdef"}, nil))
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/retailers/r1/webhook", tok1, nil, nil))
	require.NoError(t, api.Do(ctx, http.MethodDelete, "/v1/retailers/r1/webhook", tok1, nil, nil))
	// dead-letter queues and replay (DESIGN 8)
	root := e.Stack.AdminToken
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq", root, nil, nil))
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq", "", nil, nil), 401)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq", tok1, nil, nil), 403)
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq/webhooks?limit=5", root, nil, nil))
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq/nope", root, nil, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq/webhooks?limit=0", root, nil, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq/webhooks", tok1, nil, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/dlq/webhooks", "", nil, nil), 401)
	require.NoError(t, api.Do(ctx, http.MethodPost, "/v1/admin/dlq/analytics/redrive", root, map[string]any{"limit": 10}, nil))
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/dlq/analytics/redrive", root, map[string]any{"limit": 0}, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/dlq/nope/redrive", root, nil, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/dlq/analytics/redrive", tok1, nil, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/dlq/analytics/redrive", "", nil, nil), 401)
	since := map[string]string{"since": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}
	require.NoError(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/replay", root, since, nil))
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/nobody/replay", root, since, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/replay", root, map[string]string{"since": "yesterday"}, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/replay", tok1, since, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/replay", "", since, nil), 401)
	// parked change events (DESIGN 8, "Bounds"): one of the replayed events
	// parked as the relay parks an event SNS refuses.
	shard, err := e.Stack.Stores.RetailerShard(ctx, "r1")
	require.NoError(t, err)
	claim, err := e.Stack.Stores.ClaimOutbox(ctx, shard, catalog.OutboxFilter{RetailerID: "r1"}, 1, time.Minute)
	require.NoError(t, err)
	for _, ev := range claim.Entries {
		_, _, err := e.Stack.Stores.SettleOutbox(ctx, shard, claim.Token, catalog.OutboxSettlement{
			Failed: []catalog.OutboxFailure{{ID: ev.ID, Error: "sns refused the message: InvalidParameter", Counted: true, Park: true}}})
		require.NoError(t, err)
	}
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked?retailer_id=r1&limit=5", root, nil, nil))
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked", root, nil, nil))
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked?retailer_id=nobody", root, nil, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked?limit=0", root, nil, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked", tok1, nil, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/outbox/parked", "", nil, nil), 401)
	require.NoError(t, api.Do(ctx, http.MethodPost, "/v1/admin/outbox/redrive", root, map[string]any{"retailer_id": "r1"}, nil))
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/outbox/redrive", root, map[string]any{"limit": 0}, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/outbox/redrive", root, map[string]any{"retailer_id": "nobody"}, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/outbox/redrive", tok1, nil, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/outbox/redrive", "", nil, nil), 401)
	e.syncReplicas()

	// operations
	admin := e.Stack.AdminToken
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/retailers/r1/why?product_id=p-00001", admin, nil, nil))
	require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/retailers/r3/why", admin, nil, nil))
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/retailers/r1/why", tok1, nil, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/retailers/r1/why", "", nil, nil), 401)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/retailers/nobody/why", admin, nil, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/retailers/r1/why?product_id=", admin, nil, nil), 400)
	run, err := api.Reconcile(ctx, admin, "r1", false)
	require.NoError(t, err)
	_, err = api.WaitReconciled(systemtest.Context(t, time.Minute), admin, run)
	require.NoError(t, err)
	_, err = api.Reconcile(ctx, admin, "nobody", false)
	requireStatus(t, err, 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/reconcile", admin, map[string]any{"retailer_id": "bad id!"}, nil), 400)
	_, err = api.Reconcile(ctx, tok1, "", false)
	requireStatus(t, err, 403)
	_, err = api.ReconcileReport(ctx, admin, "rc-0000000000000000")
	requireStatus(t, err, 404)
	_, err = api.ReconcileReport(ctx, admin, "no-such-run")
	requireStatus(t, err, 400)
	_, err = api.ReconcileReport(ctx, "", run)
	requireStatus(t, err, 401)
	_, err = api.Collect(ctx, admin, "r1")
	require.NoError(t, err)
	_, err = api.Collect(ctx, admin, "")
	require.NoError(t, err)
	_, err = api.Collect(ctx, admin, "nobody")
	requireStatus(t, err, 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/gc", admin, map[string]any{"retailer_id": "bad id!"}, nil), 400)
	_, err = api.Collect(ctx, tok1, "")
	requireStatus(t, err, 403)
	_, err = api.Collect(ctx, "", "")
	requireStatus(t, err, 401)

	// storefront
	a := e.get("/v1/retailers/r1/products/p-00001")
	require.Equal(t, 200, a.status)
	require.Equal(t, 304, e.get("/v1/retailers/r1/products/p-00001", "If-None-Match", a.header.Get("ETag")).status)
	require.Equal(t, 400, e.get("/v1/retailers/r1/products/a%01").status)
	require.Equal(t, 404, e.get("/v1/retailers/r1/products/nope").status)
	a = e.get("/v1/retailers/r1/products?limit=7")
	require.Equal(t, 200, a.status)
	require.Equal(t, 304, e.get("/v1/retailers/r1/products?limit=7", "If-None-Match", a.header.Get("ETag")).status)
	require.Equal(t, 400, e.get("/v1/retailers/r1/products?limit=1001").status)
	require.Equal(t, 404, e.get("/v1/retailers/nobody/products").status)
	a = e.get("/v1/products/p-00002")
	require.Equal(t, 200, a.status)
	require.Equal(t, 304, e.get("/v1/products/p-00002", "If-None-Match", a.header.Get("ETag")).status)
	require.Equal(t, 300, e.get("/v1/products/shared").status)
	require.Equal(t, 404, e.get("/v1/products/nope").status)
	require.Equal(t, 400, e.get("/v1/products/%FF").status)
	require.Equal(t, 200, e.post("/v1/retailers/r1/products/batch-get", `{"product_ids": ["p-00001", "nope", "p-00002"]}`).status)
	require.Equal(t, 400, e.post("/v1/retailers/r1/products/batch-get", `{"product_ids": []}`).status)
	require.Equal(t, 413, e.post("/v1/retailers/r1/products/batch-get", `{"product_ids": ["`+strings.Repeat("x", 130<<10)+`"]}`).status)
	require.Equal(t, 200, e.get("/healthz").status)
	require.Equal(t, 404, e.get("/v1/nothing").status)

	// costs
	require.NoError(t, e.Stack.FlushUsage(ctx))
	today := time.Now().UTC().Format("2006-01-02")
	for _, format := range []string{"", "json", "csv", "html"} {
		require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/costs?from="+today+"&to="+today+"&format="+format, e.Stack.AdminToken, nil, nil))
	}
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/costs?from="+today+"&to=yesterday", e.Stack.AdminToken, nil, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/costs?from="+today+"&to="+today, "", nil, nil), 401)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/costs?from="+today+"&to="+today, tok1, nil, nil), 403)

	// moves between shards (DESIGN 14), last: r1 changes shard
	from := e.ShardOf("r1")
	to := 1 - from
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/nobody/move", admin, map[string]int{"to_shard": to}, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/move", admin, map[string]int{"to_shard": 9}, nil), 400)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/move", admin, map[string]int{"to_shard": from}, nil), 409)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/move", tok1, map[string]int{"to_shard": to}, nil), 403)
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/move", "", map[string]int{"to_shard": to}, nil), 401)
	var started struct {
		MoveID string `json:"move_id"`
	}
	require.NoError(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/move", admin, map[string]int{"to_shard": to}, &started))
	requireStatus(t, api.Do(ctx, http.MethodPost, "/v1/admin/retailers/r1/move", admin, map[string]int{"to_shard": to}, nil), 409)
	moveCtx := systemtest.Context(t, time.Minute)
	for {
		var m catalog.Move
		require.NoError(t, api.Do(ctx, http.MethodGet, "/v1/admin/moves/"+started.MoveID, admin, nil, &m))
		if m.State == catalog.MoveDone {
			break
		}
		require.Equal(t, "", m.Error)
		select {
		case <-moveCtx.Done():
			t.Fatalf("move %s not done: %+v", started.MoveID, m)
		case <-time.After(200 * time.Millisecond):
		}
	}
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/moves/mv_000000000000000000000000", admin, nil, nil), 404)
	requireStatus(t, api.Do(ctx, http.MethodGet, "/v1/admin/moves/"+started.MoveID, tok1, nil, nil), 403)
	require.Equal(t, 200, e.get("/v1/retailers/r1/products/p-00002").status)

	v.mu.Lock()
	defer v.mu.Unlock()
	var summary []string
	for route := range registered {
		require.NotEmpty(t, v.seen[route], "no answer of %s was validated", route)
		var statuses []string
		for s := range v.seen[route] {
			statuses = append(statuses, http.StatusText(s))
		}
		sort.Strings(statuses)
		summary = append(summary, route+": "+strings.Join(statuses, ", "))
	}
	sort.Strings(summary)
	t.Logf("validated:\n%s", strings.Join(summary, "\n"))
}
