package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aws/constructs-go/constructs/v10"
)

// Context keys read by the app. Each can be set in cdk.json under "context"
// or on the command line with `cdk deploy -c key=value`.
const (
	CtxShards                  = "shards"
	CtxReadersPerShard         = "readersPerShard"
	CtxLargeThresholdRows      = "largeThresholdRows"
	CtxApplySmallConcurrency   = "applySmallConcurrency"
	CtxApplyLargeConcurrency   = "applyLargeConcurrency"
	CtxInflightCap             = "inflightCap"
	CtxDiffMaxConcurrency      = "diffMaxConcurrency"
	CtxReadReservedConcurrency = "readReservedConcurrency"
	CtxReadMemoryMB            = "readMemoryMB"
	CtxMinACU                  = "minAcu"
	CtxMaxACU                  = "maxAcu"
	CtxRDSProxy                = "rdsProxy"
	CtxMaxUploadBytes          = "maxUploadBytes"
	CtxUploadRetentionDays     = "uploadRetentionDays"
	CtxAPIRateLimit            = "apiRateLimit"
	CtxAPIBurstLimit           = "apiBurstLimit"
	CtxAlarmEmail              = "alarmEmail"
)

// Params are the sizing knobs of the stack. The zero value is not useful:
// start from DefaultParams or ParamsFromContext.
type Params struct {
	// Shards is the number of shard clusters (Aurora PostgreSQL), 1..MaxShards.
	Shards int
	// ReadersPerShard is the number of Serverless v2 readers in every
	// cluster (shards and control), 0..15.
	ReadersPerShard int
	// LargeThresholdRows is the number of changed rows from which a
	// generation goes to apply-large.fifo instead of apply-small.fifo.
	LargeThresholdRows int
	// ApplySmallConcurrency is the reserved concurrency of apply-small and
	// the maximum concurrency of its event source.
	ApplySmallConcurrency int
	// ApplyLargeConcurrency is the reserved concurrency of apply-large and
	// the maximum concurrency of its event source.
	ApplyLargeConcurrency int
	// InflightCap is the per-retailer number of chunk message groups, which
	// bounds how many chunks of one retailer are applied at once (I9).
	InflightCap int
	// DiffMaxConcurrency is the maximum concurrency of the diff event source.
	DiffMaxConcurrency int
	// ReadReservedConcurrency is the reserved concurrency of the read
	// function; 0 leaves it in the unreserved pool.
	ReadReservedConcurrency int
	// ReadMemoryMB is the memory size of the read function.
	ReadMemoryMB int
	// MinACU is the Serverless v2 minimum capacity of every cluster.
	MinACU float64
	// MaxACU is the Serverless v2 maximum capacity of every cluster.
	MaxACU float64
	// RDSProxy puts an RDS Proxy in front of every cluster for the API
	// functions (upload, read); see docs/DEPLOY.md for the trade-off.
	RDSProxy bool
	// MaxUploadBytes is the largest snapshot file accepted (a presigned PUT
	// is a single S3 PUT, at most 5 GiB).
	MaxUploadBytes int64
	// UploadRetentionDays is how long uploaded snapshot files are kept.
	UploadRetentionDays int
	// APIRateLimit is the steady-state request rate of the HTTP API stage.
	APIRateLimit int
	// APIBurstLimit is the burst request rate of the HTTP API stage.
	APIBurstLimit int
	// AlarmEmail, when set, is subscribed to the alarm topic.
	AlarmEmail string
}

// MaxShards is the largest shard count: the functions get one secret ARN
// and one endpoint per shard in environment variables, which Lambda limits
// to 4 KB in all (TestEnvironmentSize checks the estimate).
const MaxShards = 12

// Fixed sizing used by validation and by the functions.
const (
	// maxSinglePutBytes is S3's limit for one PUT, hence for a presigned PUT.
	maxSinglePutBytes = 5 << 30
	// dbConnsPerEnvironment is the pool size each Lambda environment may
	// open per database (CATALOG_DB_MAX_CONNS).
	dbConnsPerEnvironment = 2
	// proxyMaxConnectionsPercent is the share of max_connections an RDS
	// Proxy may take.
	proxyMaxConnectionsPercent = 40
	// reservedDBConnections is kept free for rotation, operators and
	// Aurora's own superuser slots.
	reservedDBConnections = 20
)

// DefaultParams returns the defaults written in cdk.json. The storefront's
// throttle and read environments follow `catalogctl model` at DESIGN 1's
// scale (22,000 reads/s: apiRateLimit = that + 10% rounded up, reserved
// read concurrency = that rate x the p99 duration); TestDefaultsFollowTheModel
// keeps them so.
func DefaultParams() Params {
	return Params{
		Shards:                  2,
		ReadersPerShard:         1,
		LargeThresholdRows:      100000,
		ApplySmallConcurrency:   20,
		ApplyLargeConcurrency:   20,
		InflightCap:             20,
		DiffMaxConcurrency:      10,
		ReadReservedConcurrency: 250,
		ReadMemoryMB:            1024,
		MinACU:                  0.5,
		MaxACU:                  16,
		RDSProxy:                true,
		MaxUploadBytes:          maxSinglePutBytes,
		UploadRetentionDays:     14,
		APIRateLimit:            25000,
		APIBurstLimit:           5000,
	}
}

// ParamsFromContext reads every parameter from the construct context
// (cdk.json or -c key=value), falling back to DefaultParams, and validates
// the result.
func ParamsFromContext(node constructs.Node) (Params, error) {
	return ParamsFromLookup(func(key string) any { return node.TryGetContext(&key) })
}

// ParamsFromLookup is ParamsFromContext over any lookup function; values may
// be JSON numbers, booleans or strings (the CLI passes strings).
func ParamsFromLookup(lookup func(key string) any) (Params, error) {
	p := DefaultParams()
	var errs []error
	ints := []struct {
		key string
		dst *int
	}{
		{CtxShards, &p.Shards},
		{CtxReadersPerShard, &p.ReadersPerShard},
		{CtxLargeThresholdRows, &p.LargeThresholdRows},
		{CtxApplySmallConcurrency, &p.ApplySmallConcurrency},
		{CtxApplyLargeConcurrency, &p.ApplyLargeConcurrency},
		{CtxInflightCap, &p.InflightCap},
		{CtxDiffMaxConcurrency, &p.DiffMaxConcurrency},
		{CtxReadReservedConcurrency, &p.ReadReservedConcurrency},
		{CtxReadMemoryMB, &p.ReadMemoryMB},
		{CtxUploadRetentionDays, &p.UploadRetentionDays},
		{CtxAPIRateLimit, &p.APIRateLimit},
		{CtxAPIBurstLimit, &p.APIBurstLimit},
	}
	for _, f := range ints {
		if v := lookup(f.key); v != nil {
			n, err := toFloat(v)
			if err == nil && (n != math.Trunc(n) || math.Abs(n) > math.MaxInt32) {
				err = fmt.Errorf("not an integer: %v", v)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("context %q: %w", f.key, err))
				continue
			}
			*f.dst = int(n)
		}
	}
	floats := []struct {
		key string
		dst *float64
	}{{CtxMinACU, &p.MinACU}, {CtxMaxACU, &p.MaxACU}}
	for _, f := range floats {
		if v := lookup(f.key); v != nil {
			n, err := toFloat(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("context %q: %w", f.key, err))
				continue
			}
			*f.dst = n
		}
	}
	if v := lookup(CtxMaxUploadBytes); v != nil {
		n, err := toFloat(v)
		if err == nil && n != math.Trunc(n) {
			err = fmt.Errorf("not an integer: %v", v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("context %q: %w", CtxMaxUploadBytes, err))
		} else {
			p.MaxUploadBytes = int64(n)
		}
	}
	if v := lookup(CtxRDSProxy); v != nil {
		b, err := toBool(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %q: %w", CtxRDSProxy, err))
		} else {
			p.RDSProxy = b
		}
	}
	if v := lookup(CtxAlarmEmail); v != nil {
		s, ok := v.(string)
		if !ok {
			errs = append(errs, fmt.Errorf("context %q: want a string, got %T", CtxAlarmEmail, v))
		} else {
			p.AlarmEmail = strings.TrimSpace(s)
		}
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	return p, p.Validate()
}

func toFloat(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case int:
		return float64(x), nil
	case int64:
		return float64(x), nil
	case json.Number:
		return x.Float64()
	case string:
		return strconv.ParseFloat(strings.TrimSpace(x), 64)
	default:
		return 0, fmt.Errorf("want a number, got %T", v)
	}
}

func toBool(v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		return strconv.ParseBool(strings.TrimSpace(x))
	default:
		return false, fmt.Errorf("want a boolean, got %T", v)
	}
}

// Validate checks every parameter's range and that the bounded database
// consumers fit the shard writers' connection budget.
func (p Params) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(p.Shards >= 1 && p.Shards <= MaxShards, "%s must be 1..%d (Lambda environment variables hold entries per shard within 4 KB), got %d", CtxShards, MaxShards, p.Shards)
	check(p.ReadersPerShard >= 0 && p.ReadersPerShard <= 15, "%s must be 0..15 (Aurora's replica limit), got %d", CtxReadersPerShard, p.ReadersPerShard)
	check(p.LargeThresholdRows >= 1, "%s must be positive, got %d", CtxLargeThresholdRows, p.LargeThresholdRows)
	check(p.ApplySmallConcurrency >= 2 && p.ApplySmallConcurrency <= 1000, "%s must be 2..1000 (SQS event source maximum concurrency range), got %d", CtxApplySmallConcurrency, p.ApplySmallConcurrency)
	check(p.ApplyLargeConcurrency >= 2 && p.ApplyLargeConcurrency <= 1000, "%s must be 2..1000 (SQS event source maximum concurrency range), got %d", CtxApplyLargeConcurrency, p.ApplyLargeConcurrency)
	check(p.InflightCap >= 1 && p.InflightCap <= 1000, "%s must be 1..1000, got %d", CtxInflightCap, p.InflightCap)
	check(p.DiffMaxConcurrency >= 2 && p.DiffMaxConcurrency <= 1000, "%s must be 2..1000 (SQS event source maximum concurrency range), got %d", CtxDiffMaxConcurrency, p.DiffMaxConcurrency)
	check(p.ReadReservedConcurrency >= 0 && p.ReadReservedConcurrency <= 10000, "%s must be 0 (unreserved) or up to 10000, got %d", CtxReadReservedConcurrency, p.ReadReservedConcurrency)
	check(p.ReadMemoryMB >= 128 && p.ReadMemoryMB <= 10240, "%s must be 128..10240, got %d", CtxReadMemoryMB, p.ReadMemoryMB)
	check(p.MinACU >= 0 && p.MinACU <= 256 && math.Mod(p.MinACU*2, 1) == 0, "%s must be 0..256 in steps of 0.5, got %v", CtxMinACU, p.MinACU)
	check(p.MaxACU >= 1 && p.MaxACU <= 256 && math.Mod(p.MaxACU*2, 1) == 0, "%s must be 1..256 in steps of 0.5, got %v", CtxMaxACU, p.MaxACU)
	check(p.MaxACU >= p.MinACU, "%s (%v) must not be below %s (%v)", CtxMaxACU, p.MaxACU, CtxMinACU, p.MinACU)
	check(p.MaxUploadBytes >= 1 && p.MaxUploadBytes <= maxSinglePutBytes, "%s must be 1..%d (a presigned PUT is a single S3 PUT), got %d", CtxMaxUploadBytes, int64(maxSinglePutBytes), p.MaxUploadBytes)
	check(p.UploadRetentionDays >= dlqRetentionDays, "%s must be at least %d (a diff job can wait that long in its dead-letter queue, and a redriven one needs its upload), got %d",
		CtxUploadRetentionDays, dlqRetentionDays, p.UploadRetentionDays)
	check(p.APIRateLimit >= 1 && p.APIBurstLimit >= 1, "%s and %s must be positive, got %d and %d", CtxAPIRateLimit, CtxAPIBurstLimit, p.APIRateLimit, p.APIBurstLimit)
	if len(errs) == 0 {
		need, budget := p.WriterConnections(), p.WriterConnectionBudget()
		check(need <= budget,
			"apply-small (%d) + apply-large (%d) + diff (%d) + change events (%d) + ops (%d) environments x %d connections = %d connections per shard writer, over the budget of %d (estimated max_connections %d at maxAcu %v/minAcu %v, less the RDS Proxy share and %d reserved): lower the concurrency or raise %s",
			p.ApplySmallConcurrency, p.ApplyLargeConcurrency, p.DiffMaxConcurrency, eventConcurrency, opsConcurrency, dbConnsPerEnvironment, need, budget,
			EstimatedMaxConnections(p.MinACU, p.MaxACU), p.MaxACU, p.MinACU, reservedDBConnections, CtxMaxACU)
	}
	return errors.Join(errs...)
}

// EstimatedMaxConnections estimates max_connections of an Aurora PostgreSQL
// Serverless v2 instance: LEAST(DBInstanceClassMemory/9531392, 5000) with
// the memory of the maximum capacity (2 GiB per ACU), capped at 2000 when
// the minimum capacity is below 1 ACU (AWS documentation, Aurora Serverless
// v2 connection limits). It is an estimate: check SHOW max_connections.
func EstimatedMaxConnections(minACU, maxACU float64) int {
	n := int(maxACU * 2 * (1 << 30) / 9531392)
	n = min(n, 5000)
	if minACU < 1 {
		n = min(n, 2000)
	}
	return n
}

// WriterConnections is the number of connections the bounded pipeline
// consumers (apply-small, apply-large, diff) and the change-event
// functions (relay, analytics, webhooks: their reserved concurrency) and
// the ops function (its reserved concurrency) may hold on one shard writer.
func (p Params) WriterConnections() int {
	return (p.ApplySmallConcurrency + p.ApplyLargeConcurrency + p.DiffMaxConcurrency + eventConcurrency + opsConcurrency) * dbConnsPerEnvironment
}

// eventConcurrency is the change-event functions' environments that
// connect to the shard writers (events.go); webhook-sender connects to none.
const eventConcurrency = relayConcurrency + analyticsConcurrency + webhooksConcurrency

// WriterConnectionBudget is what the pipeline consumers may use on one
// shard writer: the estimated max_connections, less what the RDS Proxy (or,
// without a proxy, the API functions) may take, less a reserve.
func (p Params) WriterConnectionBudget() int {
	return EstimatedMaxConnections(p.MinACU, p.MaxACU)*(100-proxyMaxConnectionsPercent)/100 - reservedDBConnections
}
