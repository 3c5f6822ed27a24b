package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestModelPrintsTheScaleAnswers(t *testing.T) {
	t.Parallel()
	// No token and no API: the model is computed locally.
	r := runTool(t, nil, "model", "--retailers", "100000", "--products", "20000", "--change-pct", "3", "--read-qps", "22000")
	require.Equal(t, 0, r.code, r.stderr)
	for _, want := range []string{"100,000 retailers x 20,000 products, 3% changed a day, 22,000 storefront reads/s",
		"shards: 5", "== Time to drain the overnight peak", "SQS FIFO", "shard writers", "$ per month by service",
		"CloudFront (90% hits)", "ALB in front of the same Lambda", "Fargate", "README.md Performance"} {
		require.Contains(t, r.stdout, want)
	}

	r = runTool(t, nil, "model", "--json", "--retailers", "10", "--products", "100", "--read-qps", "1")
	require.Equal(t, 0, r.code, r.stderr)
	var m struct {
		Load struct {
			RowsPerDay float64 `json:"rows_per_day"`
		} `json:"load"`
		MonthlyUSD float64 `json:"monthly_usd"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	require.Equal(t, 1000.0, m.Load.RowsPerDay)
	require.Greater(t, m.MonthlyUSD, 0.0)

	r = runTool(t, nil, "model", "--change-pct", "200")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "change-pct must be in (0, 100]")
	r = runTool(t, nil, "model", "extra")
	require.Equal(t, 1, r.code)
}
