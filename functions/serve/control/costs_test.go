package control_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"
	"github.com/retailcatalog/catalog/functions/serve/control"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// reportStore keeps what the route stores and links to it.
type reportStore struct{ keys []string }

func (s *reportStore) Put(ctx context.Context, key string, body []byte) error {
	s.keys = append(s.keys, key)
	return nil
}

func (s *reportStore) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	return "https://bucket.example/" + key + "?signed", nil
}

func costsFixture(t *testing.T, reports control.ReportStore, records int) (*control.Handler, string) {
	store := pgstoretest.New(t)
	today := time.Now().UTC().Format(usage.DateLayout)
	var days []usage.DayUsage
	for i := range records {
		days = append(days, usage.DayUsage{Date: today, RetailerID: fmt.Sprintf("r%06d", i), Usage: usage.Usage{Reads: int64(i + 1)}})
	}
	require.NoError(t, store.AddUsage(context.Background(), days))
	h := control.New(control.Config{AdminToken: admin, Costs: &control.CostsConfig{
		Usage: store, Pricer: costs.DefaultPricer(), Deployment: costs.DefaultDeployment(), ReadsNote: "reads note", Reports: reports,
		MaxInlineBytes: 64 << 10,
	}}, store, inmem.NewBlobs(), slog.New(slog.DiscardHandler))
	return h, today
}

func get(h http.Handler, path, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestCostsRoute(t *testing.T) {
	t.Parallel()
	h, today := costsFixture(t, nil, 3)
	q := "/v1/admin/costs?from=" + today + "&to=" + today
	for format, ctype := range map[string]string{"": "application/json", "json": "application/json", "csv": "text/csv", "html": "text/html"} {
		w := get(h, q+"&format="+format, admin)
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", format, w.Body)
		require.True(t, strings.HasPrefix(w.Header().Get("Content-Type"), ctype), "%s: %s", format, w.Header().Get("Content-Type"))
		require.Contains(t, w.Body.String(), "r000002")
	}
	require.True(t, strings.HasPrefix(get(h, q+"&format=csv", admin).Body.String(), strings.Join(costs.CSVColumns, ",")+"\n"))
	for path, code := range map[string]int{
		"/v1/admin/costs?to=" + today:                      400, // from missing
		"/v1/admin/costs?from=2026-02-30&to=" + today:      400,
		"/v1/admin/costs?from=" + today + "&to=2020-01-01": 400,
		"/v1/admin/costs?from=2020-01-01&to=" + today:      400, // over MaxReportDays
		q + "&format=xml":                                  400,
	} {
		w := get(h, path, admin)
		require.Equal(t, code, w.Code, "%s: %s", path, w.Body)
	}
	require.Equal(t, http.StatusUnauthorized, get(h, q, "").Code)
	require.Equal(t, http.StatusUnauthorized, get(h, q, "wrong").Code)

	unconfigured := control.New(control.Config{AdminToken: admin}, pgstoretest.New(t), inmem.NewBlobs(), slog.New(slog.DiscardHandler))
	require.Equal(t, http.StatusServiceUnavailable, get(unconfigured, q, admin).Code)
}

// A report over what an API answer may hold is kept and linked (303), or
// refused (413) when there is nowhere to keep it.
func TestLargeCostReports(t *testing.T) {
	t.Parallel()
	store := &reportStore{}
	h, today := costsFixture(t, store, 2000) // ~200 KB of CSV, over the 64 KB of this test
	q := "/v1/admin/costs?format=csv&from=" + today + "&to=" + today
	w := get(h, q, admin)
	require.Equal(t, http.StatusSeeOther, w.Code, "%d bytes", w.Body.Len())
	require.Len(t, store.keys, 1)
	require.True(t, strings.HasPrefix(store.keys[0], control.ReportPrefix+today+"_"+today+"_"), store.keys[0])
	require.True(t, strings.HasSuffix(store.keys[0], ".csv"))
	require.Equal(t, "https://bucket.example/"+store.keys[0]+"?signed", w.Header().Get("Location"))

	h, _ = costsFixture(t, nil, 2000)
	w = get(h, q, admin)
	require.Equal(t, http.StatusRequestEntityTooLarge, w.Code, "%d bytes", w.Body.Len())
	require.Contains(t, w.Body.String(), "report_too_large")
}
