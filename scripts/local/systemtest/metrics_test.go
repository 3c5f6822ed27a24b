package systemtest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/logging"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// Every function of the pipeline writes its metrics as EMF lines that keep
// to the specification, and every log line a function writes while
// handling a request or a message carries that invocation's request id.
func TestFunctionsEmitMetricsAndRequestIDs(t *testing.T) {
	t.Parallel()
	var lines metricstest.Capture
	logs := logging.NewSyncWriter(&lines) // logs and metric lines, as on one Lambda stream
	e := newEnv(t, stack.Options{ChunkRows: 10, Metrics: logs, Logger: logging.New(logs, slog.LevelInfo)})
	e.Onboard("m1")
	first := fixtures.Generate("m", 25)
	require.Equal(t, "applied", e.Upload("m1", first.CSV(nil)).State)
	bad := e.Upload("m1", []byte("product_id,title\na,1\na,2\n"))
	require.Equal(t, "rejected", bad.State)
	// The answer's X-Request-Id names the request's log lines.
	req, err := http.NewRequest(http.MethodPost, e.Stack.APIURL+"/v1/retailers/m1/snapshots", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+e.Token("m1"))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	answered := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, answered)

	require.NoError(t, lines.Validate())
	require.Equal(t, 3.0, lines.Sum(metrics.UploadsReserved, "retailer_id=m1", "function=upload"))
	require.Equal(t, 2.0, lines.Sum(metrics.UploadsReceived, "retailer_id=m1", "function=arrival"))
	require.Equal(t, 1.0, lines.Sum(metrics.Uploads, "State=applied", "function=apply"))
	require.Equal(t, 1.0, lines.Sum(metrics.Uploads, "State=rejected", "function=diff"))
	require.Equal(t, 1.0, lines.Sum(metrics.Rejections, "Code=duplicate_product_id"))
	require.Equal(t, 25.0, lines.Sum(metrics.RowsInserted, "generation=1"))
	require.Equal(t, 3.0, lines.Sum(metrics.ChunksApplied, "retailer_id=m1"))
	require.Equal(t, 25.0, lines.Sum(metrics.RowsWritten))
	for _, l := range lines.Lines() {
		require.NotEmpty(t, l["request_id"], "metric line without a request id: %v", l)
	}

	// The functions' own log lines (not the metric lines) carry the ids too.
	sc := bufio.NewScanner(bytes.NewReader(lines.Bytes()))
	seen := map[string]bool{}
	var linesOfAnswered int
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil || l["_aws"] != nil {
			continue
		}
		switch l["msg"] {
		case "generation reserved", "diff planned", "chunk applied":
			require.NotEmpty(t, l["request_id"], "%s", sc.Text())
			seen[l["msg"].(string)] = true
			if l["msg"] == "generation reserved" {
				require.NotEmpty(t, l["api_request_id"], "%s", sc.Text())
				if l["api_request_id"] == answered {
					linesOfAnswered++
				}
			}
		}
	}
	require.Len(t, seen, 3, "lines seen: %v", seen)
	require.Equal(t, 1, linesOfAnswered, "the line of the request answered with X-Request-Id %s", answered)
}
