package main

import (
	"context"
	"flag"

	"github.com/retailcatalog/catalog/functions/finance/costs"
)

func init() {
	register(&Command{
		Name: "model", Token: NoToken,
		Summary: "capacity and monthly cost of the whole system at a given scale",
		Help: `Prints, for the scale given (DESIGN 1's by default: 100,000 retailers x 20,000
products, 3% changed a day, 22,000 storefront product reads/s, 20 a request by
batch-get): the daily write load,
shards and what one PostgreSQL leader would hit first, Lambda concurrency per
function, the time to drain the overnight peak against each limit (diff
concurrency, SQS FIFO throughput, apply concurrency, rows/s per shard), queue
limits, the largest retailer, $ per month by service, the cost per million product reads (with and without batch-get), the storefront read path
against a CDN, an ALB and a small container service, the stack parameters and
account quotas the scale needs, and every figure used with its source.

Per-row figures come from the project's benchmarks (README.md 'Performance',
docs/PERFORMANCE.md), prices from the dated table functions/finance/costs/prices.json;
both are embedded and named in the output. It needs no API and no token.
docs/SCALE.md answers the scale questions with this command's output.`,
		Flags: func(fs *flag.FlagSet) Runner {
			in := costs.DefaultModelInput()
			fs.IntVar(&in.Retailers, "retailers", in.Retailers, "retailers")
			fs.IntVar(&in.Products, "products", in.Products, "products per retailer, on average")
			fs.Float64Var(&in.ChangePct, "change-pct", in.ChangePct, "percent of a snapshot's rows that change a day")
			fs.Float64Var(&in.ReadQPS, "read-qps", in.ReadQPS, "storefront product reads per second, sustained")
			fs.Float64Var(&in.ProductsPerRequest, "products-per-request", in.ProductsPerRequest, "products a storefront request reads (1-100: a batch-get of a page; 1: one GET per product)")
			fs.Float64Var(&in.ReadLogSample, "read-log-sample", in.ReadLogSample, "share of the read function's fast successful requests that write an access log line (errors and slow ones always do)")
			fs.Float64Var(&in.PeakShare, "peak-share", in.PeakShare, "share of the day's uploads arriving in the overnight window")
			fs.Float64Var(&in.PeakHours, "peak-hours", in.PeakHours, "length of the overnight window, hours")
			fs.Float64Var(&in.RowBytes, "row-bytes", in.RowBytes, "bytes of a product in a snapshot")
			fs.IntVar(&in.LargestRetailer, "largest", in.LargestRetailer, "products of the largest retailer")
			fs.Float64Var(&in.CDNHitRatio, "cdn-hit", in.CDNHitRatio, "share of storefront reads a CDN would answer")
			fs.Float64Var(&in.ShardMaxGB, "shard-max-gb", in.ShardMaxGB, "most data a shard should hold, GB")
			fs.IntVar(&in.Shards, "shards", in.Shards, "shards (0: computed)")
			fs.Float64Var(&in.MinACU, "min-acu", in.MinACU, "Serverless v2 minimum ACU of an instance (cdk.json minAcu)")
			fs.Float64Var(&in.MaxACU, "max-acu", in.MaxACU, "Serverless v2 maximum ACU of an instance (cdk.json maxAcu)")
			fs.IntVar(&in.ApplySmallConcurrency, "apply-small", in.ApplySmallConcurrency, "apply-small reserved concurrency (cdk.json applySmallConcurrency)")
			fs.IntVar(&in.ApplyLargeConcurrency, "apply-large", in.ApplyLargeConcurrency, "apply-large reserved concurrency (cdk.json applyLargeConcurrency)")
			fs.IntVar(&in.DiffConcurrency, "diff-concurrency", in.DiffConcurrency, "diff event source maximum concurrency (cdk.json diffMaxConcurrency)")
			fs.IntVar(&in.InflightCap, "inflight-cap", in.InflightCap, "chunks of one retailer in flight (cdk.json inflightCap)")
			fs.IntVar(&in.LargeThresholdRows, "large-threshold", in.LargeThresholdRows, "changed rows from which a generation goes to apply-large")
			fs.IntVar(&in.ReadMemoryMB, "read-memory", in.ReadMemoryMB, "read function memory, MB (cdk.json readMemoryMB)")
			fs.IntVar(&in.UploadRetentionDays, "retention-days", in.UploadRetentionDays, "days uploads are kept (cdk.json uploadRetentionDays)")
			fs.BoolVar(&in.RDSProxy, "rds-proxy", in.RDSProxy, "an RDS Proxy per cluster (cdk.json rdsProxy)")
			asJSON := fs.Bool("json", false, "print the model as JSON")
			return func(ctx context.Context, c *Call, args []string) error {
				if len(args) != 0 {
					return c.Usagef("no arguments expected, got %q", args)
				}
				if err := in.Validate(); err != nil {
					return c.Usagef("%v", err)
				}
				m, err := costs.DefaultPricer().RunModel(in)
				if err != nil {
					return err
				}
				if *asJSON {
					return m.WriteJSON(c.Stdout)
				}
				return m.WriteText(c.Stdout)
			}
		},
	})
}
