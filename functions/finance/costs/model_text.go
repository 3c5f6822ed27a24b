package costs

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the model as one JSON object.
func (m *Model) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// ByService is the monthly total per service, costliest first.
func (m *Model) ByService() []ModelCost {
	var out []ModelCost
	for s, usd := range m.byService {
		out = append(out, ModelCost{Service: s, USD: usd})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].USD != out[j].USD {
			return out[i].USD > out[j].USD
		}
		return out[i].Service < out[j].Service
	})
	return out
}

// num prints a count readably: 2.00e9 -> "2.00 billion".
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1e9:
		return fmt.Sprintf("%.2f billion", v/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.2f million", v/1e6)
	case a >= 10000:
		return groupThousands(fmt.Sprintf("%.0f", v))
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func dollars(v float64) string {
	if math.Abs(v) >= 100 {
		return "$" + groupThousands(fmt.Sprintf("%.0f", v))
	}
	return fmt.Sprintf("$%.2f", v)
}

// WriteText prints the model for people: load, shards, Lambda
// concurrency, the overnight drain, queue limits, the largest retailer,
// $ per month by service, the storefront alternatives, the stack defaults
// and quotas it implies, and every figure it used with its source.
func (m *Model) WriteText(w io.Writer) error {
	in, L, D := m.Input, m.Load, m.Database
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	table := func(header string, rows [][]string) {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, header)
		for _, r := range rows {
			fmt.Fprintln(tw, strings.Join(r, "\t"))
		}
		tw.Flush()
	}

	p("Capacity and cost model: %s retailers x %s products, %g%% changed a day, %s storefront reads/s (products; %g a request: %s requests/s; %g%% of fast successful requests access-logged)\n",
		num(float64(in.Retailers)), num(float64(in.Products)), in.ChangePct, num(in.ReadQPS), in.ProductsPerRequest, num(in.ReadQPS/in.ProductsPerRequest), 100*in.ReadLogSample)
	p("%s\n", m.Prices)
	p("Per-row figures: the project's benchmarks (README.md 'Performance', docs/PERFORMANCE.md); every figure used is listed at the end.\n\n")

	p("== Daily write load\n")
	table("what\tper day\tat the overnight peak", [][]string{
		{"rows received (uploaded)", num(L.RowsPerDay), num(L.PeakRowsPerS) + " rows/s"},
		{"rows changed (written)", num(L.ChangedPerDay), num(L.PeakChangedPerS) + " rows/s"},
		{"uploads", num(L.UploadsPerDay), num(L.PeakUploadsPerS) + " /s"},
		{"chunks (<= 5,000 rows)", num(L.ChunksPerDay), num(L.PeakChunksPerS) + " /s"},
		{"bytes uploaded", fmt.Sprintf("%.1f TB", L.BytesPerDay/1e12), ""},
	})
	p("(the peak: %.0f%% of the day's uploads within %g h overnight)\n\n", 100*in.PeakShare, in.PeakHours)

	p("== Shards\n")
	p("catalog stored: %.0f GB (%g B a row x %g overhead); measured write rate %.0f changed rows/s per ACU -> %.0f rows/s per writer at %g ACU\n",
		D.StoredGB, in.RowBytes, m.figures.V(FigRowOverhead), D.RowsPerSPerACU, D.WriterRowsPerS, in.MaxACU)
	p("shards: %d = %s\n", D.Shards, D.ShardsReason)
	p("per shard: %.0f GB, peak writes %.2f ACU (%.0f%% of a writer), average writer %.2f ACU; readers: %d per shard at %.2f ACU (%.1f ACU of reads in all)\n",
		D.GBPerShard, D.PeakWriteACU, 100*D.WriterPeakUse, D.WriterAvgACU, D.ReadersPerShard, D.ReaderACU, D.ReadACU)
	p("one PostgreSQL leader for everything: %s\n\n", D.OneLeader)

	p("== Lambda concurrency per function\n")
	var rows [][]string
	for _, f := range m.Functions {
		conf := "unreserved"
		if f.Configured > 0 {
			conf = fmt.Sprint(f.Configured)
		}
		rows = append(rows, []string{f.Name, fmt.Sprint(f.MemoryMB), num(f.Invocations), fmt.Sprintf("%.3f s", f.DurationS), fmt.Sprintf("%.1f", f.Concurrency), conf, f.Note})
	}
	table("function\tMB\tinvocations/month\tduration\tpeak concurrency\tconfigured\thow", rows)
	p("\n")

	p("== Time to drain the overnight peak (%g h window)\n", m.Drain.WindowH)
	rows = nil
	for _, s := range m.Drain.Stages {
		rows = append(rows, []string{s.Name, s.Limit, fmt.Sprintf("%s %s", num(s.Capacity), s.Unit), num(s.Arrival), fmt.Sprintf("%.1f%%", 100*s.Utilization), fmt.Sprintf("%.2f h", s.AllAtOnceH)})
	}
	table("stage\tlimit\tcapacity\tpeak arrival\tutilization\tif all arrived at once", rows)
	p("bottleneck: %s. %s\n\n", m.Drain.Bottleneck, m.Drain.Explanation)

	p("== Queue limits\n")
	rows = nil
	for _, q := range m.Queues {
		rows = append(rows, []string{q.Queue, q.Load, q.Limit})
	}
	table("queue\tload\tlimit", rows)
	p("\n")

	Lg := m.Largest
	p("== The largest retailer (%s products)\n", num(float64(Lg.Products)))
	p("a day: %s changed rows in %d chunks via %s; diff %.1f s (~%.0f MB of %d), apply %.1f s; a full rewrite of it: %.0f s\n",
		num(Lg.Changed), Lg.Chunks, Lg.Queue, Lg.DiffS, Lg.DiffMemoryMB, in.DiffMemoryMB, Lg.ApplyS, Lg.FullRewriteS)
	p("starvation: %s\n\n", Lg.StarvationNote)

	p("== $ per month by service\n")
	rows = nil
	for _, c := range m.ByService() {
		rows = append(rows, []string{c.Service, dollars(c.USD), fmt.Sprintf("%.1f%%", 100*c.USD/m.MonthlyUSD)})
	}
	rows = append(rows, []string{"total", dollars(m.MonthlyUSD), ""})
	table("service\tUSD/month\tshare", rows)
	Sm := m.Summary
	p("\ningestion %s, storefront %s, shared fixed %s a month: %s per million changed rows (ingestion + shared)\n",
		dollars(Sm.IngestionUSD), dollars(Sm.StorefrontUSD), dollars(Sm.SharedUSD), dollars(Sm.USDPerMillionChanged))
	p("storefront: %s per million product reads at %g products a request; %s at one product a request (the same prices)\n",
		dollars(Sm.USDPerMillionReads), in.ProductsPerRequest, dollars(Sm.USDPerMillionReadsOnePerRequest))
	ingest := Sm.IngestionUSD + Sm.SharedUSD
	p("writing every received row instead of the changes would add %s a month (the report's full_rewrite rule: apply Lambda and write I/O per row, S3/SQS/SNS per chunk; not the bigger writers it would need): saving ratio %.2f on the whole bill, %.1f on ingestion + shared\n",
		dollars(Sm.FullRewriteExtraUSD), Sm.SavingRatio, (ingest+Sm.FullRewriteExtraUSD)/ingest)
	p("\nline items:\n")
	rows = nil
	for _, c := range m.Monthly {
		rows = append(rows, []string{c.Service, string(c.Side), dollars(c.USD), c.What})
	}
	table("service\tside\tUSD/month\twhat", rows)
	p("\n")

	p("== Storefront read path at %s requests/s of %g products (per month; the database's read capacity is listed apart)\n", num(in.ReadQPS/in.ProductsPerRequest), in.ProductsPerRequest)
	rows = nil
	for _, rp := range m.ReadPaths {
		rows = append(rows, []string{rp.Name, dollars(rp.USD), fmt.Sprintf("%.1f ACU", rp.DBReadACU)})
	}
	table("path\tUSD/month\tdatabase reads", rows)
	for _, rp := range m.ReadPaths {
		p("- %s: %s\n", rp.Name, rp.Tradeoff)
		for _, l := range rp.Lines {
			p("    %-18s %12s  %s\n", l.Service, dollars(l.USD), l.What)
		}
	}
	p("\n")

	s := m.Stack
	p("== Stack parameters this scale needs (cdk.json)\n")
	p("apiRateLimit >= %d (read QPS + 10%%, rounded up), readReservedConcurrency >= %d (that rate x %g ms p99), shards %d, readersPerShard %d; Lambda concurrency in all: %d\n\n",
		s.APIRateLimit, s.ReadReservedConcurrency, m.figures.V(FigReadP99ms), s.Shards, s.ReadersPerShard, s.LambdaConcurrency)

	p("== Account quotas to raise before deploying at this scale\n")
	rows = nil
	for _, q := range m.Quotas {
		rows = append(rows, []string{q.Quota, q.Default, q.Needed})
	}
	table("quota\tdefault\tneeded", rows)
	p("\n== Notes\n")
	for _, n := range m.Notes {
		p("- %s\n", n)
	}
	p("\n== Figures used (functions/finance/costs/figures.json)\n")
	for _, f := range m.Figures {
		p("- %s\n", f)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
