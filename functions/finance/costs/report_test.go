package costs

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"
)

// day returns 2026-11-01 plus n days.
func day(n int) time.Time { return time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n) }

// retailerDay is a plausible metered day of a retailer uploading rows
// products with changePct% changed and serving reads storefront reads, as
// the functions record it.
func retailerDay(date, id string, rows int64, changePct float64, reads int64) usage.DayUsage {
	changed := int64(float64(rows) * changePct / 100)
	chunks := (changed + ChunkRows - 1) / ChunkRows
	u := usage.Usage{
		Uploads: 1, BytesUploaded: rows * 2000, RowsReceived: rows,
		RowsInserted: changed / 3, RowsUpdated: changed - 2*(changed/3), RowsDeleted: changed / 3,
		Chunks: chunks, DBRowsWritten: 2 * changed, Reads: reads, ReadBytes: reads * 2300, APIRequests: 5,
		S3ClassA: 3 + chunks, S3ClassB: 3 + chunks, S3ByteDays: changed * 2000 * 7,
		SQSStandard: 3, SQSFIFO: 3 * chunks, SNSPublishes: chunks + 1,
	}
	u.AddFunction("upload", usage.FunctionUsage{Invocations: 5, MBms: 5 * 20 * 512})
	u.AddFunction("diff", usage.FunctionUsage{Invocations: 1, MBms: (500 + rows*1000/467000) * 3008})
	u.AddFunction("apply-small", usage.FunctionUsage{Invocations: chunks, MBms: (50*chunks + changed*1000/2700) * 1024})
	if reads > 0 {
		u.AddFunction("read", usage.FunctionUsage{Invocations: reads, MBms: reads * 5 * 1024})
	}
	return usage.DayUsage{Date: date, RetailerID: id, Usage: u}
}

// sampleUsage is days x retailers of random but deterministic usage, with
// one day (index 2) without any.
func sampleUsage(days, retailers int) []usage.DayUsage {
	rng := rand.New(rand.NewPCG(1, 2))
	var out []usage.DayUsage
	for d := range days {
		if d == 2 {
			continue
		}
		for r := range retailers {
			if rng.IntN(5) == 0 {
				continue
			}
			rows := int64(1000 + rng.IntN(200000))
			out = append(out, retailerDay(day(d).Format(usage.DateLayout), fmt.Sprintf("retailer-%02d", r), rows, 1+rng.Float64()*5, int64(rng.IntN(500000))))
		}
	}
	return out
}

func sampleReport(t testing.TB, days, retailers int) *Report {
	t.Helper()
	r, err := DefaultPricer().BuildReport(ReportInput{
		From: day(0), To: day(days - 1), Usage: sampleUsage(days, retailers), Deployment: DefaultDeployment(),
		ReadsNote: "Storefront reads: counted in memory and flushed every 5 s (test data).",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func TestReportTotalsAreTheSumOfTheirParts(t *testing.T) {
	t.Parallel()
	r := sampleReport(t, 7, 12)
	if len(r.Days) != 7 {
		t.Fatalf("days: got %d, want 7 (a day without usage is still a day)", len(r.Days))
	}
	var total Total
	retailerTotal := 0.0
	for _, rt := range r.Retailers {
		retailerTotal += rt.TotalUSD
		if !near(rt.TotalUSD, rt.VariableUSD+rt.SharedUSD) || !near(rt.VariableUSD, rt.IngestionUSD+rt.StorefrontUSD) {
			t.Errorf("retailer %s: total %v != variable %v + shared %v, or sides do not add up", rt.RetailerID, rt.TotalUSD, rt.VariableUSD, rt.SharedUSD)
		}
	}
	for _, d := range r.Days {
		var rows, services float64
		var variable float64
		for _, row := range r.Rows {
			if row.Date != d.Date {
				continue
			}
			lines := 0.0
			for _, l := range row.Lines {
				lines += l.USD
			}
			if !near(row.VariableUSD, lines) || !near(row.TotalUSD, row.VariableUSD+row.SharedUSD) ||
				!near(row.VariableUSD, row.IngestionUSD+row.StorefrontUSD) {
				t.Errorf("%s %s: variable %v (lines %v), shared %v, total %v do not add up", row.Date, row.RetailerID, row.VariableUSD, lines, row.SharedUSD, row.TotalUSD)
			}
			rows += row.TotalUSD
			variable += row.VariableUSD
		}
		for _, v := range d.ByService {
			services += v
		}
		if !near(d.TotalUSD, rows+d.UnallocatedUSD) || !near(d.TotalUSD, services) || !near(d.VariableUSD, variable) ||
			!near(d.TotalUSD, d.VariableUSD+d.FixedUSD) {
			t.Errorf("%s: total %v, rows %v + unallocated %v, services %v, variable %v + fixed %v", d.Date, d.TotalUSD, rows, d.UnallocatedUSD, services, d.VariableUSD, d.FixedUSD)
		}
		total.TotalUSD += d.TotalUSD
		total.UnallocatedUSD += d.UnallocatedUSD
		total.FixedUSD += d.FixedUSD
	}
	if !near(r.Total.TotalUSD, total.TotalUSD) || !near(r.Total.FixedUSD, total.FixedUSD) {
		t.Errorf("report total %v / fixed %v, days add up to %v / %v", r.Total.TotalUSD, r.Total.FixedUSD, total.TotalUSD, total.FixedUSD)
	}
	if !near(retailerTotal, r.Total.TotalUSD-r.Total.UnallocatedUSD) {
		t.Errorf("retailers add up to %v, want total %v - unallocated %v", retailerTotal, r.Total.TotalUSD, r.Total.UnallocatedUSD)
	}
	if d := r.Days[2]; d.VariableUSD != 0 || !near(d.UnallocatedUSD, d.FixedUSD) || d.FixedUSD <= 0 {
		t.Errorf("the day without usage: variable %v, unallocated %v of fixed %v", d.VariableUSD, d.UnallocatedUSD, d.FixedUSD)
	}
}

func TestSharedCostAllocationSumsToTheFixedCost(t *testing.T) {
	t.Parallel()
	r := sampleReport(t, 5, 9)
	for _, d := range r.Days {
		shared, variable := 0.0, 0.0
		for _, row := range r.Rows {
			if row.Date == d.Date {
				shared += row.SharedUSD
				variable += row.VariableUSD
			}
		}
		if d.Date == day(2).Format(usage.DateLayout) {
			continue // no usage: unallocated
		}
		if !near(shared, d.FixedUSD) || !near(d.AllocatedUSD, d.FixedUSD) || d.UnallocatedUSD != 0 {
			t.Errorf("%s: shares add up to %v (allocated %v), fixed cost %v", d.Date, shared, d.AllocatedUSD, d.FixedUSD)
		}
		for _, row := range r.Rows {
			if row.Date == d.Date && !near(row.SharedUSD, d.FixedUSD*row.VariableUSD/variable) {
				t.Errorf("%s %s: share %v, want fixed x its share of variable cost %v", d.Date, row.RetailerID, row.SharedUSD, d.FixedUSD*row.VariableUSD/variable)
			}
		}
	}
	if !strings.Contains(r.AllocationRule, "in proportion to their variable cost") || !strings.Contains(r.AllocationRule, DefaultDeployment().String()) {
		t.Errorf("the rule printed with the report does not say how nor from what: %s", r.AllocationRule)
	}

	// All-zero variable costs: equal shares.
	r2, err := DefaultPricer().BuildReport(ReportInput{From: day(0), To: day(0), Deployment: DefaultDeployment(), Usage: []usage.DayUsage{
		{Date: day(0).Format(usage.DateLayout), RetailerID: "a"}, {Date: day(0).Format(usage.DateLayout), RetailerID: "b"}, {Date: day(0).Format(usage.DateLayout), RetailerID: "c"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range r2.Rows {
		if !near(row.SharedUSD, r2.Days[0].FixedUSD/3) {
			t.Errorf("%s: share %v, want a third of %v", row.RetailerID, row.SharedUSD, r2.Days[0].FixedUSD)
		}
	}
}

func TestRetailerWithTenTimesTheRowsCostsMore(t *testing.T) {
	t.Parallel()
	date := day(0).Format(usage.DateLayout)
	r, err := DefaultPricer().BuildReport(ReportInput{From: day(0), To: day(0), Deployment: DefaultDeployment(), Usage: []usage.DayUsage{
		retailerDay(date, "small", 20000, 3, 1000), retailerDay(date, "big", 200000, 3, 1000)}})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]Row{}
	for _, row := range r.Rows {
		rows[row.RetailerID] = row
	}
	small, big := rows["small"], rows["big"]
	if big.Usage.RowsReceived != 10*small.Usage.RowsReceived {
		t.Fatalf("setup: rows %d vs %d", big.Usage.RowsReceived, small.Usage.RowsReceived)
	}
	if !(big.IngestionUSD > small.IngestionUSD && big.VariableUSD > small.VariableUSD && big.SharedUSD > small.SharedUSD &&
		big.TotalUSD > small.TotalUSD && big.FullRewriteUSD > small.FullRewriteUSD) {
		t.Errorf("10x the rows: ingestion %v vs %v, variable %v vs %v, shared %v vs %v, total %v vs %v, full rewrite %v vs %v",
			big.IngestionUSD, small.IngestionUSD, big.VariableUSD, small.VariableUSD, big.SharedUSD, small.SharedUSD,
			big.TotalUSD, small.TotalUSD, big.FullRewriteUSD, small.FullRewriteUSD)
	}
	if big.StorefrontUSD != small.StorefrontUSD {
		t.Errorf("same reads, different storefront cost: %v vs %v", big.StorefrontUSD, small.StorefrontUSD)
	}
}

// TestPricesComeFromTheTable: a table with every price doubled doubles
// every variable and fixed line; one with one price changed moves exactly
// the line that uses it, by the hand-computed amount.
func TestPricesComeFromTheTable(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(pricesJSON, &doc); err != nil {
		t.Fatal(err)
	}
	for key, p := range doc["prices"].(map[string]any) {
		pm := p.(map[string]any)
		if key == PriceRDSProxyMinACU {
			continue // a count, not a price
		}
		pm["usd"] = pm["usd"].(float64) * 2
		if tiers, ok := pm["tiers"].([]any); ok {
			for _, tier := range tiers {
				tier.(map[string]any)["usd"] = tier.(map[string]any)["usd"].(float64) * 2
			}
		}
	}
	raw, _ := json.Marshal(doc)
	doubled, err := ParsePrices(raw)
	if err != nil {
		t.Fatal(err)
	}
	base := DefaultPricer()
	twice := Pricer{Prices: doubled, Figures: base.Figures}
	u := retailerDay("2026-11-01", "r", 50000, 4, 12345).Usage
	a, b := base.Variable(u, DefaultDeployment()), twice.Variable(u, DefaultDeployment())
	for i := range a {
		if a[i].USD <= 0 || !near(b[i].USD, 2*a[i].USD) {
			t.Errorf("%s/%s: %v with doubled prices, %v before", a[i].Service, a[i].Side, b[i].USD, a[i].USD)
		}
	}
	fa, fb := base.FixedDaily(DefaultDeployment()), twice.FixedDaily(DefaultDeployment())
	for i := range fa {
		if fa[i].USD <= 0 || !near(fb[i].USD, 2*fa[i].USD) {
			t.Errorf("fixed %s: %v with doubled prices, %v before", fa[i].Service, fb[i].USD, fa[i].USD)
		}
	}

	// By hand: 1,000,000 storefront reads and nothing else. API Gateway
	// $1.00/M -> $1.00; read function 1M x 5 ms x 1 GB = 5,000 GB-s x
	// $0.0000133334 = $0.066667, + 1M x $0.20/M = $0.20.
	reads := usage.Usage{Reads: 1_000_000}
	reads.AddFunction("read", usage.FunctionUsage{Invocations: 1_000_000, MBms: 1_000_000 * 5 * 1024})
	for _, l := range base.Variable(reads, DefaultDeployment()) {
		switch {
		case l.Service == ServiceAPIGateway && l.Side == SideStorefront && !near(l.USD, 1.00):
			t.Errorf("API Gateway for 1M reads: %v, want 1.00", l.USD)
		case l.Service == ServiceLambda && l.Side == SideStorefront && !near(l.USD, 5000*0.0000133334+0.20):
			t.Errorf("read Lambda for 1M reads: %v, want %v", l.USD, 5000*0.0000133334+0.20)
		}
	}
	// Fixed, by hand (cdk.json's stack): 3 clusters x 2 instances x 0.5 ACU x
	// 24 h x $0.12 = $8.64 a day; proxies 3 x 8 ACU minimum x 24 x $0.015 =
	// $8.64; endpoints 4 x 2 AZ x 24 x $0.01 = $1.92.
	want := map[string]float64{ServiceAuroraCapacity: 8.64, ServiceRDSProxy: 8.64, ServiceEndpoints: 1.92}
	for _, l := range fa {
		if w, ok := want[l.Service]; ok && !near(l.USD, w) {
			t.Errorf("fixed %s: %v a day, want %v", l.Service, l.USD, w)
		}
	}
}

func TestCSVHasExactlyTheColumnsOfDesign10(t *testing.T) {
	t.Parallel()
	r := sampleReport(t, 3, 4)
	var buf bytes.Buffer
	if err := r.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	const header = "date,retailer_id,uploads,rows_received,rows_changed,reads,lambda_gb_s,lambda_requests,s3_requests,sqs_requests,sns_requests,db_rows_written,variable_usd,shared_usd,total_usd,full_rewrite_usd,saving_ratio"
	if got := strings.Join(recs[0], ","); got != header {
		t.Fatalf("header:\n got %s\nwant %s", got, header)
	}
	if len(recs)-1 != len(r.Rows) {
		t.Fatalf("%d CSV rows for %d report rows", len(recs)-1, len(r.Rows))
	}
	f := func(s string) float64 {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for i, rec := range recs[1:] {
		row := r.Rows[i]
		if rec[0] != row.Date || rec[1] != row.RetailerID || rec[4] != strconv.FormatInt(row.Usage.RowsChanged(), 10) {
			t.Errorf("row %d: %v", i, rec)
		}
		variable, shared, total, rewrite, ratio := f(rec[12]), f(rec[13]), f(rec[14]), f(rec[15]), f(rec[16])
		if math.Abs(total-(variable+shared)) > 2e-6 || math.Abs(ratio-rewrite/total) > 1e-3 || ratio < 1 {
			t.Errorf("row %d: total %v != variable %v + shared %v, or ratio %v != %v / %v", i, total, variable, shared, ratio, rewrite, total)
		}
	}
}

func TestFullRewriteAndSavingRatio(t *testing.T) {
	t.Parallel()
	date := day(0).Format(usage.DateLayout)
	all := retailerDay(date, "all-changed", 10000, 100, 0)
	r, err := DefaultPricer().BuildReport(ReportInput{From: day(0), To: day(0), Deployment: DefaultDeployment(), Usage: []usage.DayUsage{
		retailerDay(date, "few-changed", 100000, 2, 0), all}})
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range r.Rows {
		switch row.RetailerID {
		case "all-changed":
			if !near(row.FullRewriteUSD, row.TotalUSD) || row.SavingRatio != 1 {
				t.Errorf("every row changed: full rewrite %v, total %v, ratio %v", row.FullRewriteUSD, row.TotalUSD, row.SavingRatio)
			}
		case "few-changed":
			// 98,000 unchanged rows and 19 more chunks would have been written.
			if row.FullRewriteUSD <= row.TotalUSD || !near(row.SavingRatio, row.FullRewriteUSD/row.TotalUSD) {
				t.Errorf("2%% changed: full rewrite %v, total %v, ratio %v", row.FullRewriteUSD, row.TotalUSD, row.SavingRatio)
			}
			p := DefaultPricer()
			extra := p.FullRewriteExtra(row.Usage)
			if !near(row.FullRewriteUSD, row.TotalUSD+extra) || extra < 98000*3*0.0000002 {
				t.Errorf("2%% changed: extra %v: at least the write I/O of 98,000 rows (%v)", extra, 98000*3*0.0000002)
			}
		}
	}
}

func TestReportRejectsBadRanges(t *testing.T) {
	t.Parallel()
	p := DefaultPricer()
	if _, err := p.BuildReport(ReportInput{From: day(3), To: day(1)}); err == nil {
		t.Error("to before from: no error")
	}
	if _, err := p.BuildReport(ReportInput{From: day(0), To: day(MaxReportDays)}); err == nil {
		t.Error("too long a range: no error")
	}
	if _, err := p.BuildReport(ReportInput{From: day(0), To: day(0), Usage: []usage.DayUsage{{Date: "2026-13-01", RetailerID: "x"}}}); err == nil {
		t.Error("bad date: no error")
	}
	// Records outside the range are ignored; two records of one retailer-day add up.
	r, err := p.BuildReport(ReportInput{From: day(1), To: day(1), Deployment: DefaultDeployment(), Usage: []usage.DayUsage{
		{Date: day(0).Format(usage.DateLayout), RetailerID: "x", Usage: usage.Usage{Reads: 5}},
		{Date: day(1).Format(usage.DateLayout), RetailerID: "x", Usage: usage.Usage{Reads: 7}},
		{Date: day(1).Format(usage.DateLayout), RetailerID: "x", Usage: usage.Usage{Reads: 8}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 1 || r.Rows[0].Usage.Reads != 15 {
		t.Errorf("rows %+v, want one with 15 reads", r.Rows)
	}
}

func TestPriceTableAndFigures(t *testing.T) {
	t.Parallel()
	p := DefaultPrices()
	if p.Region != "us-east-1" || p.AsOf == "" || !strings.Contains(p.Status, "stored copies") {
		t.Errorf("table provenance: %s", p.Describe())
	}
	for k, v := range p.Prices {
		if !strings.HasPrefix(v.Source, "https://aws.amazon.com/") {
			t.Errorf("price %s: source %q is not an AWS pricing page", k, v.Source)
		}
	}
	// Tiers: 400M HTTP API requests = 300M x $1.00/M + 100M x $0.90/M.
	if got := p.Monthly(PriceAPIRequest, 400e6); !near(got, 390) {
		t.Errorf("400M HTTP API requests: $%v, want $390", got)
	}
	if got := p.Monthly(PriceLambdaRequest, 5e6); !near(got, 1) {
		t.Errorf("5M Lambda requests: $%v, want $1", got)
	}
	for _, bad := range []string{
		`{}`,
		strings.Replace(string(pricesJSON), `"lambda_request"`, `"lambda_requestx"`, 1),
		strings.Replace(string(pricesJSON), `{"up_to": 300000000, "usd": 0.000001}, {"usd": 0.0000009}`, `{"up_to": 300000000, "usd": 0.000001}, {"up_to": 1, "usd": 0.0000009}`, 1),
	} {
		if _, err := ParsePrices([]byte(bad)); err == nil {
			t.Errorf("accepted a bad table: %.80s", bad)
		}
	}
	f := DefaultFigures()
	for _, k := range []string{FigDiffRowsPerS, FigApplyChangeRowsPerS, FigReadMaxQPS} {
		if !f.Figures[k].Measured || !strings.Contains(f.Figures[k].Source, "README.md Performance") {
			t.Errorf("figure %s should be the bench's, named: %+v", k, f.Figures[k])
		}
	}
}

func TestBilledMBms(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		d    time.Duration
		mb   int
		want int64
	}{{0, 1024, 0}, {time.Microsecond, 1024, 1024}, {3 * time.Millisecond, 128, 384}, {1200 * time.Microsecond, 3008, 2 * 3008}, {-time.Second, 512, 0}} {
		if got := usage.BilledMBms(c.d, c.mb); got != c.want {
			t.Errorf("BilledMBms(%v, %d) = %d, want %d", c.d, c.mb, got, c.want)
		}
	}
}

func TestParseDeployment(t *testing.T) {
	t.Parallel()
	d, err := ParseDeployment("clusters=5, instances=3,acu=2,proxy=false")
	if err != nil {
		t.Fatal(err)
	}
	if d.Clusters != 5 || d.InstancesPerCluster != 3 || d.AverageACU != 2 || d.RDSProxy || d.AZs != 2 {
		t.Errorf("parsed %+v", d)
	}
	if back, err := ParseDeployment(d.String()); err != nil || back != d {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{"clusters", "nope=1", "acu=-1", "proxy=maybe", "clusters=x"} {
		if _, err := ParseDeployment(bad); err == nil {
			t.Errorf("ParseDeployment(%q): no error", bad)
		}
	}
	if d, err := ParseDeployment(""); err != nil || d != DefaultDeployment() {
		t.Errorf("empty: %+v, %v", d, err)
	}
}
