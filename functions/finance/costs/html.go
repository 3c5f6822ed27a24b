package costs

import (
	"fmt"
	"html/template"
	"io"
	"math"

	"github.com/retailcatalog/catalog/functions/finance/usage"
)

// Chart colours. Each chart has colours of its own, so a screenshot shows
// which charts were drawn (the browser test counts them).
var (
	serviceColors = map[string]string{
		ServiceLambda: "#4e79a7", ServiceAPIGateway: "#f28e2b", ServiceS3: "#e15759", ServiceSQS: "#76b7b2",
		ServiceSNS: "#59a14f", ServiceAuroraIO: "#edc948", ServiceLogs: "#b07aa1", ServiceDataTransfer: "#ff9da7",
		ServiceAuroraCapacity: "#9c755f", ServiceAuroraStorage: "#bab0ac", ServiceRDSProxy: "#86bcb6",
		ServiceEndpoints: "#d4a6c8", ServiceMonitoring: "#8cd17d", ServiceSecrets: "#f1ce63",
	}
	// ChartColors are the data colours of each chart, by chart id.
	ChartColors = map[string][]string{
		"by-service":      nil, // serviceColors
		"top-retailers":   {"#2b6ca3", "#d95f02", "#9e9ac8"},
		"per-million":     {"#6a3d9a"},
		"ingestion-share": {"#1f9e89", "#fdae61", "#8da0cb"},
		"saving":          {"#33a02c", "#b2182b"},
	}
)

func init() {
	for _, s := range append(append([]string{}, VariableServices...), FixedServices...) {
		ChartColors["by-service"] = append(ChartColors["by-service"], serviceColors[s])
	}
}

// ChartIDs are the charts of the HTML report, in page order.
var ChartIDs = []string{"by-service", "top-retailers", "per-million", "ingestion-share", "saving"}

// TopRetailers is how many retailers the top-retailers chart shows; the
// page's table lists MaxHTMLRetailers.
const (
	TopRetailers     = 10
	MaxHTMLRetailers = 100
)

type htmlChart struct {
	ID, Title, Caption string
	SVG                template.HTML
}

type htmlPage struct {
	R            *Report
	Charts       []htmlChart
	Retailers    []RetailerTotal
	MoreRetailer int
	Cards        [][2]string
}

// WriteHTML writes the report as one self-contained HTML page: inline CSS
// and SVG charts, no script, nothing fetched.
func (r *Report) WriteHTML(w io.Writer) error {
	page := htmlPage{R: r, Charts: r.charts()}
	page.Retailers = r.Retailers
	if len(page.Retailers) > MaxHTMLRetailers {
		page.MoreRetailer = len(page.Retailers) - MaxHTMLRetailers
		page.Retailers = page.Retailers[:MaxHTMLRetailers]
	}
	t := r.Total
	perM := "-"
	if v := perMillion(t.TotalUSD-t.UnallocatedUSD-t.StorefrontUSD, t.RowsChanged); v != nil {
		perM = usdLabel(*v)
	}
	page.Cards = [][2]string{
		{"Total", usdLabel(t.TotalUSD)},
		{"Variable", usdLabel(t.VariableUSD)},
		{"Shared fixed", usdLabel(t.FixedUSD)},
		{"Unallocated", usdLabel(t.UnallocatedUSD)},
		{"Full rewrite would cost", usdLabel(t.FullRewriteUSD - t.UnallocatedUSD)},
		{"Saving ratio", fmt.Sprintf("%.2fx", t.SavingRatio)},
		{"Rows changed", groupThousands(fmt.Sprint(t.RowsChanged))},
		{"Per million changed rows", perM},
		{"Storefront reads", groupThousands(fmt.Sprint(t.Reads))},
		{"Retailers", fmt.Sprint(len(r.Retailers))},
	}
	if err := pageTemplate.Execute(w, page); err != nil {
		return fmt.Errorf("write html: %w", err)
	}
	return nil
}

func (r *Report) charts() []htmlChart {
	days := make([]string, len(r.Days))
	for i, d := range r.Days {
		days[i] = d.Date
	}
	var bySvc []series
	for _, s := range append(append([]string{}, VariableServices...), FixedServices...) {
		vals, any := make([]float64, len(r.Days)), false
		for i, d := range r.Days {
			vals[i] = d.ByService[s]
			any = any || vals[i] > 0
		}
		if any {
			bySvc = append(bySvc, series{s, serviceColors[s], vals})
		}
	}

	top := r.Retailers
	if len(top) > TopRetailers {
		top = top[:TopRetailers]
	}
	c := ChartColors["top-retailers"]
	names := make([]string, len(top))
	ing, sf, sh := make([]float64, len(top)), make([]float64, len(top)), make([]float64, len(top))
	for i, rt := range top {
		names[i], ing[i], sf[i], sh[i] = rt.RetailerID, rt.IngestionUSD, rt.StorefrontUSD, rt.SharedUSD
	}

	perM := make([]float64, len(r.Days))
	for i, d := range r.Days {
		if d.USDPerMillionChanged != nil {
			perM[i] = *d.USDPerMillionChanged
		}
	}

	c4 := ChartColors["ingestion-share"]
	shI, shS, shF := make([]float64, len(r.Days)), make([]float64, len(r.Days)), make([]float64, len(r.Days))
	for i, d := range r.Days {
		if t := d.IngestionUSD + d.StorefrontUSD + d.FixedUSD; t > 0 {
			shI[i], shS[i], shF[i] = 100*d.IngestionUSD/t, 100*d.StorefrontUSD/t, 100*d.FixedUSD/t
		}
	}
	pct := func(v float64) string { return fmt.Sprintf("%.0f%%", v) }

	c5 := ChartColors["saving"]
	actual, rewrite, notes := make([]float64, len(r.Days)), make([]float64, len(r.Days)), make([]string, len(r.Days))
	for i, d := range r.Days {
		actual[i] = d.TotalUSD - d.UnallocatedUSD
		rewrite[i] = d.FullRewriteUSD - d.UnallocatedUSD
		if actual[i] > 0 {
			notes[i] = fmt.Sprintf("%.1fx", rewrite[i]/actual[i])
		}
	}

	return []htmlChart{
		{"by-service", "Cost per day by service", "Variable costs of every retailer plus the day's shared fixed costs, stacked by service.",
			template.HTML(stackedBars("Cost per day by service", days, bySvc, usdLabel))},
		{"top-retailers", fmt.Sprintf("Top %d retailers", len(top)), "Cost over the range: ingestion and storefront variable costs and the allocated share of the fixed costs.",
			template.HTML(hBars("Top retailers", names, []series{{"ingestion", c[0], ing}, {"storefront", c[1], sf}, {"shared", c[2], sh}}, usdLabel))},
		{"per-million", "Cost per million changed rows", "Per day: (total - storefront variable cost) / rows changed x 1,000,000; a day without changes has no bar.",
			template.HTML(stackedBars("Cost per million changed rows", days, []series{{"USD per million changed rows", ChartColors["per-million"][0], perM}}, usdLabel))},
		{"ingestion-share", "Ingestion vs storefront", "Share of each day's cost: ingestion variable, storefront variable, shared fixed.",
			template.HTML(stackedBars("Ingestion vs storefront share", days, []series{{"ingestion", c4[0], shI}, {"storefront", c4[1], shS}, {"shared fixed", c4[2], shF}}, pct))},
		{"saving", "Saving against a full rewrite", "What the day cost against what it would have cost writing every received row; the label is the saving ratio.",
			template.HTML(groupedBars("Saving against full rewrite", days, []series{{"actual", c5[0], actual}, {"full rewrite", c5[1], rewrite}}, usdLabel, notes))},
	}
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"usd": func(v float64) string { return fmt.Sprintf("%.6f", v) },
	"ratio": func(v float64) string {
		if math.IsNaN(v) {
			return "-"
		}
		return fmt.Sprintf("%.2f", v)
	},
	"permillion": func(v *float64) string {
		if v == nil {
			return "-"
		}
		return usdLabel(*v)
	},
	"rowsChanged": func(u usage.Usage) int64 { return u.RowsChanged() },
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Catalog costs {{.R.From}} to {{.R.To}}</title>
<style>
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; max-width: 940px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 4px; }
.sub { color: #555; font-size: 13px; }
.cards { display: flex; flex-wrap: wrap; gap: 8px; margin: 16px 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px; min-width: 150px; }
.card b { display: block; font-size: 18px; }
.card span { color: #666; font-size: 12px; }
figure { margin: 0; }
figcaption { color: #555; font-size: 12px; margin-bottom: 4px; }
table { border-collapse: collapse; font-size: 12px; margin-top: 6px; }
th, td { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child { text-align: left; }
p.rule, li { font-size: 12px; color: #333; }
</style>
</head>
<body>
<h1>Catalog costs, {{.R.From}} to {{.R.To}}</h1>
<div class="sub">{{.R.Prices}}</div>
<div class="cards">{{range .Cards}}<div class="card"><span>{{index . 0}}</span><b>{{index . 1}}</b></div>{{end}}</div>
{{range .Charts}}<section id="{{.ID}}">
<h2>{{.Title}}</h2>
<figure><figcaption>{{.Caption}}</figcaption>
{{.SVG}}
</figure>
</section>
{{end}}
<h2>How shared costs are allocated</h2>
<p class="rule">{{.R.AllocationRule}}</p>
<h2>Definitions and notes</h2>
<ul>{{range .R.Definitions}}<li>{{.}}</li>{{end}}{{range .R.Notes}}<li>{{.}}</li>{{end}}</ul>
<h2>Days</h2>
<table>
<tr><th>date</th><th>rows changed</th><th>reads</th><th>variable USD</th><th>fixed USD</th><th>unallocated USD</th><th>total USD</th><th>full rewrite USD</th><th>per million changed</th></tr>
{{range .R.Days}}<tr><td>{{.Date}}</td><td>{{.RowsChanged}}</td><td>{{.Reads}}</td><td>{{usd .VariableUSD}}</td><td>{{usd .FixedUSD}}</td><td>{{usd .UnallocatedUSD}}</td><td>{{usd .TotalUSD}}</td><td>{{usd .FullRewriteUSD}}</td><td>{{permillion .USDPerMillionChanged}}</td></tr>
{{end}}</table>
<h2>Retailers</h2>
<table>
<tr><th>retailer</th><th>uploads</th><th>rows received</th><th>rows changed</th><th>reads</th><th>ingestion USD</th><th>storefront USD</th><th>shared USD</th><th>total USD</th><th>full rewrite USD</th><th>per million changed</th></tr>
{{range .Retailers}}<tr><td>{{.RetailerID}}</td><td>{{.Usage.Uploads}}</td><td>{{.Usage.RowsReceived}}</td><td>{{rowsChanged .Usage}}</td><td>{{.Usage.Reads}}</td><td>{{usd .IngestionUSD}}</td><td>{{usd .StorefrontUSD}}</td><td>{{usd .SharedUSD}}</td><td>{{usd .TotalUSD}}</td><td>{{usd .FullRewriteUSD}}</td><td>{{permillion .USDPerMillionChanged}}</td></tr>
{{end}}</table>
{{if .MoreRetailer}}<p class="sub">and {{.MoreRetailer}} more retailers: see the CSV.</p>{{end}}
</body>
</html>
`))
