package costs

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Services, as the report groups costs.
const (
	ServiceLambda         = "Lambda"
	ServiceAPIGateway     = "API Gateway"
	ServiceS3             = "S3"
	ServiceSQS            = "SQS"
	ServiceSNS            = "SNS"
	ServiceAuroraIO       = "Aurora I/O"
	ServiceLogs           = "CloudWatch Logs"
	ServiceDataTransfer   = "Data transfer out"
	ServiceAuroraCapacity = "Aurora capacity"
	ServiceAuroraStorage  = "Aurora storage"
	ServiceRDSProxy       = "RDS Proxy"
	ServiceEndpoints      = "VPC endpoints"
	ServiceMonitoring     = "CloudWatch alarms and metrics"
	ServiceSecrets        = "Secrets Manager and KMS"
)

// VariableServices and FixedServices list the services in report order.
var (
	VariableServices = []string{ServiceLambda, ServiceAPIGateway, ServiceS3, ServiceSQS, ServiceSNS, ServiceAuroraIO, ServiceLogs, ServiceDataTransfer}
	FixedServices    = []string{ServiceAuroraCapacity, ServiceAuroraStorage, ServiceRDSProxy, ServiceEndpoints, ServiceMonitoring, ServiceSecrets}
)

// ChunkRows is the most rows a chunk holds (DESIGN 5).
const ChunkRows = catalog.MaxChunkRows

// bytesPerGB is the GB AWS bills storage and transfer in.
const bytesPerGB = 1 << 30

// Line is one priced part of a cost.
type Line struct {
	Service string  `json:"service"`
	Side    Side    `json:"side"`
	USD     float64 `json:"usd"`
}

// Pricer prices usage with a price table and the figures the report needs
// for what is not metered (I/O per row, log bytes).
type Pricer struct {
	Prices  *PriceTable
	Figures *Figures
}

// DefaultPricer prices with the embedded tables.
func DefaultPricer() Pricer { return Pricer{Prices: DefaultPrices(), Figures: DefaultFigures()} }

// Variable prices one retailer-day's usage in deployment d, first-tier unit
// prices (volume tiers apply to the account's month, not to one retailer's
// day). Uploads are stored for d's upload retention.
func (p Pricer) Variable(u usage.Usage, d Deployment) []Line {
	t, f := p.Prices, p.Figures
	lambda := func(side Side) float64 {
		return lambdaGBs(u, side)*t.Unit(PriceLambdaGBSecond) + float64(lambdaRequests(u, side))*t.Unit(PriceLambdaRequest)
	}
	logs := func(bytes float64) float64 { return bytes / bytesPerGB * t.Unit(PriceLogsIngestGB) }
	io := t.Unit(PriceAuroraIO)
	lines := []Line{
		{ServiceLambda, SideIngestion, lambda(SideIngestion)},
		{ServiceAPIGateway, SideIngestion, float64(u.APIRequests) * t.Unit(PriceAPIRequest)},
		{ServiceS3, SideIngestion, float64(u.S3ClassA)*t.Unit(PriceS3ClassA) + float64(u.S3ClassB)*t.Unit(PriceS3ClassB) +
			float64(u.S3ByteDays+u.BytesUploaded*int64(d.UploadRetentionDays))/bytesPerGB/t.DaysPerMonth()*t.Unit(PriceS3GBMonth)},
		{ServiceSQS, SideIngestion, float64(u.SQSStandard)*t.Unit(PriceSQSStandard) + float64(u.SQSFIFO)*t.Unit(PriceSQSFIFO)},
		{ServiceSNS, SideIngestion, float64(u.SNSPublishes) * t.Unit(PriceSNSPublish)},
		{ServiceAuroraIO, SideIngestion, float64(u.DBRowsWritten) * f.V(FigIOPerRowWritten) * io},
		{ServiceLogs, SideIngestion, logs(float64(lambdaRequests(u, SideIngestion))*f.V(FigLogBytesPerInvocation) + float64(u.APIRequests)*f.V(FigLogBytesPerAPIAccess))},
		{ServiceLambda, SideStorefront, lambda(SideStorefront)},
		// A storefront request is one read-function invocation, whatever
		// the products in it (a batch-get's reads count one per id).
		{ServiceAPIGateway, SideStorefront, float64(lambdaRequests(u, SideStorefront)) * t.Unit(PriceAPIRequest)},
		{ServiceAuroraIO, SideStorefront, float64(u.Reads) * f.V(FigIOPerRead) * io},
		{ServiceLogs, SideStorefront, logs(float64(lambdaRequests(u, SideStorefront)) * (f.V(FigLogBytesPerRead) + f.V(FigLogBytesPerAPIAccess)))},
		{ServiceDataTransfer, SideStorefront, float64(u.ReadBytes) / bytesPerGB * t.Unit(PriceDataTransferOutGB)},
	}
	return lines
}

// FullRewriteExtra is what the day would have cost more had the apply
// written every received row instead of only the changed ones: the rows not
// changed, each at the apply's cost per written row (the day's own apply
// Lambda cost per changed row when it had any, otherwise the benchmark's
// rate) plus its database I/O, and the chunks they would have filled, each
// with its S3 PUT and GET, three FIFO requests, one SNS publish and its
// chunk object kept for the chunk retention.
func (p Pricer) FullRewriteExtra(u usage.Usage) float64 {
	extraRows := u.RowsReceived - u.RowsChanged()
	if extraRows <= 0 {
		return 0
	}
	t, f := p.Prices, p.Figures
	perRow := f.V(FigIOPerRowWritten) * t.Unit(PriceAuroraIO)
	var applyMBms, applyCalls int64
	for name, fu := range u.Functions {
		if strings.HasPrefix(name, "apply") {
			applyMBms += fu.MBms
			applyCalls += fu.Invocations
		}
	}
	if changed := u.RowsChanged(); changed > 0 && applyMBms > 0 {
		perRow += (float64(applyMBms)/usage.MBmsPerGBs*t.Unit(PriceLambdaGBSecond) + float64(applyCalls)*t.Unit(PriceLambdaRequest)) / float64(changed)
	} else {
		// One environment of the benchmark applied rows at its share of the
		// database's measured rate; 1 GB is the apply function's memory.
		perWorker := f.V(FigApplyChangeRowsPerS) / f.V(FigApplyBenchWorkers)
		perRow += 1 / perWorker * t.Unit(PriceLambdaGBSecond)
	}
	extraChunks := int64(math.Ceil(float64(u.RowsReceived)/ChunkRows)) - u.Chunks
	if extraChunks < 0 {
		extraChunks = 0
	}
	bytesPerRow := 0.0
	if u.RowsReceived > 0 {
		bytesPerRow = float64(u.BytesUploaded) / float64(u.RowsReceived)
	}
	perChunk := t.Unit(PriceS3ClassA) + t.Unit(PriceS3ClassB) + 3*t.Unit(PriceSQSFIFO) + t.Unit(PriceSNSPublish) +
		ChunkRows*bytesPerRow*f.V(FigChunkRetentionDays)/bytesPerGB/t.DaysPerMonth()*t.Unit(PriceS3GBMonth)
	return float64(extraRows)*perRow + float64(extraChunks)*perChunk
}

// Deployment is the size of the shared, always-on resources: what the
// report's fixed costs are computed from. The deployment passes it in
// configuration (ParseDeployment); DefaultDeployment is cdk.json's.
type Deployment struct {
	// Clusters is the Aurora clusters: shards + the control cluster.
	Clusters int `json:"clusters"`
	// InstancesPerCluster is the writer + readers of each cluster.
	InstancesPerCluster int `json:"instances_per_cluster"`
	// AverageACU is the average Serverless v2 capacity of an instance
	// (the minimum when nothing better is known; CloudWatch's
	// ServerlessDatabaseCapacity gives the real one).
	AverageACU float64 `json:"average_acu"`
	// StorageGB is the Aurora storage of all clusters.
	StorageGB float64 `json:"storage_gb"`
	// RDSProxy is one proxy per cluster.
	RDSProxy bool `json:"rds_proxy"`
	// InterfaceEndpoints is the VPC interface endpoints, each in AZs zones.
	InterfaceEndpoints int `json:"interface_endpoints"`
	AZs                int `json:"azs"`
	Alarms             int `json:"alarms"`
	Dashboards         int `json:"dashboards"`
	// CustomMetrics is the EMF metrics (name x dimension set).
	CustomMetrics int `json:"custom_metrics"`
	Secrets       int `json:"secrets"`
	KMSKeys       int `json:"kms_keys"`
	// UploadRetentionDays is how long uploaded files are kept (their S3
	// storage is the uploading retailer's).
	UploadRetentionDays int `json:"upload_retention_days"`
}

// DefaultDeployment is the stack cdk.json deploys: 2 shards + control, one
// reader each, 0.5 ACU minimum, RDS Proxies, SQS, Secrets Manager, SNS and
// Lambda endpoints in 2 AZs, the alarms and the dashboard of
// infra/monitoring.go, a secret per cluster, the admin token's and the
// webhook keys'.
func DefaultDeployment() Deployment {
	return Deployment{
		Clusters: 3, InstancesPerCluster: 2, AverageACU: 0.5, StorageGB: 10, RDSProxy: true,
		InterfaceEndpoints: 4, AZs: 2, Alarms: 20, Dashboards: 1, CustomMetrics: 30, Secrets: 5, KMSKeys: 1,
		UploadRetentionDays: 14,
	}
}

// deploymentKeys maps ParseDeployment's keys to fields.
func (d *Deployment) fields() map[string]any {
	return map[string]any{
		"clusters": &d.Clusters, "instances": &d.InstancesPerCluster, "acu": &d.AverageACU,
		"storage_gb": &d.StorageGB, "proxy": &d.RDSProxy, "endpoints": &d.InterfaceEndpoints,
		"azs": &d.AZs, "alarms": &d.Alarms, "dashboards": &d.Dashboards, "metrics": &d.CustomMetrics,
		"secrets": &d.Secrets, "kms": &d.KMSKeys, "upload_retention_days": &d.UploadRetentionDays,
	}
}

// ParseDeployment reads "key=value,..." over DefaultDeployment: clusters,
// instances, acu, storage_gb, proxy, endpoints, azs, alarms, dashboards,
// metrics, secrets, kms, upload_retention_days. An empty string gives the
// default.
func ParseDeployment(s string) (Deployment, error) {
	d := DefaultDeployment()
	fields := d.fields()
	var errs []error
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		dst, known := fields[strings.TrimSpace(k)]
		if !ok || !known {
			errs = append(errs, fmt.Errorf("deployment: %q: want key=value with a key among %s", kv, strings.Join(deploymentKeyNames(fields), ", ")))
			continue
		}
		v = strings.TrimSpace(v)
		var err error
		switch x := dst.(type) {
		case *int:
			*x, err = strconv.Atoi(v)
			if err == nil && *x < 0 {
				err = errors.New("negative")
			}
		case *float64:
			*x, err = strconv.ParseFloat(v, 64)
			if err == nil && (*x < 0 || math.IsNaN(*x) || math.IsInf(*x, 0)) {
				err = errors.New("not a non-negative number")
			}
		case *bool:
			*x, err = strconv.ParseBool(v)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deployment: %s: %w", k, err))
		}
	}
	return d, errors.Join(errs...)
}

func deploymentKeyNames(fields map[string]any) []string {
	return slices.Sorted(maps.Keys(fields))
}

// String is the ParseDeployment form of d.
func (d Deployment) String() string {
	return fmt.Sprintf("clusters=%d,instances=%d,acu=%g,storage_gb=%g,proxy=%t,endpoints=%d,azs=%d,alarms=%d,dashboards=%d,metrics=%d,secrets=%d,kms=%d,upload_retention_days=%d",
		d.Clusters, d.InstancesPerCluster, d.AverageACU, d.StorageGB, d.RDSProxy, d.InterfaceEndpoints, d.AZs,
		d.Alarms, d.Dashboards, d.CustomMetrics, d.Secrets, d.KMSKeys, d.UploadRetentionDays)
}

// FixedDaily prices one day of the shared, always-on resources.
func (p Pricer) FixedDaily(d Deployment) []Line {
	t := p.Prices
	perMonth := 1 / t.DaysPerMonth()
	instanceACU := float64(d.Clusters*d.InstancesPerCluster) * d.AverageACU
	proxy := 0.0
	if d.RDSProxy {
		perCluster := math.Max(t.Unit(PriceRDSProxyMinACU), float64(d.InstancesPerCluster)*d.AverageACU)
		proxy = float64(d.Clusters) * perCluster * 24 * t.Unit(PriceRDSProxyACUHour)
	}
	return []Line{
		{ServiceAuroraCapacity, SideShared, instanceACU * 24 * t.Unit(PriceAuroraACUHour)},
		{ServiceAuroraStorage, SideShared, d.StorageGB * t.Unit(PriceAuroraStorageGBMonth) * perMonth},
		{ServiceRDSProxy, SideShared, proxy},
		{ServiceEndpoints, SideShared, float64(d.InterfaceEndpoints*d.AZs) * 24 * t.Unit(PriceEndpointAZHour)},
		{ServiceMonitoring, SideShared, (float64(d.Alarms)*t.Unit(PriceAlarmMonth) + float64(d.Dashboards)*t.Unit(PriceDashboardMonth) +
			float64(d.CustomMetrics)*t.Unit(PriceCustomMetricMonth)) * perMonth},
		{ServiceSecrets, SideShared, (float64(d.Secrets)*t.Unit(PriceSecretMonth) + float64(d.KMSKeys)*t.Unit(PriceKMSKeyMonth)) * perMonth},
	}
}

// sum adds the lines' USD.
func sum(lines []Line) float64 {
	total := 0.0
	for _, l := range lines {
		total += l.USD
	}
	return total
}
