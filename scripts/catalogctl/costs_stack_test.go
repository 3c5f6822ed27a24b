package main

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
)

// catalogctl costs fetches the report the API prices from the metered
// usage: the CSV of DESIGN 10 with the retailer's day, and the HTML page
// written to a file.
func TestCostsAgainstTheStack(t *testing.T) {
	t.Parallel()
	st, admin := startStack(t)
	vars := onboard(t, admin, "costly")
	r := runTool(t, vars, "upload", "--retailer", "costly", writeFile(t, "c.csv", fixtures.Generate("c", 50).CSV(nil)))
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, st.FlushUsage(context.Background()))

	today := time.Now().UTC().Format(usage.DateLayout)
	r = runTool(t, admin, "costs", "--from", today, "--to", today)
	require.Equal(t, 0, r.code, r.stderr)
	recs, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	require.NoError(t, err)
	require.Equal(t, costs.CSVColumns, recs[0])
	require.Len(t, recs, 2, r.stdout)
	require.Equal(t, []string{today, "costly", "1", "50", "50"}, recs[1][:5])

	out := filepath.Join(t.TempDir(), "costs.html")
	r = runTool(t, admin, "costs", "--format", "html", "--out", out, "--from", today, "--to", today)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stderr, "wrote "+out)
	page, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Contains(t, string(page), "costly")
	require.Equal(t, len(costs.ChartIDs), strings.Count(string(page), "<svg"))

	r = runTool(t, admin, "costs", "--from", "2026-13-01")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "want YYYY-MM-DD")
	r = runTool(t, vars, "costs") // a retailer's token is not the admin's
	require.Equal(t, 1, r.code)
}
