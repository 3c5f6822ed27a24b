package costs

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

//go:embed figures.json
var figuresJSON []byte

// Figure keys (figures.json): measured by the project's benchmarks or
// assumed, each with its source.
const (
	FigBenchCores             = "bench_cores"
	FigDiffRowsPerS           = "diff_rows_per_s"
	FigApplyChangeRowsPerS    = "apply_change_rows_per_s"
	FigApplyFirstLoadRowsPerS = "apply_first_load_rows_per_s"
	FigApplyBenchWorkers      = "apply_bench_workers"
	FigReadMaxQPS             = "read_max_qps"
	FigReadAPICPUus           = "read_api_cpu_us"
	FigReadDBCPUus            = "read_db_cpu_us"
	FigReadP50ms              = "read_p50_ms"
	FigReadBilledMs           = "read_lambda_billed_ms"
	FigReadP99ms              = "read_lambda_p99_ms"
	FigDiffFixedS             = "diff_fixed_s"
	FigApplyFixedS            = "apply_fixed_s"
	FigUploadRouteMs          = "upload_route_ms"
	FigAPIRequestsPerUpload   = "api_requests_per_upload"
	FigACUPerVCPU             = "acu_per_vcpu"
	FigLambdaMBPerVCPU        = "lambda_mb_per_vcpu"
	FigDBCPUTarget            = "db_cpu_target"
	FigRowOverhead            = "row_overhead"
	FigIOPerRowWritten        = "aurora_io_per_row_written"
	FigIOPerRead              = "aurora_io_per_read"
	FigLogBytesPerRead        = "log_bytes_per_read"
	FigLogBytesPerAPIAccess   = "log_bytes_per_api_access"
	FigLogBytesPerInvocation  = "log_bytes_per_invocation"
	FigResponseBytes          = "response_bytes"
	FigIndexBytesPerProduct   = "index_bytes_per_product"
	FigChunkRetentionDays     = "chunk_retention_days"
	FigIdleSQSPollsPerMinute  = "idle_sqs_polls_per_minute"
	FigFIFOTPSQuota           = "sqs_fifo_tps_quota"
	FigFIFOInflightQuota      = "sqs_fifo_inflight_quota"
	FigLambdaConcurrencyQuota = "lambda_concurrency_quota"
	FigLambdaUnreservedMin    = "lambda_unreserved_min"
	FigAPIAccountRPSQuota     = "api_account_rps_quota"
	FigAuroraMaxACU           = "aurora_max_acu"
	FigALBNewConnsPerLCU      = "alb_new_conns_per_lcu"
	FigALBActiveConnsPerLCU   = "alb_active_conns_per_lcu"
	FigALBGBHourPerLCULambda  = "alb_gb_hour_per_lcu_lambda"
	FigALBGBHourPerLCU        = "alb_gb_hour_per_lcu"
	FigALBRuleEvalsPerLCU     = "alb_rule_evals_per_lcu"
	FigRequestsPerConnection  = "requests_per_connection"
	FigContainerCPUTarget     = "container_cpu_target"

	FigReadMsPerExtraProduct       = "read_ms_per_extra_product"
	FigReadDBCPUusPerExtraProduct  = "read_db_cpu_us_per_extra_product"
	FigReadAPICPUusPerExtraProduct = "read_api_cpu_us_per_extra_product"
	FigResponseHeaderBytes         = "response_header_bytes"
	FigLogBytesPerReadAccess       = "log_bytes_per_read_access"
	FigReadAlwaysLoggedShare       = "read_always_logged_share"
)

var requiredFigureKeys = []string{
	FigBenchCores, FigDiffRowsPerS, FigApplyChangeRowsPerS, FigApplyFirstLoadRowsPerS,
	FigApplyBenchWorkers, FigReadMaxQPS, FigReadAPICPUus, FigReadDBCPUus, FigReadP50ms,
	FigReadBilledMs, FigReadP99ms, FigDiffFixedS, FigApplyFixedS, FigUploadRouteMs,
	FigAPIRequestsPerUpload, FigACUPerVCPU, FigLambdaMBPerVCPU, FigDBCPUTarget, FigRowOverhead,
	FigIOPerRowWritten, FigIOPerRead, FigLogBytesPerRead, FigLogBytesPerAPIAccess, FigLogBytesPerInvocation,
	FigResponseBytes, FigIndexBytesPerProduct, FigChunkRetentionDays, FigIdleSQSPollsPerMinute,
	FigFIFOTPSQuota, FigFIFOInflightQuota, FigLambdaConcurrencyQuota, FigLambdaUnreservedMin,
	FigAPIAccountRPSQuota, FigAuroraMaxACU, FigALBNewConnsPerLCU, FigALBActiveConnsPerLCU,
	FigALBGBHourPerLCULambda, FigALBGBHourPerLCU, FigALBRuleEvalsPerLCU,
	FigRequestsPerConnection, FigContainerCPUTarget,
	FigReadMsPerExtraProduct, FigReadDBCPUusPerExtraProduct, FigReadAPICPUusPerExtraProduct,
	FigResponseHeaderBytes, FigLogBytesPerReadAccess, FigReadAlwaysLoggedShare,
}

// Figures are the measured and assumed figures of figures.json.
type Figures struct {
	Version string            `json:"version"`
	Note    string            `json:"note"`
	Figures map[string]Figure `json:"figures"`
}

// Figure is one number the model or the report takes as given.
type Figure struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// Measured is true for the project's own benchmark results, false for
	// assumptions and AWS limits.
	Measured bool   `json:"measured"`
	Source   string `json:"source"`
}

// DefaultFigures returns the embedded figures.
func DefaultFigures() *Figures {
	f, err := ParseFigures(figuresJSON)
	if err != nil {
		panic(fmt.Sprintf("costs: embedded figures.json: %v", err))
	}
	return f
}

// ParseFigures reads and validates a figures file: every key the package
// uses is present, positive, with a unit and a source.
func ParseFigures(raw []byte) (*Figures, error) {
	var f Figures
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("figures: %w", err)
	}
	var errs []error
	for _, k := range requiredFigureKeys {
		if _, ok := f.Figures[k]; !ok {
			errs = append(errs, fmt.Errorf("figures: missing %q", k))
		}
	}
	for _, k := range f.Keys() {
		v := f.Figures[k]
		if v.Value <= 0 || v.Unit == "" || v.Source == "" {
			errs = append(errs, fmt.Errorf("figure %q: needs a positive value, a unit and a source", k))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &f, nil
}

// Keys are the figure keys, sorted.
func (f *Figures) Keys() []string { return slices.Sorted(maps.Keys(f.Figures)) }

// V is the value of figure key; it panics on a key the file does not have
// (ParseFigures guarantees every key the package uses).
func (f *Figures) V(key string) float64 {
	v, ok := f.Figures[key]
	if !ok {
		panic(fmt.Sprintf("costs: figure %q not in figures %s", key, f.Version))
	}
	return v.Value
}
