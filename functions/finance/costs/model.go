package costs

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/retailcatalog/catalog/functions/finance/usage"
)

// ModelInput is the scale a capacity and cost model is computed for, and
// the deployment's sizes it checks against. DefaultModelInput is the design
// scale (DESIGN 1) with cdk.json's sizes.
type ModelInput struct {
	// Retailers, and Products per retailer on average.
	Retailers int `json:"retailers"`
	Products  int `json:"products"`
	// ChangePct is the share of a snapshot's rows that change, in percent.
	ChangePct float64 `json:"change_pct"`
	// ReadQPS is the storefront's product reads per second, taken as
	// sustained; ProductsPerRequest of them go in one request (a
	// batch-get, DESIGN 5; 1: one GET per product).
	ReadQPS            float64 `json:"read_qps"`
	ProductsPerRequest float64 `json:"products_per_request"`
	// ReadLogSample is the share of the read function's successful, fast
	// requests that write an access log line (config's read access-log
	// sampling); errors and slow requests always do.
	ReadLogSample float64 `json:"read_log_sample"`
	// PeakShare of the day's uploads arrive within PeakHours overnight.
	PeakShare float64 `json:"peak_share"`
	PeakHours float64 `json:"peak_hours"`
	// RowBytes is the size of a product in a snapshot file.
	RowBytes float64 `json:"row_bytes"`
	// LargestRetailer is the largest catalog, in products.
	LargestRetailer int `json:"largest_retailer"`
	// CDNHitRatio is the share of storefront reads a CDN would answer.
	CDNHitRatio float64 `json:"cdn_hit_ratio"`
	// ShardMaxGB is the most data a shard should hold (restore, clone and
	// vacuum times, buffer cache); Shards is computed when 0.
	ShardMaxGB float64 `json:"shard_max_gb"`
	Shards     int     `json:"shards"`
	// MinACU and MaxACU are every instance's Serverless v2 range.
	MinACU float64 `json:"min_acu"`
	MaxACU float64 `json:"max_acu"`
	// Concurrency of the event sources (reserved for apply).
	ApplySmallConcurrency int `json:"apply_small_concurrency"`
	ApplyLargeConcurrency int `json:"apply_large_concurrency"`
	DiffConcurrency       int `json:"diff_concurrency"`
	// InflightCap is the chunks of one retailer in flight at once (I9).
	InflightCap int `json:"inflight_cap"`
	// LargeThresholdRows: generations with at least this many changed rows
	// go to apply-large.
	LargeThresholdRows int `json:"large_threshold_rows"`
	// Function memory sizes, MB.
	ReadMemoryMB   int `json:"read_memory_mb"`
	DiffMemoryMB   int `json:"diff_memory_mb"`
	ApplyMemoryMB  int `json:"apply_memory_mb"`
	UploadMemoryMB int `json:"upload_memory_mb"`
	// UploadRetentionDays is how long uploaded files are kept.
	UploadRetentionDays int  `json:"upload_retention_days"`
	RDSProxy            bool `json:"rds_proxy"`
	// InterfaceEndpoints is the VPC interface endpoints (SQS, Secrets
	// Manager, SNS for the relay), each in AZs zones.
	InterfaceEndpoints int `json:"interface_endpoints"`
	AZs                int `json:"azs"`
}

// DefaultReadLogSample is the read function's default access-log sampling
// rate (functions/platform/config's CATALOG_READ_ACCESS_LOG_SAMPLE).
const DefaultReadLogSample = 0.01

// DefaultModelInput is DESIGN 1's scale with cdk.json's sizes, the
// storefront reading 20 products a request (a page, by batch-get).
func DefaultModelInput() ModelInput {
	return ModelInput{
		Retailers: 100000, Products: 20000, ChangePct: 3, ReadQPS: 22000, ProductsPerRequest: 20, ReadLogSample: DefaultReadLogSample,
		PeakShare: 0.8, PeakHours: 6, RowBytes: 2000, LargestRetailer: 5000000, CDNHitRatio: 0.9,
		ShardMaxGB: 1000, MinACU: 0.5, MaxACU: 16,
		ApplySmallConcurrency: 20, ApplyLargeConcurrency: 20, DiffConcurrency: 10, InflightCap: 20,
		LargeThresholdRows: 100000, ReadMemoryMB: 1024, DiffMemoryMB: 3008, ApplyMemoryMB: 1024, UploadMemoryMB: 512,
		UploadRetentionDays: 14, RDSProxy: true, InterfaceEndpoints: 3, AZs: 2,
	}
}

// Validate checks the input's ranges.
func (in ModelInput) Validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(in.Retailers >= 1, "retailers must be at least 1, got %d", in.Retailers)
	check(in.Products >= 1, "products must be at least 1, got %d", in.Products)
	check(in.ChangePct > 0 && in.ChangePct <= 100, "change-pct must be in (0, 100], got %v", in.ChangePct)
	check(in.ReadQPS >= 0, "read-qps must not be negative, got %v", in.ReadQPS)
	check(in.ProductsPerRequest >= 1 && in.ProductsPerRequest <= 100, "products-per-request must be from 1 to 100 (a batch-get's most), got %v", in.ProductsPerRequest)
	check(in.ReadLogSample >= 0 && in.ReadLogSample <= 1, "read-log-sample must be in [0, 1], got %v", in.ReadLogSample)
	check(in.PeakShare > 0 && in.PeakShare <= 1, "peak-share must be in (0, 1], got %v", in.PeakShare)
	check(in.PeakHours > 0 && in.PeakHours <= 24, "peak-hours must be in (0, 24], got %v", in.PeakHours)
	check(in.RowBytes > 0, "row-bytes must be positive, got %v", in.RowBytes)
	check(in.LargestRetailer >= 1, "largest must be at least 1, got %d", in.LargestRetailer)
	check(in.CDNHitRatio >= 0 && in.CDNHitRatio < 1, "cdn-hit must be in [0, 1), got %v", in.CDNHitRatio)
	check(in.ShardMaxGB > 0, "shard-max-gb must be positive, got %v", in.ShardMaxGB)
	check(in.Shards >= 0, "shards must not be negative, got %d", in.Shards)
	check(in.MinACU >= 0 && in.MaxACU >= 1 && in.MaxACU >= in.MinACU && in.MaxACU <= 256, "min-acu/max-acu: want 0 <= min <= max, 1 <= max <= 256, got %v/%v", in.MinACU, in.MaxACU)
	check(in.ApplySmallConcurrency >= 1 && in.ApplyLargeConcurrency >= 1 && in.DiffConcurrency >= 1 && in.InflightCap >= 1, "concurrency figures must be at least 1")
	check(in.LargeThresholdRows >= 1, "large-threshold must be at least 1")
	check(in.ReadMemoryMB >= 128 && in.DiffMemoryMB >= 128 && in.ApplyMemoryMB >= 128 && in.UploadMemoryMB >= 128, "function memory must be at least 128 MB")
	check(in.UploadRetentionDays >= 1 && in.InterfaceEndpoints >= 0 && in.AZs >= 1, "retention days and AZs must be at least 1")
	return errors.Join(errs...)
}

// Model is the capacity and monthly cost of the whole system at a scale.
type Model struct {
	Input   ModelInput `json:"input"`
	Prices  string     `json:"prices"`
	Figures []string   `json:"figures"`

	Load       ModelLoad          `json:"load"`
	Database   ModelDatabase      `json:"database"`
	Functions  []ModelFunction    `json:"functions"`
	Drain      ModelDrain         `json:"drain"`
	Queues     []ModelQueueLimit  `json:"queues"`
	Largest    ModelLargest       `json:"largest_retailer"`
	Monthly    []ModelCost        `json:"monthly"`
	MonthlyUSD float64            `json:"monthly_usd"`
	Summary    ModelSummary       `json:"summary"`
	ReadPaths  []ModelReadPath    `json:"read_paths"`
	Stack      ModelStackDefaults `json:"stack"`
	Quotas     []ModelQuota       `json:"quotas"`
	Notes      []string           `json:"notes"`
	figures    *Figures           `json:"-"`
	byService  map[string]float64 `json:"-"`
}

// ModelLoad is the daily and peak work.
type ModelLoad struct {
	RowsPerDay       float64 `json:"rows_per_day"`
	ChangedPerDay    float64 `json:"changed_rows_per_day"`
	UploadsPerDay    float64 `json:"uploads_per_day"`
	ChunksPerDay     float64 `json:"chunks_per_day"`
	ChangedPerUpload float64 `json:"changed_rows_per_upload"`
	ChunksPerUpload  float64 `json:"chunks_per_upload"`
	BytesPerDay      float64 `json:"bytes_uploaded_per_day"`
	PeakRowsPerS     float64 `json:"peak_rows_received_per_s"`
	PeakChangedPerS  float64 `json:"peak_changed_rows_per_s"`
	PeakUploadsPerS  float64 `json:"peak_uploads_per_s"`
	PeakChunksPerS   float64 `json:"peak_chunks_per_s"`
	ReadsPerMonth    float64 `json:"reads_per_month"` // product reads
	// ReadRequestsPerMonth are the storefront's requests: ReadsPerMonth /
	// products per request.
	ReadRequestsPerMonth float64 `json:"read_requests_per_month"`
	ChangedPerMonth      float64 `json:"changed_rows_per_month"`
	UploadsPerMonth      float64 `json:"uploads_per_month"`
	ChunksPerMonth       float64 `json:"chunks_per_month"`
	APIRequestsPerMon    float64 `json:"upload_api_requests_per_month"`
}

// ModelDatabase is the shard plan and what one leader would face.
type ModelDatabase struct {
	StoredGB         float64 `json:"stored_gb"`
	Shards           int     `json:"shards"`
	ShardsByStorage  int     `json:"shards_by_storage"`
	ShardsByWrites   int     `json:"shards_by_writes"`
	ShardsReason     string  `json:"shards_reason"`
	GBPerShard       float64 `json:"gb_per_shard"`
	RowsPerSPerACU   float64 `json:"changed_rows_per_s_per_acu"`
	WriterRowsPerS   float64 `json:"writer_changed_rows_per_s"`
	PeakWriteACU     float64 `json:"peak_write_acu_per_shard"`
	WriterPeakUse    float64 `json:"writer_peak_utilization"`
	ReadACU          float64 `json:"read_acu_total"`
	ReaderACU        float64 `json:"reader_acu_per_shard"`
	ReadersPerShard  int     `json:"readers_per_shard"`
	WriterAvgACU     float64 `json:"writer_average_acu"`
	OneLeader        string  `json:"one_leader"`
	OneLeaderMemGB   float64 `json:"one_leader_memory_gb"`
	OneLeaderPeakACU float64 `json:"one_leader_peak_write_acu"`
	FullRewriteACU   float64 `json:"full_rewrite_peak_acu"`
}

// ModelFunction is one Lambda function's concurrency and monthly usage.
type ModelFunction struct {
	Name        string  `json:"name"`
	MemoryMB    int     `json:"memory_mb"`
	Invocations float64 `json:"invocations_per_month"`
	DurationS   float64 `json:"average_duration_s"`
	GBs         float64 `json:"gb_s_per_month"`
	Concurrency float64 `json:"peak_concurrency"`
	Configured  int     `json:"configured_concurrency"`
	Note        string  `json:"note"`
}

// ModelDrain is how long the overnight peak takes through each stage.
type ModelDrain struct {
	WindowH     float64      `json:"window_hours"`
	Stages      []ModelStage `json:"stages"`
	Bottleneck  string       `json:"bottleneck"`
	KeepsUp     bool         `json:"keeps_up"`
	DrainH      float64      `json:"drain_hours"`
	AllAtOnceH  float64      `json:"all_at_once_hours"`
	UploadLagS  float64      `json:"upload_to_applied_s"`
	Explanation string       `json:"explanation"`
}

// ModelStage is one stage's capacity against the peak's arrival rate.
type ModelStage struct {
	Name        string  `json:"name"`
	Limit       string  `json:"limit"`
	Unit        string  `json:"unit"`
	Capacity    float64 `json:"capacity_per_s"`
	Arrival     float64 `json:"peak_arrival_per_s"`
	Utilization float64 `json:"utilization"`
	AllAtOnceH  float64 `json:"all_at_once_hours"`
}

// ModelQueueLimit is one queue's load against its limits.
type ModelQueueLimit struct {
	Queue string `json:"queue"`
	Load  string `json:"load"`
	Limit string `json:"limit"`
}

// ModelLargest is the largest retailer's day and how it shares its shard.
type ModelLargest struct {
	Products       int     `json:"products"`
	Changed        float64 `json:"changed_rows"`
	Chunks         int     `json:"chunks"`
	Queue          string  `json:"queue"`
	DiffS          float64 `json:"diff_s"`
	DiffMemoryMB   float64 `json:"diff_peak_memory_mb"`
	ApplyS         float64 `json:"apply_s"`
	FullRewriteS   float64 `json:"full_rewrite_apply_s"`
	ShardShare     float64 `json:"max_share_of_shard_writer"`
	SmallRowsPerS  float64 `json:"small_retailers_rows_per_s_left"`
	StarvationNote string  `json:"starvation"`
}

// ModelCost is one line of the monthly bill.
type ModelCost struct {
	Service string  `json:"service"`
	What    string  `json:"what"`
	USD     float64 `json:"usd"`
	Side    Side    `json:"side,omitempty"`
}

// ModelSummary splits the monthly bill as the report does.
type ModelSummary struct {
	IngestionUSD  float64 `json:"ingestion_usd"`
	StorefrontUSD float64 `json:"storefront_usd"`
	SharedUSD     float64 `json:"shared_usd"`
	// USDPerMillionChanged is (ingestion + shared) per million changed
	// rows; USDPerMillionReads storefront per million product reads, and
	// USDPerMillionReadsOnePerRequest the same at one product a request
	// (the storefront without batch-get), from the same prices.
	USDPerMillionChanged            float64 `json:"usd_per_million_changed_rows"`
	USDPerMillionReads              float64 `json:"usd_per_million_reads"`
	USDPerMillionReadsOnePerRequest float64 `json:"usd_per_million_reads_one_per_request"`
	// FullRewriteExtraUSD is what writing every received row would add a
	// month (the report's full_rewrite rule), SavingRatio the report's ratio.
	FullRewriteExtraUSD float64 `json:"full_rewrite_extra_usd"`
	SavingRatio         float64 `json:"saving_ratio"`
}

// ModelReadPath is one way to serve the storefront, priced per month.
type ModelReadPath struct {
	Name      string      `json:"name"`
	Lines     []ModelCost `json:"lines"`
	USD       float64     `json:"usd"`
	DBReadACU float64     `json:"database_read_acu"`
	Tradeoff  string      `json:"tradeoff"`
}

// ModelStackDefaults are the stack parameters the model implies.
type ModelStackDefaults struct {
	APIRateLimit            int `json:"apiRateLimit"`
	ReadReservedConcurrency int `json:"readReservedConcurrency"`
	Shards                  int `json:"shards"`
	ReadersPerShard         int `json:"readersPerShard"`
	LambdaConcurrency       int `json:"lambda_concurrency_needed"`
}

// ModelQuota is an account quota a deployment at this scale must have.
type ModelQuota struct {
	Quota   string `json:"quota"`
	Default string `json:"default"`
	Needed  string `json:"needed"`
}

const secondsPerDay = 86400

// RunModel computes the model with the pricer's tables.
func (p Pricer) RunModel(in ModelInput) (*Model, error) {
	if err := in.Validate(); err != nil {
		return nil, err
	}
	t, f := p.Prices, p.Figures
	m := &Model{Input: in, Prices: t.Describe(), figures: f}
	for _, k := range f.Keys() {
		fig := f.Figures[k]
		kind := "assumed"
		if fig.Measured {
			kind = "measured"
		}
		m.Figures = append(m.Figures, fmt.Sprintf("%s = %g %s (%s; %s)", k, fig.Value, fig.Unit, kind, fig.Source))
	}
	monthS := t.MonthHours * 3600
	daysPerMonth := t.DaysPerMonth()

	// Load.
	L := &m.Load
	R, P := float64(in.Retailers), float64(in.Products)
	L.RowsPerDay = R * P
	L.ChangedPerUpload = P * in.ChangePct / 100
	L.ChangedPerDay = R * L.ChangedPerUpload
	L.UploadsPerDay = R
	L.ChunksPerUpload = math.Max(1, math.Ceil(L.ChangedPerUpload/ChunkRows))
	L.ChunksPerDay = R * L.ChunksPerUpload
	L.BytesPerDay = L.RowsPerDay * in.RowBytes
	window := in.PeakHours * 3600
	L.PeakRowsPerS = L.RowsPerDay * in.PeakShare / window
	L.PeakChangedPerS = L.ChangedPerDay * in.PeakShare / window
	L.PeakUploadsPerS = L.UploadsPerDay * in.PeakShare / window
	L.PeakChunksPerS = L.ChunksPerDay * in.PeakShare / window
	L.ReadsPerMonth = in.ReadQPS * monthS
	L.ReadRequestsPerMonth = L.ReadsPerMonth / in.ProductsPerRequest
	sf := storefrontOf(in, f)
	L.ChangedPerMonth = L.ChangedPerDay * daysPerMonth
	L.UploadsPerMonth = L.UploadsPerDay * daysPerMonth
	L.ChunksPerMonth = L.ChunksPerDay * daysPerMonth
	L.APIRequestsPerMon = L.UploadsPerMonth * f.V(FigAPIRequestsPerUpload)

	// Per-unit durations, from the benchmarks.
	benchACU := f.V(FigBenchCores) * f.V(FigACUPerVCPU)
	diffVCPU := float64(in.DiffMemoryMB) / f.V(FigLambdaMBPerVCPU)
	diffRowsPerS := f.V(FigDiffRowsPerS) * math.Min(diffVCPU, f.V(FigBenchCores)) / f.V(FigBenchCores)
	diffS := func(rows float64) float64 { return f.V(FigDiffFixedS) + rows/diffRowsPerS }
	applyWorkerRowsPerS := f.V(FigApplyChangeRowsPerS) / f.V(FigApplyBenchWorkers)
	chunkS := func(rows float64) float64 { return f.V(FigApplyFixedS) + rows/applyWorkerRowsPerS }
	rowsPerChunk := L.ChangedPerUpload / L.ChunksPerUpload

	// Database.
	D := &m.Database
	D.StoredGB = L.RowsPerDay * in.RowBytes * f.V(FigRowOverhead) / 1e9
	D.RowsPerSPerACU = f.V(FigApplyChangeRowsPerS) / benchACU
	D.WriterRowsPerS = D.RowsPerSPerACU * in.MaxACU
	D.ShardsByStorage = int(math.Ceil(D.StoredGB / in.ShardMaxGB))
	D.ShardsByWrites = int(math.Ceil(L.PeakChangedPerS / (D.WriterRowsPerS * f.V(FigDBCPUTarget))))
	D.Shards = max(1, D.ShardsByStorage, D.ShardsByWrites)
	D.ShardsReason = fmt.Sprintf("max(storage %.0f GB / %.0f GB a shard = %d, peak writes %.0f rows/s / (%.0f rows/s a writer at %g ACU x %.0f%% planned) = %d)",
		D.StoredGB, in.ShardMaxGB, D.ShardsByStorage, L.PeakChangedPerS, D.WriterRowsPerS, in.MaxACU, 100*f.V(FigDBCPUTarget), D.ShardsByWrites)
	if in.Shards > 0 {
		D.Shards = in.Shards
		D.ShardsReason = fmt.Sprintf("given (--shards %d); the model would pick %s", in.Shards, D.ShardsReason)
	}
	S := float64(D.Shards)
	D.GBPerShard = D.StoredGB / S
	D.PeakWriteACU = L.PeakChangedPerS / S / D.RowsPerSPerACU
	D.WriterPeakUse = D.PeakWriteACU / in.MaxACU
	D.WriterAvgACU = math.Max(in.MinACU, L.ChangedPerDay/S/D.RowsPerSPerACU/secondsPerDay/f.V(FigDBCPUTarget))
	D.ReadACU = sf.requestQPS * sf.dbCPUus / 1e6 * f.V(FigACUPerVCPU) / f.V(FigDBCPUTarget)
	D.ReadersPerShard = max(1, int(math.Ceil(D.ReadACU/S/in.MaxACU)))
	D.ReaderACU = math.Max(in.MinACU, D.ReadACU/S/float64(D.ReadersPerShard))
	D.OneLeaderMemGB = f.V(FigAuroraMaxACU) * 2
	D.OneLeaderPeakACU = L.PeakChangedPerS / D.RowsPerSPerACU
	D.FullRewriteACU = L.PeakRowsPerS / D.RowsPerSPerACU
	D.OneLeader = oneLeader(m, in)

	// Functions.
	readS := sf.billedMs / 1000
	uploadS := f.V(FigUploadRouteMs) / 1000
	apiPerS := L.PeakUploadsPerS * f.V(FigAPIRequestsPerUpload)
	smallChunks, largeChunks := L.ChunksPerMonth, 0.0
	if L.ChangedPerUpload >= float64(in.LargeThresholdRows) {
		smallChunks, largeChunks = 0, L.ChunksPerMonth
	}
	fn := func(name string, mem int, calls, dur, conc float64, configured int, note string) ModelFunction {
		return ModelFunction{Name: name, MemoryMB: mem, Invocations: calls, DurationS: dur,
			GBs: calls * dur * float64(mem) / 1024, Concurrency: conc, Configured: configured, Note: note}
	}
	largeNote := "the largest retailers' generations (>= large-threshold changed rows), at most inflight-cap chunks each"
	m.Functions = []ModelFunction{
		fn("read", in.ReadMemoryMB, L.ReadRequestsPerMonth, readS, sf.requestQPS*sf.p99ms/1000, 0,
			fmt.Sprintf("read requests/s (%g products each) x p99 duration (%.3g ms)", in.ProductsPerRequest, sf.p99ms)),
		fn("upload", in.UploadMemoryMB, L.APIRequestsPerMon, uploadS, math.Max(1, apiPerS*uploadS), 0,
			fmt.Sprintf("%g API requests per upload", f.V(FigAPIRequestsPerUpload))),
		fn("diff", in.DiffMemoryMB, L.UploadsPerMonth, diffS(P), L.PeakUploadsPerS*diffS(P), in.DiffConcurrency,
			fmt.Sprintf("%.0f rows/s per environment (%.1f vCPU at %d MB)", diffRowsPerS, diffVCPU, in.DiffMemoryMB)),
		fn("apply-small", in.ApplyMemoryMB, smallChunks, chunkS(rowsPerChunk), L.PeakChunksPerS*chunkS(rowsPerChunk)*btof(smallChunks > 0), in.ApplySmallConcurrency,
			fmt.Sprintf("%.0f rows a chunk at %.0f rows/s per environment", rowsPerChunk, applyWorkerRowsPerS)),
		fn("apply-large", in.ApplyMemoryMB, largeChunks, chunkS(rowsPerChunk), math.Min(float64(in.InflightCap), L.PeakChunksPerS*chunkS(rowsPerChunk))*btof(largeChunks > 0), in.ApplyLargeConcurrency, largeNote),
	}
	// The relay and the consumers (DESIGN 8): one publish per chunk and per
	// snapshot event, two consumers; small next to the rest.
	events := L.ChunksPerMonth + L.UploadsPerMonth
	m.Functions = append(m.Functions,
		fn("relay", 512, L.ChunksPerMonth, 0.05, L.PeakChunksPerS*0.05, 0, "assumed 50 ms per chunk's events (DESIGN 8)"),
		fn("consumers", 512, 2*events/10, 0.5, 2*(L.PeakChunksPerS+L.PeakUploadsPerS)/10*0.5, 0, "assumed: analytics + webhooks, batches of 10 events, 0.5 s"))

	// Drain of the overnight peak.
	Dr := &m.Drain
	Dr.WindowH = in.PeakHours
	applyConc := float64(in.ApplySmallConcurrency)
	if largeChunks > 0 {
		applyConc = math.Min(float64(in.ApplyLargeConcurrency), float64(in.InflightCap*in.Retailers))
	}
	stage := func(name, limit, unit string, capacity, arrival, work float64) ModelStage {
		return ModelStage{Name: name, Limit: limit, Unit: unit, Capacity: capacity, Arrival: arrival,
			Utilization: arrival / capacity, AllAtOnceH: work / capacity / 3600}
	}
	fifoQuota := f.V(FigFIFOTPSQuota)
	Dr.Stages = []ModelStage{
		stage("diff", fmt.Sprintf("%d environments x 1/%.2f s", in.DiffConcurrency, diffS(P)), "uploads/s",
			float64(in.DiffConcurrency)/diffS(P), L.PeakUploadsPerS, L.UploadsPerDay*in.PeakShare),
		stage("SQS FIFO", fmt.Sprintf("%.0f messages/s per API action (quota)", fifoQuota), "chunks/s",
			fifoQuota, L.PeakChunksPerS, L.ChunksPerDay*in.PeakShare),
		stage("apply (Lambda)", fmt.Sprintf("%.0f environments x 1/%.2f s", applyConc, chunkS(rowsPerChunk)), "chunks/s",
			applyConc/chunkS(rowsPerChunk), L.PeakChunksPerS, L.ChunksPerDay*in.PeakShare),
		stage("shard writers", fmt.Sprintf("%d shards x %.0f rows/s (%g ACU)", D.Shards, D.WriterRowsPerS, in.MaxACU), "changed rows/s",
			S*D.WriterRowsPerS, L.PeakChangedPerS, L.ChangedPerDay*in.PeakShare),
	}
	worst := Dr.Stages[0]
	for _, s := range Dr.Stages[1:] {
		if s.Utilization > worst.Utilization {
			worst = s
		}
	}
	Dr.Bottleneck = worst.Name
	Dr.AllAtOnceH = worst.AllAtOnceH
	Dr.KeepsUp = worst.Utilization < 1
	Dr.UploadLagS = diffS(P) + chunkS(rowsPerChunk)*math.Ceil(L.ChunksPerUpload/float64(in.InflightCap))
	if Dr.KeepsUp {
		Dr.DrainH = in.PeakHours + Dr.UploadLagS/3600
		Dr.Explanation = fmt.Sprintf("every stage keeps up with the peak (busiest: %s at %.0f%%): the overnight work is done as it arrives, %.1f h, each upload applied ~%.1f s after its PUT; had it all arrived at once, %s would take %.2f h",
			worst.Name, 100*worst.Utilization, Dr.DrainH, Dr.UploadLagS, worst.Name, Dr.AllAtOnceH)
	} else {
		Dr.DrainH = in.PeakHours * worst.Utilization
		Dr.Explanation = fmt.Sprintf("%s cannot keep up (%.0f%% of its capacity): the overnight peak drains in %.1f h instead of %.1f h; raise its limit",
			worst.Name, 100*worst.Utilization, Dr.DrainH, in.PeakHours)
	}

	// Queue limits.
	m.Queues = []ModelQueueLimit{
		{"diff-jobs (standard)", fmt.Sprintf("%.1f messages/s at the peak", L.PeakUploadsPerS), "standard queues: nearly unlimited throughput, 120,000 in flight"},
		{"apply-small.fifo / apply-large.fifo", fmt.Sprintf("%.1f chunks/s at the peak, ~%d in flight (concurrency x batch 10)", L.PeakChunksPerS, (in.ApplySmallConcurrency+in.ApplyLargeConcurrency)*10),
			fmt.Sprintf("%.0f messages/s per API action (high-throughput FIFO, us-east-1; quota), %.0f in flight; one message group = one message in flight, so a retailer gets at most inflight-cap (%d) chunks at once",
				fifoQuota, f.V(FigFIFOInflightQuota), in.InflightCap)},
		{"chunk message size", "~300 B (claim check: the rows are in S3)", "256 KiB per message"},
		{"change events (SNS -> consumer queues)", fmt.Sprintf("%.1f events/s at the peak", L.PeakChunksPerS+L.PeakUploadsPerS), "SNS publish quota is thousands/s per topic in us-east-1 (check Service Quotas)"},
	}

	// The largest retailer.
	Lg := &m.Largest
	Lg.Products = in.LargestRetailer
	lp := float64(in.LargestRetailer)
	Lg.Changed = lp * in.ChangePct / 100
	Lg.Chunks = int(math.Max(1, math.Ceil(Lg.Changed/ChunkRows)))
	Lg.Queue = "apply-small.fifo"
	largeConc := in.ApplySmallConcurrency
	if Lg.Changed >= float64(in.LargeThresholdRows) {
		Lg.Queue = "apply-large.fifo"
		largeConc = in.ApplyLargeConcurrency
	}
	inflight := float64(min(in.InflightCap, largeConc))
	Lg.DiffS = diffS(lp)
	Lg.DiffMemoryMB = 64 + lp*64/1e6
	lambdaSide := func(changed float64) float64 {
		chunks := math.Max(1, math.Ceil(changed/ChunkRows))
		return math.Ceil(chunks/inflight) * chunkS(math.Min(changed, ChunkRows))
	}
	// With inflight chunks in flight and the small retailers' apply
	// environments also writing to the shard, the big one gets at most its
	// share of the writer's connections.
	Lg.ShardShare = inflight / (inflight + float64(in.ApplySmallConcurrency))
	dbSide := func(changed float64) float64 { return changed / (D.WriterRowsPerS * Lg.ShardShare) }
	Lg.ApplyS = math.Max(lambdaSide(Lg.Changed), dbSide(Lg.Changed))
	Lg.FullRewriteS = math.Max(lambdaSide(lp), dbSide(lp))
	Lg.SmallRowsPerS = D.WriterRowsPerS * (1 - Lg.ShardShare)
	Lg.StarvationNote = fmt.Sprintf("its generations go to %s with at most %d chunks in flight (FIFO groups {retailer}#{seq mod %d}, I9), so it holds at most %d apply environments and, on its shard's writer, at most ~%.0f%% of the write capacity while apply-small's %d environments keep the rest (%.0f rows/s, %.0fx the shard's peak small-retailer load of %.0f rows/s); a full rewrite of it takes %.0f s and delays nobody else's chunks in their queue",
		Lg.Queue, int(inflight), in.InflightCap, int(inflight), 100*Lg.ShardShare, in.ApplySmallConcurrency, Lg.SmallRowsPerS, Lg.SmallRowsPerS/math.Max(1, L.PeakChangedPerS/S), L.PeakChangedPerS/S, Lg.FullRewriteS)

	// Monthly bill.
	m.byService = map[string]float64{}
	side := SideIngestion
	add := func(service, what string, usd float64) {
		m.Monthly = append(m.Monthly, ModelCost{service, what, usd, side})
		m.MonthlyUSD += usd
		m.byService[service] += usd
		switch side {
		case SideIngestion:
			m.Summary.IngestionUSD += usd
		case SideStorefront:
			m.Summary.StorefrontUSD += usd
		default:
			m.Summary.SharedUSD += usd
		}
	}
	var gbs, calls float64
	for _, fu := range m.Functions {
		gbs += fu.GBs
		calls += fu.Invocations
	}
	for _, fu := range m.Functions {
		side = sideOf(fu.Name)
		add(ServiceLambda, fmt.Sprintf("%s: %.3g invocations, %.3g GB-s", fu.Name, fu.Invocations, fu.GBs),
			fu.GBs*t.Unit(PriceLambdaGBSecond)+fu.Invocations*t.Unit(PriceLambdaRequest))
	}
	side = SideStorefront
	if tiered := t.Monthly(PriceLambdaGBSecond, gbs); tiered < gbs*t.Unit(PriceLambdaGBSecond)-0.005 {
		add(ServiceLambda, fmt.Sprintf("volume tiers on %.3g GB-s", gbs), tiered-gbs*t.Unit(PriceLambdaGBSecond))
	}
	// HTTP API tiers apply to the month's total: each side pays its share.
	apiReqs := L.ReadRequestsPerMonth + L.APIRequestsPerMon
	apiUSD := t.Monthly(PriceAPIRequest, apiReqs)
	add(ServiceAPIGateway, fmt.Sprintf("%.3g storefront requests (HTTP API, tiered; %g products a request)", L.ReadRequestsPerMonth, in.ProductsPerRequest), apiUSD*L.ReadRequestsPerMonth/apiReqs)
	side = SideIngestion
	add(ServiceAPIGateway, fmt.Sprintf("%.3g upload-route requests", L.APIRequestsPerMon), apiUSD*L.APIRequestsPerMon/apiReqs)

	idlePolls := f.V(FigIdleSQSPollsPerMinute) * 60 * t.MonthHours
	stdReqs := 3*L.UploadsPerMonth + 2*3*events + 3*idlePolls
	fifoReqs := 3*L.ChunksPerMonth + 2*idlePolls
	add(ServiceSQS, fmt.Sprintf("standard: %.3g requests (diff-jobs 3 an upload, 2 consumer queues 3 an event, idle polling)", stdReqs), t.Monthly(PriceSQSStandard, stdReqs))
	add(ServiceSQS, fmt.Sprintf("FIFO: %.3g requests (send, receive, delete a chunk; idle polling)", fifoReqs), t.Monthly(PriceSQSFIFO, fifoReqs))
	add(ServiceSNS, fmt.Sprintf("%.3g publishes (a chunk's changes, a snapshot's lifecycle)", events), t.Monthly(PriceSNSPublish, events))

	classA := L.UploadsPerMonth*4 + L.ChunksPerMonth   // file, index, tag, parquet; chunk objects
	classB := L.UploadsPerMonth*4 + 2*L.ChunksPerMonth // 2 passes over the file, baseline index, heads; chunk GET by apply and by analytics
	uploadsGB := L.BytesPerDay * float64(in.UploadRetentionDays) / bytesPerGB
	chunksGB := L.ChangedPerDay * in.RowBytes * f.V(FigChunkRetentionDays) / bytesPerGB
	indexGB := L.RowsPerDay * f.V(FigIndexBytesPerProduct) * 4 / bytesPerGB
	add(ServiceS3, fmt.Sprintf("%.3g class A + %.3g class B requests", classA, classB), classA*t.Unit(PriceS3ClassA)+classB*t.Unit(PriceS3ClassB))
	add(ServiceS3, fmt.Sprintf("storage: uploads %.0f GB (%d days), chunks %.0f GB (%g days), indexes %.0f GB", uploadsGB, in.UploadRetentionDays, chunksGB, f.V(FigChunkRetentionDays), indexGB),
		t.Monthly(PriceS3GBMonth, uploadsGB+chunksGB+indexGB))

	clusters := S + 1
	side = SideShared
	// The control writer takes the product directory's writes (inserts and
	// deletes, about two thirds of the changes) and the state changes.
	controlACU := math.Max(in.MinACU, L.ChangedPerDay*2/3/D.RowsPerSPerACU/secondsPerDay/f.V(FigDBCPUTarget))
	writerACUh := (S*D.WriterAvgACU + controlACU) * t.MonthHours
	readerACUh := (S*float64(D.ReadersPerShard)*D.ReaderACU + in.MinACU) * t.MonthHours
	add(ServiceAuroraCapacity, fmt.Sprintf("writers: %d shards x %.2f ACU + control %.2f ACU (averages)", D.Shards, D.WriterAvgACU, controlACU), writerACUh*t.Unit(PriceAuroraACUHour))
	add(ServiceAuroraCapacity, fmt.Sprintf("readers: %d shards x %d x %.2f ACU + control", D.Shards, D.ReadersPerShard, D.ReaderACU), readerACUh*t.Unit(PriceAuroraACUHour))
	directoryGB := L.RowsPerDay * 100 / 1e9
	add(ServiceAuroraStorage, fmt.Sprintf("%.0f GB of catalog + %.0f GB of product directory", D.StoredGB, directoryGB), (D.StoredGB+directoryGB)*t.Unit(PriceAuroraStorageGBMonth))
	ioW := L.ChangedPerMonth * f.V(FigIOPerRowWritten)
	ioR := L.ReadsPerMonth * f.V(FigIOPerRead)
	side = SideIngestion
	add(ServiceAuroraIO, fmt.Sprintf("%.3g write I/Os (%g a changed row)", ioW, f.V(FigIOPerRowWritten)), ioW*t.Unit(PriceAuroraIO))
	side = SideStorefront
	add(ServiceAuroraIO, fmt.Sprintf("%.3g read I/Os (%g a product read)", ioR, f.V(FigIOPerRead)), ioR*t.Unit(PriceAuroraIO))
	side = SideShared
	if in.RDSProxy {
		shardACU := math.Max(t.Unit(PriceRDSProxyMinACU), D.WriterAvgACU+float64(D.ReadersPerShard)*D.ReaderACU)
		controlProxyACU := math.Max(t.Unit(PriceRDSProxyMinACU), controlACU+in.MinACU)
		add(ServiceRDSProxy, fmt.Sprintf("%d proxies (shards + control), at least %g ACU each", int(clusters), t.Unit(PriceRDSProxyMinACU)), (S*shardACU+controlProxyACU)*t.MonthHours*t.Unit(PriceRDSProxyACUHour))
	}
	add(ServiceEndpoints, fmt.Sprintf("%d interface endpoints x %d AZs", in.InterfaceEndpoints, in.AZs), float64(in.InterfaceEndpoints*in.AZs)*t.MonthHours*t.Unit(PriceEndpointAZHour))
	readLogGB := L.ReadRequestsPerMonth * sf.logBytes / bytesPerGB
	otherLogGB := (calls-L.ReadRequestsPerMonth)*f.V(FigLogBytesPerInvocation)/bytesPerGB + L.APIRequestsPerMon*f.V(FigLogBytesPerAPIAccess)/bytesPerGB
	side = SideStorefront
	add(ServiceLogs, fmt.Sprintf("storefront: %.0f GB (a request's Lambda report lines and API access log line; the read function's own access line for %.1f%% of requests)", readLogGB, 100*sf.loggedShare), readLogGB*t.Unit(PriceLogsIngestGB))
	side = SideIngestion
	add(ServiceLogs, fmt.Sprintf("ingestion: %.0f GB", otherLogGB), otherLogGB*t.Unit(PriceLogsIngestGB))
	side = SideShared
	fixed := Deployment{Alarms: 10 + 5*D.Shards, Dashboards: 1, CustomMetrics: 30, Secrets: D.Shards + 2, KMSKeys: 1}
	add(ServiceMonitoring, fmt.Sprintf("%d alarms, a dashboard, %d EMF metrics", fixed.Alarms, fixed.CustomMetrics),
		float64(fixed.Alarms)*t.Unit(PriceAlarmMonth)+t.Unit(PriceDashboardMonth)+float64(fixed.CustomMetrics)*t.Unit(PriceCustomMetricMonth))
	add(ServiceSecrets, fmt.Sprintf("%d secrets, 1 KMS key", fixed.Secrets), float64(fixed.Secrets)*t.Unit(PriceSecretMonth)+t.Unit(PriceKMSKeyMonth))
	dtoGB := L.ReadRequestsPerMonth * sf.responseBytes / bytesPerGB
	side = SideStorefront
	add(ServiceDataTransfer, fmt.Sprintf("%.0f TB of storefront answers (tiered)", dtoGB/1024), t.Monthly(PriceDataTransferOutGB, dtoGB))

	// The report's cost per million changed rows and full-rewrite rule, on
	// a month of the whole system as one usage record.
	Sm := &m.Summary
	if L.ChangedPerMonth > 0 {
		Sm.USDPerMillionChanged = (Sm.IngestionUSD + Sm.SharedUSD) / L.ChangedPerMonth * 1e6
	}
	if L.ReadsPerMonth > 0 {
		Sm.USDPerMillionReads = Sm.StorefrontUSD / L.ReadsPerMonth * 1e6
	}
	Sm.USDPerMillionReadsOnePerRequest = Sm.USDPerMillionReads
	if in.ProductsPerRequest != 1 {
		one := in
		one.ProductsPerRequest = 1
		m1, err := p.RunModel(one)
		if err != nil {
			return nil, err
		}
		Sm.USDPerMillionReadsOnePerRequest = m1.Summary.USDPerMillionReads
	}
	var month usage.Usage
	month.RowsReceived = int64(L.RowsPerDay * daysPerMonth)
	month.RowsUpdated = int64(L.ChangedPerMonth)
	month.Chunks = int64(L.ChunksPerMonth)
	month.BytesUploaded = int64(L.BytesPerDay * daysPerMonth)
	for _, fu := range m.Functions {
		if strings.HasPrefix(fu.Name, "apply") {
			month.AddFunction(fu.Name, usage.FunctionUsage{Invocations: int64(fu.Invocations), MBms: int64(fu.GBs * usage.MBmsPerGBs)})
		}
	}
	Sm.FullRewriteExtraUSD = p.FullRewriteExtra(month)
	Sm.SavingRatio = (m.MonthlyUSD + Sm.FullRewriteExtraUSD) / m.MonthlyUSD

	m.ReadPaths = readPaths(p, in, m)
	m.Stack = stackDefaults(in, m)
	m.Quotas = quotas(in, m)
	m.Notes = []string{
		"Rows/s per shard scale the 2-core benchmark linearly with ACU (acu_per_vcpu); Aurora was not measured.",
		"Storefront reads are priced as sustained at read-qps all month: a daily curve with the same peak costs less.",
		fmt.Sprintf("The storefront reads %g products a request: API Gateway, Lambda invocations and duration, the log lines of a request and its response headers follow requests; database I/O and the products' bytes follow product reads. The stack parameters are sized for clients that read one product a request.", in.ProductsPerRequest),
		fmt.Sprintf("Analytics Parquet (DESIGN 8) adds ~%.0f GB of S3 a month, kept indefinitely: $%.0f more each month it accumulates (not in the total).",
			L.ChangedPerMonth*in.RowBytes*0.3/bytesPerGB, L.ChangedPerMonth*in.RowBytes*0.3/bytesPerGB*t.Unit(PriceS3GBMonth)),
		"Free tiers, savings plans, reserved capacity and private pricing are ignored.",
	}
	return m, nil
}

func btof(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// oneLeader says what breaks first when one PostgreSQL leader holds the
// whole catalog.
func oneLeader(m *Model, in ModelInput) string {
	D, L := m.Database, m.Load
	var parts []string
	parts = append(parts, fmt.Sprintf("storage: %.0f GB of rows against at most %.0f GiB of memory at %g ACU (%.0f%% cached at best), so fenced upserts and storefront misses become storage reads, and a restore, clone or full vacuum of one %.1f TB table takes hours",
		D.StoredGB, D.OneLeaderMemGB, m.figures.V(FigAuroraMaxACU), math.Min(100, 100*D.OneLeaderMemGB*1.074/D.StoredGB), D.StoredGB/1000))
	verdict := "not the limit"
	switch need := D.OneLeaderPeakACU / m.figures.V(FigDBCPUTarget); {
	case need > m.figures.V(FigAuroraMaxACU):
		verdict = fmt.Sprintf("beyond the largest instance (%.0f ACU planned at %.0f%% load)", need, 100*m.figures.V(FigDBCPUTarget))
	case need > in.MaxACU:
		verdict = fmt.Sprintf("over max-acu %g: a leader would need %.0f ACU", in.MaxACU, need)
	}
	parts = append(parts, fmt.Sprintf("writes: the diff leaves %.0f changed rows/s at the peak, %.1f ACU of the measured rate (%.0f rows/s per ACU): %s", L.PeakChangedPerS, D.OneLeaderPeakACU, D.RowsPerSPerACU, verdict))
	parts = append(parts, fmt.Sprintf("without the diff every received row would be written: %.0f rows/s, %.0f ACU", L.PeakRowsPerS, D.FullRewriteACU))
	if D.FullRewriteACU > m.figures.V(FigAuroraMaxACU) {
		parts[len(parts)-1] += fmt.Sprintf(", beyond the %g ACU of the largest instance", m.figures.V(FigAuroraMaxACU))
	}
	parts = append(parts, fmt.Sprintf("reads: %.0f product reads/s (%.0f requests/s) need ~%.0f ACU of readers, which replicas provide", in.ReadQPS, in.ReadQPS/in.ProductsPerRequest, D.ReadACU))
	return "First to break: " + strings.Join(parts, "; ") + "."
}

// readPaths prices the storefront's alternatives at the model's read rate.
func readPaths(p Pricer, in ModelInput, m *Model) []ModelReadPath {
	t, f := p.Prices, p.Figures
	sf := storefrontOf(in, f)
	reads := m.Load.ReadRequestsPerMonth // requests, each of in.ProductsPerRequest products
	respGB := reads * sf.responseBytes / bytesPerGB
	readS := sf.billedMs / 1000
	gb := float64(in.ReadMemoryMB) / 1024
	lambda := func(n float64) float64 {
		return n*readS*gb*t.Unit(PriceLambdaGBSecond) + n*t.Unit(PriceLambdaRequest)
	}
	// The Lambda platform's lines and the read function's sampled access
	// lines; the API's access log line apart (an ALB writes its own to S3).
	lambdaLogs := func(n float64) float64 {
		return n * (sf.logBytes - f.V(FigLogBytesPerAPIAccess)) / bytesPerGB * t.Unit(PriceLogsIngestGB)
	}
	accessLogs := func(n float64) float64 {
		return n * f.V(FigLogBytesPerAPIAccess) / bytesPerGB * t.Unit(PriceLogsIngestGB)
	}
	dto := t.Monthly(PriceDataTransferOutGB, respGB)
	path := func(name, tradeoff string, dbACU float64, lines ...ModelCost) ModelReadPath {
		rp := ModelReadPath{Name: name, Lines: lines, DBReadACU: dbACU, Tradeoff: tradeoff}
		for _, l := range lines {
			rp.USD += l.USD
		}
		return rp
	}
	dbACU := m.Database.ReadACU

	// ALB load balancer capacity units: the largest dimension.
	qps := sf.requestQPS
	gbPerHour := qps * (sf.responseBytes + 500) * 3600 / 1e9
	conns := qps / f.V(FigRequestsPerConnection)
	lcu := func(gbPerLCU float64) float64 {
		return math.Max(math.Max(conns/f.V(FigALBNewConnsPerLCU), conns*60/f.V(FigALBActiveConnsPerLCU)),
			math.Max(gbPerHour/gbPerLCU, qps/f.V(FigALBRuleEvalsPerLCU)))
	}
	alb := func(gbPerLCU float64) ModelCost {
		n := lcu(gbPerLCU)
		return mc("ALB", fmt.Sprintf("1 ALB + %.0f LCU (largest dimension: %.0f GB/h processed at %g GB/h an LCU)", n, gbPerHour, gbPerLCU),
			t.MonthHours*(t.Unit(PriceALBHour)+n*t.Unit(PriceALBLCUHour)))
	}

	h := in.CDNHitRatio
	misses := reads * (1 - h)
	vcpu := qps * sf.apiCPUus / 1e6 / f.V(FigContainerCPUTarget)
	tasks := max(2, int(math.Ceil(vcpu/2)))
	return []ModelReadPath{
		path("API Gateway HTTP API + Lambda (the design)", "no servers, scales per request; at one product a request the request price dominates the whole system's bill", dbACU,
			mc(ServiceAPIGateway, fmt.Sprintf("%.3g requests (tiered)", reads), t.Monthly(PriceAPIRequest, reads)),
			mc(ServiceLambda, fmt.Sprintf("%.3g invocations x %g ms x %g GB", reads, sf.billedMs, gb), lambda(reads)),
			mc(ServiceLogs, "report + access log lines", lambdaLogs(reads)+accessLogs(reads)),
			mc(ServiceDataTransfer, fmt.Sprintf("%.0f TB out", respGB/1024), dto)),
		path(fmt.Sprintf("CloudFront (%.0f%% hits) in front of API Gateway + Lambda", 100*h),
			"CloudFront's HTTPS request price (unverified in the price table) equals the HTTP API's, so at list price it saves the misses' Lambda, logs and database reads, not the request bill; needs cache rules (ETag revalidation, TTLs) and accepts staleness up to the TTL; hits need GETs (a batch-get is a POST, which CloudFront does not cache)", dbACU*(1-h),
			mc("CloudFront", fmt.Sprintf("%.3g HTTPS requests", reads), reads*t.Unit(PriceCloudFrontRequest)),
			mc("CloudFront", fmt.Sprintf("%.0f TB out (tiered)", respGB/1024), t.Monthly(PriceCloudFrontDataOutGB, respGB)),
			mc(ServiceAPIGateway, fmt.Sprintf("%.3g misses", misses), t.Monthly(PriceAPIRequest, misses)),
			mc(ServiceLambda, fmt.Sprintf("%.3g misses", misses), lambda(misses)),
			mc(ServiceLogs, "misses' log lines", lambdaLogs(misses)+accessLogs(misses))),
		path("ALB in front of the same Lambda", "no per-request API price; loses API Gateway's per-route throttling and usage plans (WAF can rate-limit), 1 MB Lambda response limit for ALB targets", dbACU,
			alb(f.V(FigALBGBHourPerLCULambda)),
			mc(ServiceLambda, fmt.Sprintf("%.3g invocations", reads), lambda(reads)),
			mc(ServiceLogs, "Lambda report lines (ALB access logs go to S3)", lambdaLogs(reads)),
			mc(ServiceDataTransfer, fmt.Sprintf("%.0f TB out", respGB/1024), dto)),
		path(fmt.Sprintf("Small container service: %d Fargate arm64 tasks (2 vCPU, 4 GB) behind an ALB", tasks),
			fmt.Sprintf("the cheapest at a steady %.0f requests/s (%.1f vCPU at %.0f us of CPU a request, %.0f%% planned); always-on, scales in minutes not milliseconds, one more thing to patch and deploy; the same handler code serves it (net/http)", qps, vcpu, sf.apiCPUus, 100*f.V(FigContainerCPUTarget)), dbACU,
			alb(f.V(FigALBGBHourPerLCU)),
			mc("Fargate", fmt.Sprintf("%d tasks x (2 vCPU + 4 GB) x %g h", tasks, t.MonthHours),
				float64(tasks)*t.MonthHours*(2*t.Unit(PriceFargateARMVCPUHour)+4*t.Unit(PriceFargateARMGBHour))),
			mc(ServiceDataTransfer, fmt.Sprintf("%.0f TB out", respGB/1024), dto)),
	}
}

// stackDefaults are the stack parameters the model implies: a storefront
// throttle 10% over the read rate (rounded up to 1,000) and read
// environments for that rate at the p99 duration.
func stackDefaults(in ModelInput, m *Model) ModelStackDefaults {
	rate := int(math.Ceil(in.ReadQPS*1.1/1000)) * 1000
	reserved := int(math.Ceil(float64(rate)*m.figures.V(FigReadP99ms)/1000/10)) * 10
	total := reserved + in.ApplySmallConcurrency + in.ApplyLargeConcurrency + in.DiffConcurrency
	for _, fu := range m.Functions {
		if fu.Configured == 0 && fu.Name != "read" {
			total += int(math.Ceil(fu.Concurrency))
		}
	}
	return ModelStackDefaults{APIRateLimit: max(rate, 1000), ReadReservedConcurrency: max(reserved, 10), Shards: m.Database.Shards,
		ReadersPerShard: m.Database.ReadersPerShard, LambdaConcurrency: total + int(m.figures.V(FigLambdaUnreservedMin))}
}

// quotas lists the account quotas the scale needs beyond the defaults.
func quotas(in ModelInput, m *Model) []ModelQuota {
	f := m.figures
	return []ModelQuota{
		{"API Gateway throttle per account and region (requests/s)", fmt.Sprintf("%.0f (burst 5,000)", f.V(FigAPIAccountRPSQuota)), fmt.Sprintf(">= %d (apiRateLimit) plus the other APIs of the account", m.Stack.APIRateLimit)},
		{"Lambda concurrent executions", fmt.Sprintf("%.0f (new accounts may start lower)", f.V(FigLambdaConcurrencyQuota)), fmt.Sprintf(">= %d (reserved read %d + apply %d + %d + diff %d + the rest + %.0f unreserved)", m.Stack.LambdaConcurrency, m.Stack.ReadReservedConcurrency, in.ApplySmallConcurrency, in.ApplyLargeConcurrency, in.DiffConcurrency, f.V(FigLambdaUnreservedMin))},
		{"SQS FIFO high-throughput messages/s per queue", fmt.Sprintf("%.0f per API action in us-east-1", f.V(FigFIFOTPSQuota)), fmt.Sprintf("%.1f chunks/s at the peak: the default suffices", m.Load.PeakChunksPerS)},
		{"Aurora DB clusters per region", "40", fmt.Sprintf("%d (shards + control)", m.Database.Shards+1)},
		{"RDS Proxies per account", "20", fmt.Sprintf("%d with rdsProxy", m.Database.Shards+1)},
	}
}

// mc is a storefront cost line.
func mc(service, what string, usd float64) ModelCost {
	return ModelCost{Service: service, What: what, USD: usd, Side: SideStorefront}
}

// storefrontRequest is what one storefront request of ProductsPerRequest
// products costs, term by term: what follows requests (duration, log
// lines, headers) and what follows the products in it.
type storefrontRequest struct {
	requestQPS    float64 // requests/s
	billedMs      float64 // Lambda's billed duration, whole milliseconds
	p99ms         float64
	dbCPUus       float64 // PostgreSQL CPU
	apiCPUus      float64 // the handler's CPU
	responseBytes float64 // headers once, each product's bytes
	loggedShare   float64 // of requests writing the read function's access line
	logBytes      float64 // CloudWatch Logs bytes
}

func storefrontOf(in ModelInput, f *Figures) storefrontRequest {
	k := in.ProductsPerRequest
	extra := k - 1
	product := f.V(FigResponseBytes) - f.V(FigResponseHeaderBytes)
	logged := in.ReadLogSample + (1-in.ReadLogSample)*f.V(FigReadAlwaysLoggedShare)
	return storefrontRequest{
		requestQPS:    in.ReadQPS / k,
		billedMs:      math.Ceil(f.V(FigReadBilledMs) + extra*f.V(FigReadMsPerExtraProduct)),
		p99ms:         f.V(FigReadP99ms) + extra*f.V(FigReadMsPerExtraProduct),
		dbCPUus:       f.V(FigReadDBCPUus) + extra*f.V(FigReadDBCPUusPerExtraProduct),
		apiCPUus:      f.V(FigReadAPICPUus) + extra*f.V(FigReadAPICPUusPerExtraProduct),
		responseBytes: f.V(FigResponseHeaderBytes) + k*product,
		loggedShare:   logged,
		logBytes:      f.V(FigLogBytesPerRead) + f.V(FigLogBytesPerAPIAccess) + logged*f.V(FigLogBytesPerReadAccess),
	}
}
