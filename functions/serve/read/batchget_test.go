package read_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/finance/usage"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/serve/read"
)

// memCatalog is a read.Store over products in memory (unit level: the
// query itself is pgstore's TestProductsByIDInTheOrderAsked), counting
// the batch queries it answers.
type memCatalog struct {
	mu       sync.Mutex
	products map[[2]string]catalog.Product
	batches  int
	delay    time.Duration // each product lookup takes this long
}

func (m *memCatalog) known(retailerID string) bool {
	for k := range m.products {
		if k[0] == retailerID {
			return true
		}
	}
	return false
}

func (m *memCatalog) Product(_ context.Context, retailerID, productID string, _ bool) (catalog.Product, error) {
	time.Sleep(m.delay)
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.products[[2]string{retailerID, productID}]; ok {
		return p, nil
	}
	return catalog.Product{}, catalog.Errorf(catalog.ErrNotFound, "product_not_found", "no product %q", productID)
}

func (m *memCatalog) ProductsByID(_ context.Context, retailerID string, ids []string, _ bool) ([]catalog.Product, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.batches++
	if !m.known(retailerID) {
		return nil, catalog.Errorf(catalog.ErrNotFound, "retailer_not_found", "retailer %q not found", retailerID)
	}
	var out []catalog.Product
	for _, id := range ids {
		if p, ok := m.products[[2]string{retailerID, id}]; ok {
			out = append(out, p)
		}
	}
	return out, nil
}

func (m *memCatalog) Products(context.Context, string, string, int, int, bool) ([]catalog.Product, error) {
	return nil, nil
}
func (m *memCatalog) Replicated(context.Context, string) (bool, error) { return false, nil }
func (m *memCatalog) KnownGenerations(context.Context, string) (int64, int64, error) {
	return 0, 0, nil
}
func (m *memCatalog) DirectoryRetailers(context.Context, string, int) ([]string, error) {
	return nil, nil
}

func newMemCatalog(attrs func(i int) string, ids ...string) *memCatalog {
	m := &memCatalog{products: map[[2]string]catalog.Product{}}
	at := time.Date(2026, 12, 2, 4, 5, 6, 789000, time.UTC)
	for i, id := range ids {
		m.products[[2]string{"r1", id}] = catalog.Product{RetailerID: "r1", ProductID: id,
			Attributes: []byte(attrs(i)), Generation: int64(3 + i%2), UpdatedAt: at}
	}
	return m
}

// usageStore keeps what a meter writes.
type usageStore struct {
	mu sync.Mutex
	by map[string]usage.Usage
}

func (s *usageStore) AddUsage(_ context.Context, records []usage.DayUsage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range records {
		u := s.by[r.RetailerID]
		u.Add(r.Usage)
		s.by[r.RetailerID] = u
	}
	return nil
}

func batchGet(t *testing.T, h http.Handler, retailerID, body string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/retailers/"+retailerID+"/products/batch-get", strings.NewReader(body)))
	return rec
}

func idsBody(ids ...string) string {
	b, _ := json.Marshal(read.BatchGet{ProductIDs: ids})
	return string(b)
}

// A batch-get answers the live products in the order asked, each exactly
// as the single-product route answers it, and the others as missing in the
// order asked; a repeated id once; in one store query; metered as one read
// per id answered; an unknown retailer has every id missing, unmetered.
func TestBatchGetAnswersInTheOrderAsked(t *testing.T) {
	t.Parallel()
	store := newMemCatalog(func(i int) string { return fmt.Sprintf(`{"i": %d, "name": "x \"%d\""}`, i, i) },
		"a", "b/c", "é 名", `q"uote`, "z")
	meterStore := &usageStore{by: map[string]usage.Usage{}}
	meter := metering.New(meterStore, metering.Options{Function: "read"})
	h := metering.HTTP(meter, read.New(store, slog.New(slog.DiscardHandler), nil))

	rec := batchGet(t, h, "r1", idsBody("z", "gone", "b/c", "z", `q"uote`, "gone", "é 名", "nope"))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Empty(t, rec.Header().Get("ETag"))
	var got struct {
		Items   []json.RawMessage `json:"items"`
		Missing []string          `json:"missing"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.Equal(t, []string{"gone", "nope"}, got.Missing)
	want := []string{"z", "b/c", `q"uote`, "é 名"}
	require.Len(t, got.Items, len(want))
	for i, id := range want {
		single := httptest.NewRecorder()
		h.ServeHTTP(single, httptest.NewRequest(http.MethodGet, "/v1/retailers/r1/products/"+url.PathEscape(id), nil))
		require.Equal(t, http.StatusOK, single.Code)
		require.Equal(t, strings.TrimSuffix(single.Body.String(), "\n"), string(got.Items[i]), "item %d as the single route answers it", i)
	}
	require.Equal(t, 1, store.batches, "one query for the batch")
	require.NoError(t, meter.Flush(context.Background()))
	// 6 distinct ids + 4 single GETs.
	require.Equal(t, int64(6+4), meterStore.by["r1"].Reads)
	require.Equal(t, int64(5), meterStore.by["r1"].Functions["read"].Invocations)

	rec = batchGet(t, h, "unknown", idsBody("a", "b"))
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"items": [], "missing": ["a", "b"]}`, rec.Body.String())
	require.NoError(t, meter.Flush(context.Background()))
	require.NotContains(t, meterStore.by, "unknown")

	rec = batchGet(t, h, "r1", idsBody("gone"))
	require.JSONEq(t, `{"items": [], "missing": ["gone"]}`, rec.Body.String())
}

// What the route refuses: none or over 100 ids (counted as given), an id
// that breaks the product_id rules, a body that is not the contract's, a
// body over its bound, a bad retailer id, and an answer over the page's
// bound; each in the house's error shape, without reaching the store
// (but the last).
func TestBatchGetRefusals(t *testing.T) {
	t.Parallel()
	store := newMemCatalog(func(int) string { return `{"big": "` + strings.Repeat("x", 60_000) + `"}` },
		func() []string {
			var ids []string
			for i := range 100 {
				ids = append(ids, fmt.Sprintf("p%03d", i))
			}
			return ids
		}()...)
	h := read.New(store, slog.New(slog.DiscardHandler), nil)
	var hundred, hundredOne []string
	for range 50 {
		hundred = append(hundred, "p001", "p002")
	}
	hundredOne = append(append(hundredOne, hundred...), "p003")
	cases := []struct {
		name, retailer, body string
		status               int
		code                 string
	}{
		{"no body", "r1", "", 400, "invalid_product_ids"},
		{"no ids", "r1", `{"product_ids": []}`, 400, "invalid_product_ids"},
		{"null ids", "r1", `{"product_ids": null}`, 400, "invalid_product_ids"},
		{"101 ids, duplicates counted", "r1", idsBody(hundredOne...), 400, "invalid_product_ids"},
		{"empty id", "r1", idsBody("a", ""), 400, "invalid_product_id"},
		{"control character", "r1", idsBody("a\x01"), 400, "invalid_product_id"},
		{"id over 256 bytes", "r1", idsBody(strings.Repeat("x", 257)), 400, "invalid_product_id"},
		{"unknown field", "r1", `{"product_ids": ["a"], "ids": []}`, 400, "invalid_body"},
		{"not an array of strings", "r1", `{"product_ids": [1]}`, 400, "invalid_body"},
		{"trailing data", "r1", `{"product_ids": ["a"]} {}`, 400, "invalid_body"},
		{"body over 128 KiB", "r1", `{"product_ids": ["` + strings.Repeat("x", 130<<10) + `"]}`, 413, "body_too_large"},
		{"bad retailer id", "r%20x", idsBody("a"), 400, "invalid_retailer_id"},
	}
	for _, c := range cases {
		rec := batchGet(t, h, c.retailer, c.body)
		require.Equal(t, c.status, rec.Code, "%s: %s", c.name, rec.Body.String())
		var body httpapi.ErrorBody
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body), c.name)
		require.Equal(t, c.code, body.Error.Code, c.name)
	}
	require.Zero(t, store.batches, "refused before any query")

	rec := batchGet(t, h, "r1", idsBody(hundred...))
	require.Equal(t, http.StatusOK, rec.Code, "100 ids as given, duplicates included, are accepted")
	var all []string
	for i := range 100 {
		all = append(all, fmt.Sprintf("p%03d", i))
	}
	rec = batchGet(t, h, "r1", idsBody(all...))
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, "100 products of 60 KB pass the answer's bound")
	var body httpapi.ErrorBody
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
	require.Equal(t, "batch_too_large", body.Error.Code)
	rec = batchGet(t, h, "r1", idsBody(all[:80]...))
	require.Equal(t, http.StatusOK, rec.Code, "80 of them fit")
	require.LessOrEqual(t, rec.Body.Len(), read.MaxBatchAnswerBytes)
}
