package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCDKJSONDefaults: the parameters in cdk.json are the defaults of
// DefaultParams, and cdk.json runs the build script and then this app.
func TestCDKJSONDefaults(t *testing.T) {
	ctx := cdkJSONContext(t)
	got, err := ParamsFromLookup(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := DefaultParams(); !reflect.DeepEqual(got, want) {
		t.Errorf("cdk.json parameters\n got %+v\nwant %+v", got, want)
	}
	for _, key := range []string{CtxShards, CtxReadersPerShard, CtxLargeThresholdRows, CtxApplySmallConcurrency,
		CtxApplyLargeConcurrency, CtxInflightCap, CtxDiffMaxConcurrency, CtxReadReservedConcurrency, CtxReadMemoryMB,
		CtxMinACU, CtxMaxACU, CtxRDSProxy, CtxMaxUploadBytes, CtxUploadRetentionDays, CtxAPIRateLimit, CtxAPIBurstLimit,
		CtxAlarmEmail, CtxStackName, CtxLambdaAssetDir, CtxNag} {
		if _, ok := ctx[key]; !ok {
			t.Errorf("cdk.json does not document the context key %q", key)
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`go run ./scripts/buildlambdas -out dist/lambda`, `go run ./infra`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("cdk.json app does not run %q", want)
		}
	}
}

func TestParamsFromLookup(t *testing.T) {
	// The CLI passes -c values as strings.
	ctx := map[string]any{
		CtxShards: "4", CtxReadersPerShard: "0", CtxLargeThresholdRows: "250000", CtxApplySmallConcurrency: "30",
		CtxApplyLargeConcurrency: 40.0, CtxInflightCap: "10", CtxMinACU: "0", CtxMaxACU: "32", CtxRDSProxy: "false",
		CtxMaxUploadBytes: "1073741824", CtxAlarmEmail: " ops@example.com ", CtxReadReservedConcurrency: "0",
	}
	p, err := ParamsFromLookup(func(k string) any { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultParams()
	want.Shards, want.ReadersPerShard, want.LargeThresholdRows = 4, 0, 250000
	want.ApplySmallConcurrency, want.ApplyLargeConcurrency, want.InflightCap = 30, 40, 10
	want.MinACU, want.MaxACU, want.RDSProxy, want.MaxUploadBytes = 0, 32, false, 1<<30
	want.AlarmEmail, want.ReadReservedConcurrency = "ops@example.com", 0
	if !reflect.DeepEqual(p, want) {
		t.Errorf("\n got %+v\nwant %+v", p, want)
	}
}

func TestParamsRejected(t *testing.T) {
	for _, tc := range []struct {
		ctx  map[string]any
		want string
	}{
		{map[string]any{CtxShards: "0"}, CtxShards},
		{map[string]any{CtxShards: MaxShards + 1}, CtxShards},
		{map[string]any{CtxShards: "two"}, CtxShards},
		{map[string]any{CtxShards: 2.5}, CtxShards},
		{map[string]any{CtxReadersPerShard: 16}, CtxReadersPerShard},
		{map[string]any{CtxApplySmallConcurrency: 1}, CtxApplySmallConcurrency},
		{map[string]any{CtxApplyLargeConcurrency: 1001}, CtxApplyLargeConcurrency},
		{map[string]any{CtxDiffMaxConcurrency: 1}, CtxDiffMaxConcurrency},
		{map[string]any{CtxInflightCap: 0}, CtxInflightCap},
		{map[string]any{CtxMinACU: 0.3}, CtxMinACU},
		{map[string]any{CtxMinACU: 8, CtxMaxACU: 4}, CtxMaxACU},
		{map[string]any{CtxRDSProxy: "maybe"}, CtxRDSProxy},
		{map[string]any{CtxMaxUploadBytes: 6 << 30}, CtxMaxUploadBytes},
		{map[string]any{CtxLargeThresholdRows: 0}, CtxLargeThresholdRows},
		{map[string]any{CtxAlarmEmail: 3}, CtxAlarmEmail},
		{map[string]any{CtxUploadRetentionDays: 7}, "dead-letter queue"},
		// 3 x 400 environments x 2 connections cannot fit 2 shard writers
		// of 16 ACU.
		{map[string]any{CtxApplySmallConcurrency: 400, CtxApplyLargeConcurrency: 400, CtxDiffMaxConcurrency: 400}, "connections per shard writer"},
	} {
		_, err := ParamsFromLookup(func(k string) any { return tc.ctx[k] })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: want an error about %q, got %v", tc.ctx, tc.want, err)
		}
	}
}

func TestConnectionBudget(t *testing.T) {
	for _, tc := range []struct {
		min, max float64
		want     int
	}{
		{0.5, 1, 225},   // 2 GiB / 9531392
		{0.5, 16, 2000}, // capped at 2000 below 1 ACU minimum
		{1, 16, 3604},   // 32 GiB / 9531392
		{2, 64, 5000},   // the ceiling
		{0, 256, 2000},  // auto-pause minimum
	} {
		if got := EstimatedMaxConnections(tc.min, tc.max); got != tc.want {
			t.Errorf("EstimatedMaxConnections(%v, %v) = %d, want %d", tc.min, tc.max, got, tc.want)
		}
	}
	p := DefaultParams()
	if need, budget := p.WriterConnections(), p.WriterConnectionBudget(); need > budget || need != 132 {
		t.Errorf("defaults: %d connections against a budget of %d", need, budget)
	}
}

func TestPhysicalName(t *testing.T) {
	for in, want := range map[string]string{
		"Catalog/Shard0":      "catalog-shard0",
		"Catalog/Shard0-ro":   "catalog-shard0-ro",
		"My_Stack--x/Control": "my-stack-x-control",
		"9lives/Shard1":       "p9lives-shard1",
	} {
		stack, part, _ := strings.Cut(in, "/")
		if got := physicalName(stack, part); got != want {
			t.Errorf("physicalName(%q, %q) = %q, want %q", stack, part, got, want)
		}
	}
	a := physicalName("A"+strings.Repeat("VeryLongStackName", 5), "Shard11-ro")
	b := physicalName("B"+strings.Repeat("VeryLongStackName", 5), "Shard11-ro")
	for _, n := range []string{a, b} {
		if len(n) > 63 || !strings.HasSuffix(n, "-shard11-ro") || strings.Contains(n, "--") {
			t.Errorf("bad long name %q (%d)", n, len(n))
		}
	}
	if a == b {
		t.Errorf("long stack names collide: %q", a)
	}
}

func TestValidateStackName(t *testing.T) {
	for name, ok := range map[string]bool{
		"Catalog": true, "catalog-prod-eu": true, "C": true, strings.Repeat("a", MaxStackNameLength): true,
		"": false, "9catalog": false, "cat_alog": false, "cat alog": false, strings.Repeat("a", MaxStackNameLength+1): false,
	} {
		if err := ValidateStackName(name); (err == nil) != ok {
			t.Errorf("ValidateStackName(%q) = %v", name, err)
		}
	}
}

func TestMissingAssets(t *testing.T) {
	props := &CatalogStackProps{Params: DefaultParams(), AssetDir: t.TempDir()}
	err := props.Validate()
	if err == nil || !strings.Contains(err.Error(), "go run ./scripts/buildlambdas") || !strings.Contains(err.Error(), "apply.zip") {
		t.Errorf("want a missing-asset error naming the build script, got %v", err)
	}
}
