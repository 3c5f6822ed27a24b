package metrics_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/platform/logging"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
)

func TestEMFLinesFollowTheSpecification(t *testing.T) {
	t.Parallel()
	var out metricstest.Capture
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	r := metrics.New(&out, metrics.Options{Namespace: "Catalog/test", Function: "apply", Now: func() time.Time { return at }})
	ctx := logging.WithAPIRequestID(logging.WithLambdaRequestID(context.Background(), "req-1"), "api-1")
	r.Emit(ctx, metrics.Fields{RetailerID: "acme", Generation: 7},
		metrics.Count(metrics.ChunksApplied, 1),
		metrics.Count(metrics.RowsWritten, 4999),
		metrics.Duration(metrics.PutToAppliedSeconds, 1500*time.Millisecond),
		metrics.Count(metrics.Uploads, 1).By("State", "applied"))
	require.NoError(t, out.Validate())
	lines := out.Lines()
	require.Len(t, lines, 1, "one line for values that fit together")

	var raw map[string]any
	require.NoError(t, json.Unmarshal(mustRaw(t, &out), &raw))
	aws := raw["_aws"].(map[string]any)
	require.Equal(t, float64(at.UnixMilli()), aws["Timestamp"])
	directives := aws["CloudWatchMetrics"].([]any)
	require.Len(t, directives, 2, "the plain metrics, then the State breakdown")
	plain := directives[0].(map[string]any)
	require.Equal(t, "Catalog/test", plain["Namespace"])
	require.Equal(t, []any{[]any{}}, plain["Dimensions"], "no dimension: one series for the whole system")
	require.Len(t, plain["Metrics"], 3)
	byState := directives[1].(map[string]any)
	require.Equal(t, []any{[]any{}, []any{"State"}}, byState["Dimensions"], "in total and by state")

	require.Equal(t, "applied", raw["State"])
	require.Equal(t, 4999.0, raw["RowsWritten"])
	require.Equal(t, 1.5, raw[metrics.PutToAppliedSeconds])
	require.Equal(t, "acme", raw["retailer_id"], "the retailer is a property, never a dimension")
	require.Equal(t, 7.0, raw["generation"])
	require.Equal(t, "apply", raw["function"])
	require.Equal(t, "req-1", raw["request_id"])
	require.Equal(t, "api-1", raw["api_request_id"])
	require.Equal(t, "INFO", raw["level"])
}

func mustRaw(t *testing.T, c *metricstest.Capture) []byte {
	t.Helper()
	lines := c.Lines()
	require.NotEmpty(t, lines)
	b, err := json.Marshal(lines[0])
	require.NoError(t, err)
	return b
}

func TestEmitSplitsWhatCannotShareALine(t *testing.T) {
	t.Parallel()
	var out metricstest.Capture
	r := metrics.New(&out, metrics.Options{Function: "diff"})
	r.Emit(context.Background(), metrics.Fields{},
		metrics.Count(metrics.Rejections, 1).By("Code", "malformed_csv"),
		metrics.Count(metrics.Uploads, 1).By("State", "rejected"),
		metrics.Count(metrics.Uploads, 1).By("State", "held"), // same name: another line
		metrics.Count(metrics.Rejections, 2).By("Code", "duplicate_product_id"),
		metrics.Count("level", 1),                                    // clashes with the line's own property: dropped
		metrics.Value{Name: "Bad", Value: math.NaN()},                // not a number: dropped
		metrics.Count(metrics.RowsWritten, 3).By("retailer_id", "x")) // never a dimension: dropped
	require.NoError(t, out.Validate())
	require.Len(t, out.Lines(), 2)
	require.Equal(t, 3.0, out.Sum(metrics.Rejections))
	require.Equal(t, 1.0, out.Sum(metrics.Rejections, "Code=malformed_csv"))
	require.Equal(t, 2.0, out.Sum(metrics.Uploads))
	require.Equal(t, 1.0, out.Sum(metrics.Uploads, "State=held"))
	require.Zero(t, out.Sum("Bad"))
	require.Zero(t, out.Sum(metrics.RowsWritten))
}

func TestLinesPassLambdaLogLevelFiltering(t *testing.T) {
	t.Parallel()
	var out metricstest.Capture
	metrics.New(&out, metrics.Options{Level: slog.LevelWarn}).Emit(context.Background(), metrics.Fields{}, metrics.Count(metrics.ChunksApplied, 1))
	require.Equal(t, "WARN", out.Lines()[0]["level"], "a line below the function's level would be dropped by Lambda")
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	t.Parallel()
	var r *metrics.Recorder
	r.Emit(context.Background(), metrics.Fields{}, metrics.Count(metrics.ChunksApplied, 1)) // no panic
	require.Equal(t, "", r.Function())
}

func TestValidateRefusesWhatTheSpecificationRefuses(t *testing.T) {
	t.Parallel()
	ok := `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["F"]],"Metrics":[{"Name":"M","Unit":"Count"}]}]},"F":"x","M":1}`
	require.NoError(t, metricstest.Validate([]byte(ok)))
	for name, line := range map[string]string{
		"not JSON":              `_aws`,
		"no _aws":               `{"M":1}`,
		"no timestamp":          `{"_aws":{"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":1}`,
		"timestamp in seconds":  `{"_aws":{"Timestamp":1767225600,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":1}`,
		"no directive":          `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[]},"M":1}`,
		"empty namespace":       `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":1}`,
		"no dimension set":      `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[],"Metrics":[{"Name":"M"}]}]},"M":1}`,
		"dimension not on root": `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["F"]],"Metrics":[{"Name":"M"}]}]},"M":1}`,
		"dimension not string":  `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["F"]],"Metrics":[{"Name":"M"}]}]},"F":2,"M":1}`,
		"retailer dimension":    `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[["retailer_id"]],"Metrics":[{"Name":"M"}]}]},"retailer_id":"r","M":1}`,
		"metric not on root":    `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]}}`,
		"metric not a number":   `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":"1"}`,
		"bad unit":              `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M","Unit":"Things"}]}]},"M":1}`,
		"bad resolution":        `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M","StorageResolution":5}]}]},"M":1}`,
		"extra _aws member":     `{"_aws":{"Timestamp":1767225600000,"Extra":1,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[{"Name":"M"}]}]},"M":1}`,
		"no metrics":            `{"_aws":{"Timestamp":1767225600000,"CloudWatchMetrics":[{"Namespace":"N","Dimensions":[[]],"Metrics":[]}]}}`,
	} {
		require.Error(t, metricstest.Validate([]byte(line)), name)
	}
}
