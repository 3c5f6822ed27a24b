package costs

import (
	"bytes"
	"encoding/json"
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
	m, err := DefaultPricer().RunModel(DefaultModelInput())
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
