package costs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

func approx(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*math.Max(1, math.Abs(want)) {
		t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestModelReproducesAHandComputedExample: a small deployment, every
// figure below computed by hand from the inputs, prices.json and
// figures.json.
func TestModelReproducesAHandComputedExample(t *testing.T) {
	t.Parallel()
	in := DefaultModelInput()
	in.Retailers, in.Products, in.ChangePct, in.ReadQPS = 1000, 10000, 2, 100
	in.PeakShare, in.PeakHours, in.RowBytes, in.LargestRetailer = 0.5, 5, 1000, 1_000_000
	in.ProductsPerRequest = 1 // one GET per product: TestModelStorefrontBothWays has the batched storefront
	m, err := DefaultPricer().RunModel(in)
	if err != nil {
		t.Fatal(err)
	}
	const tol = 1e-6

	// Load: 1,000 x 10,000 = 10,000,000 rows a day; 2% of 10,000 = 200
	// changed rows an upload -> 200,000 a day, one chunk (<= 5,000 rows)
	// an upload -> 1,000 chunks. Half of it in 5 h = 18,000 s:
	// 5,000,000 / 18,000 = 277.78 rows/s received, 100,000 / 18,000 =
	// 5.5556 changed rows/s, 500 / 18,000 = 0.027778 uploads/s.
	L := m.Load
	approx(t, "rows a day", L.RowsPerDay, 10_000_000, tol)
	approx(t, "changed rows a day", L.ChangedPerDay, 200_000, tol)
	approx(t, "chunks a day", L.ChunksPerDay, 1000, tol)
	approx(t, "peak rows/s", L.PeakRowsPerS, 5_000_000.0/18_000, tol)
	approx(t, "peak changed rows/s", L.PeakChangedPerS, 100_000.0/18_000, tol)
	approx(t, "peak uploads/s", L.PeakUploadsPerS, 500.0/18_000, tol)

	// Database: 10M rows x 1,000 B x 1.25 = 12.5 GB -> 1 shard by storage.
	// Measured 10,800 changed rows/s on 2 cores = 8 ACU -> 1,350 rows/s per
	// ACU -> 21,600 at 16 ACU; 5.56 rows/s needs 1 shard. Reads: 100 QPS x
	// 135 us = 0.0135 vCPU x 4 ACU/vCPU / 0.6 = 0.09 ACU.
	D := m.Database
	approx(t, "stored GB", D.StoredGB, 12.5, tol)
	approx(t, "rows/s per ACU", D.RowsPerSPerACU, 1350, tol)
	approx(t, "writer rows/s", D.WriterRowsPerS, 21600, tol)
	if D.Shards != 1 || D.ShardsByStorage != 1 || D.ShardsByWrites != 1 {
		t.Errorf("shards %d (storage %d, writes %d), want 1", D.Shards, D.ShardsByStorage, D.ShardsByWrites)
	}
	approx(t, "read ACU", D.ReadACU, 0.09, tol)

	// Functions. read: 100 QPS x 730 h x 3,600 s = 262,800,000 a month,
	// 5 ms at 1 GB; concurrency 100 x 10 ms (p99) = 1. diff: 3,008 MB /
	// 1,769 MB a vCPU = 1.7004 vCPU -> 550,000 x 1.7004 / 2 = 467,609 rows/s;
	// 0.5 s + 10,000 / 467,609 = 0.521386 s an upload. apply: 10,800 / 4
	// workers = 2,700 rows/s; 0.05 s + 200 / 2,700 = 0.124074 s a chunk.
	fns := map[string]ModelFunction{}
	for _, f := range m.Functions {
		fns[f.Name] = f
	}
	approx(t, "read invocations", fns["read"].Invocations, 262_800_000, tol)
	approx(t, "read concurrency", fns["read"].Concurrency, 1, tol)
	diffS := 0.5 + 10000/(550000*(3008.0/1769)/2)
	approx(t, "diff duration", fns["diff"].DurationS, diffS, tol)
	approx(t, "apply duration", fns["apply-small"].DurationS, 0.05+200.0/2700, tol)

	// Drain: diff capacity 10 / 0.521386 = 19.18 uploads/s against 0.0278
	// arriving: the busiest stage at 0.145%; everything keeps up. Had the
	// 500 uploads of the window arrived at once: 500 / 19.18 / 3600 h.
	Dr := m.Drain
	if Dr.Bottleneck != "diff" || !Dr.KeepsUp {
		t.Errorf("bottleneck %q keeps up %v, want diff, true", Dr.Bottleneck, Dr.KeepsUp)
	}
	approx(t, "diff utilization", Dr.Stages[0].Utilization, (500.0/18000)/(10/diffS), tol)
	approx(t, "all at once", Dr.AllAtOnceH, 500/(10/diffS)/3600, tol)
	approx(t, "shard writers capacity", Dr.Stages[3].Capacity, 21600, tol)

	// Monthly, by hand. read Lambda: 262.8M x 0.005 s x 1 GB = 1,314,000
	// GB-s x $0.0000133334 = $17.5201 + 262.8M x $0.20/M = $52.56.
	// API Gateway: 262.8M reads + 1,000 x 30.4167 days x 5 = 152,083 upload
	// requests, under the 300M tier: $262.952. Data transfer: 262.8M x
	// 2,300 B / 2^30 = 562.93 GB x $0.09 = $50.66.
	line := func(service, prefix string) float64 {
		total := 0.0
		for _, c := range m.Monthly {
			if c.Service == service && strings.HasPrefix(c.What, prefix) {
				total += c.USD
			}
		}
		return total
	}
	approx(t, "read Lambda $", line(ServiceLambda, "read:"), 1_314_000*0.0000133334+52.56, 1e-9)
	approx(t, "API Gateway $", line(ServiceAPIGateway, ""), (262_800_000+1000*730.0/24*5)*0.000001, 1e-9)
	approx(t, "data transfer $", line(ServiceDataTransfer, ""), 262_800_000*2300.0/(1<<30)*0.09, 1e-9)
	// Aurora capacity: 1 shard + control, writer and one reader each, all at
	// the 0.5 ACU minimum: 4 x 0.5 x 730 h x $0.12 = $175.20. RDS Proxy: 2
	// proxies at the 8 ACU minimum: 16 x 730 x $0.015 = $175.20.
	approx(t, "Aurora capacity $", line(ServiceAuroraCapacity, ""), 4*0.5*730*0.12, 1e-9)
	approx(t, "RDS Proxy $", line(ServiceRDSProxy, ""), 16*730*0.015, 1e-9)
	sum := 0.0
	for _, c := range m.Monthly {
		sum += c.USD
	}
	approx(t, "monthly total is the sum of its lines", m.MonthlyUSD, sum, 1e-12)
	approx(t, "sides add up", m.Summary.IngestionUSD+m.Summary.StorefrontUSD+m.Summary.SharedUSD, m.MonthlyUSD, 1e-12)

	// Stack: 100 QPS + 10% -> 1,000 (rounded up to a thousand); 1,000 x 10
	// ms = 10 read environments.
	if m.Stack.APIRateLimit != 1000 || m.Stack.ReadReservedConcurrency != 10 {
		t.Errorf("stack defaults %+v, want apiRateLimit 1000, readReservedConcurrency 10", m.Stack)
	}

	// The largest retailer: 1M x 2% = 20,000 changed rows, 4 chunks, under
	// the 100,000 threshold: apply-small.
	if m.Largest.Chunks != 4 || m.Largest.Queue != "apply-small.fifo" {
		t.Errorf("largest: %d chunks via %s", m.Largest.Chunks, m.Largest.Queue)
	}
}

// TestModelAtDesignScale checks the shape of the answer at DESIGN 1's
// scale: what docs/SCALE.md quotes.
func TestModelAtDesignScale(t *testing.T) {
	t.Parallel()
	// One GET per product: the read paths compared below cache GETs (a
	// batch-get is a POST); TestModelStorefrontTarget has the batched bill.
	in := DefaultModelInput()
	in.ProductsPerRequest = 1
	m, err := DefaultPricer().RunModel(in)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "rows a day", m.Load.RowsPerDay, 2e9, 1e-9)
	approx(t, "changed rows a day", m.Load.ChangedPerDay, 60e6, 1e-9)
	// 2e9 x 0.8 / (6 x 3600) = 74,074 rows/s received at the peak: within
	// DESIGN 1's "50-100K row writes/s before diffing".
	if p := m.Load.PeakRowsPerS; p < 50000 || p > 100000 {
		t.Errorf("peak rows/s %v outside DESIGN 1's 50-100K", p)
	}
	if m.Database.Shards != 5 || !m.Drain.KeepsUp {
		t.Errorf("shards %d, keeps up %v", m.Database.Shards, m.Drain.KeepsUp)
	}
	if m.Largest.Queue != "apply-large.fifo" || m.Largest.ShardShare > 0.5 {
		t.Errorf("largest retailer via %s with %.0f%% of its shard", m.Largest.Queue, 100*m.Largest.ShardShare)
	}
	// The design's read path costs more than the alternatives, and a
	// container service the least.
	rp := m.ReadPaths
	if !(rp[0].USD > rp[1].USD && rp[1].USD > rp[2].USD && rp[2].USD > rp[3].USD) {
		t.Errorf("read paths not in the expected order: %v %v %v %v", rp[0].USD, rp[1].USD, rp[2].USD, rp[3].USD)
	}
	var text, js bytes.Buffer
	if err := m.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== Shards", "== Lambda concurrency per function", "== Time to drain the overnight peak",
		"== Queue limits", "== $ per month by service", "== Storefront read path", "README.md Performance", "price table " + DefaultPrices().Version,
		"apiRateLimit >= 25000", "readReservedConcurrency >= 250"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("model text lacks %q", want)
		}
	}
	if err := m.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
		t.Errorf("model JSON: %v", err)
	}
	bad := DefaultModelInput()
	bad.ChangePct = 0
	if _, err := DefaultPricer().RunModel(bad); err == nil {
		t.Error("0% change accepted")
	}
}

// TestModelStorefrontBothWays: the same product reads, one a request and
// 20 a request (batch-get), computed by hand from prices.json and
// figures.json: API Gateway, Lambda (invocations and billed duration), the
// request's log lines and its headers follow requests; Aurora I/O and the
// products' bytes follow product reads; the read function's access lines
// follow the sampling rate.
func TestModelStorefrontBothWays(t *testing.T) {
	t.Parallel()
	const tol = 1e-9
	const month = 730 * 3600.0
	line := func(m *Model, service, prefix string) float64 {
		total := 0.0
		for _, c := range m.Monthly {
			if c.Service == service && c.Side == SideStorefront && strings.HasPrefix(c.What, prefix) {
				total += c.USD
			}
		}
		return total
	}
	for _, c := range []struct {
		k, sample float64
		billedMs  float64
	}{
		{1, 0.01, 5},  // 5 ms
		{20, 0.01, 7}, // 5 + 19 x 0.1 = 6.9 ms, billed 7
		{20, 1, 7},
		{100, 0, 15}, // 5 + 99 x 0.1 = 14.9 ms, billed 15
	} {
		in := DefaultModelInput()
		in.Retailers, in.Products, in.ReadQPS = 1000, 10000, 100
		in.ProductsPerRequest, in.ReadLogSample = c.k, c.sample
		m, err := DefaultPricer().RunModel(in)
		if err != nil {
			t.Fatal(err)
		}
		reads := 100 * month    // 262.8M product reads a month
		requests := reads / c.k // each of k products
		approx(t, "product reads", m.Load.ReadsPerMonth, reads, tol)
		approx(t, "requests", m.Load.ReadRequestsPerMonth, requests, tol)
		// API Gateway: per request, the month's total under the 300M tier.
		approx(t, "API Gateway $", line(m, ServiceAPIGateway, ""), requests*0.000001, tol)
		// Lambda: per request, billed in whole ms at 1 GB.
		approx(t, "read Lambda $", line(m, ServiceLambda, "read:"), requests*c.billedMs/1000*0.0000133334+requests*0.0000002, tol)
		// Logs: a request's 300 B of Lambda lines and 400 B API access line,
		// plus the read function's 350 B line for the sampled share and
		// the 1% of requests always logged.
		logged := c.sample + (1-c.sample)*0.01
		approx(t, "storefront logs $", line(m, ServiceLogs, "storefront"), requests*(300+400+logged*350)/(1<<30)*0.5, tol)
		// Data transfer: 300 B of headers a request, 2,000 B a product.
		approx(t, "data transfer $", line(m, ServiceDataTransfer, ""), requests*(300+c.k*2000)/(1<<30)*0.09, tol)
		// Aurora I/O: 0.2 a product read, whatever the batching.
		approx(t, "read I/O $", line(m, ServiceAuroraIO, ""), reads*0.2*0.0000002, tol)
		// Database CPU: 135 us a request + 15 us a further product.
		approx(t, "read ACU", m.Database.ReadACU, requests/month*(135+(c.k-1)*15)/1e6*4/0.6, tol)
		approx(t, "read concurrency", m.Functions[0].Concurrency, requests/month*(10+(c.k-1)*0.1)/1000, tol)
		// The stack stays sized for clients that read one product a request.
		if m.Stack.APIRateLimit != 1000 || m.Stack.ReadReservedConcurrency != 10 {
			t.Errorf("k=%v: stack defaults %+v", c.k, m.Stack)
		}
		approx(t, "$ per million product reads", m.Summary.USDPerMillionReads, m.Summary.StorefrontUSD/reads*1e6, tol)
	}
}

// TestModelStorefrontTarget: at DESIGN 1's scale, 22K product reads/s,
// batching 20 a request brings the storefront to at most $0.34 per
// million product reads, a fifth of one request per product ($1.70), from
// the same price table; the output prints both.
func TestModelStorefrontTarget(t *testing.T) {
	t.Parallel()
	m, err := DefaultPricer().RunModel(DefaultModelInput())
	if err != nil {
		t.Fatal(err)
	}
	Sm := m.Summary
	if Sm.USDPerMillionReads > 0.34 {
		t.Errorf("$%.3f per million product reads with batch-get, want <= $0.34", Sm.USDPerMillionReads)
	}
	approx(t, "one product a request", Sm.USDPerMillionReadsOnePerRequest, 1.70, 0.01)
	if Sm.USDPerMillionReadsOnePerRequest < 5*Sm.USDPerMillionReads {
		t.Errorf("batching saves %.1fx, want >= 5x", Sm.USDPerMillionReadsOnePerRequest/Sm.USDPerMillionReads)
	}
	one := DefaultModelInput()
	one.ProductsPerRequest = 1
	m1, err := DefaultPricer().RunModel(one)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "the same as a run at one a request", m1.Summary.USDPerMillionReads, Sm.USDPerMillionReadsOnePerRequest, 1e-12)
	var text bytes.Buffer
	if err := m.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("storefront: $%.2f per million product reads at 20 products a request; $%.2f at one product a request", Sm.USDPerMillionReads, Sm.USDPerMillionReadsOnePerRequest)
	if !strings.Contains(text.String(), want) {
		t.Errorf("model text lacks %q", want)
	}
	for _, bad := range []float64{0, 0.5, 101} {
		in := DefaultModelInput()
		in.ProductsPerRequest = bad
		if _, err := DefaultPricer().RunModel(in); err == nil {
			t.Errorf("%v products a request accepted", bad)
		}
	}
}
