package costs

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"
)

// MaxReportDays bounds a report's range.
const MaxReportDays = 400

// ReportInput is what a cost report is built from.
type ReportInput struct {
	// From and To are the first and last UTC day, inclusive.
	From, To time.Time
	// Usage is the metered retailer-days (records outside the range are
	// ignored; several records of one retailer-day are summed).
	Usage []usage.DayUsage
	// Deployment sizes the shared fixed costs.
	Deployment Deployment
	// ReadsNote says how exact the storefront read counters are (the
	// metering's flush bound); printed with the report.
	ReadsNote string
}

// Report is a priced usage report: one row per retailer-day, daily and
// per-retailer totals, and the rules it was computed with.
type Report struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Prices says which price table priced it and how far to trust it.
	Prices         string     `json:"prices"`
	PricesVersion  string     `json:"prices_version"`
	AllocationRule string     `json:"allocation_rule"`
	Definitions    []string   `json:"definitions"`
	Notes          []string   `json:"notes"`
	Deployment     Deployment `json:"deployment"`
	Rows           []Row      `json:"rows"`
	Days           []Day      `json:"days"`
	// Retailers are the per-retailer totals over the range, costliest first.
	Retailers []RetailerTotal `json:"retailers"`
	Total     Total           `json:"total"`
}

// Amounts are the dollar figures every level of the report has.
type Amounts struct {
	// VariableUSD is the priced usage; IngestionUSD and StorefrontUSD split
	// it by side.
	VariableUSD   float64 `json:"variable_usd"`
	IngestionUSD  float64 `json:"ingestion_usd"`
	StorefrontUSD float64 `json:"storefront_usd"`
	// TotalUSD is variable + the shared fixed cost.
	TotalUSD float64 `json:"total_usd"`
	// FullRewriteUSD is the total had every received row been written.
	FullRewriteUSD float64 `json:"full_rewrite_usd"`
}

func (a *Amounts) add(b Amounts) {
	a.VariableUSD += b.VariableUSD
	a.IngestionUSD += b.IngestionUSD
	a.StorefrontUSD += b.StorefrontUSD
	a.TotalUSD += b.TotalUSD
	a.FullRewriteUSD += b.FullRewriteUSD
}

// Row is one retailer-day: the CSV row of DESIGN 10 and its breakdown.
type Row struct {
	Date       string      `json:"date"`
	RetailerID string      `json:"retailer_id"`
	Usage      usage.Usage `json:"usage"`
	// Lines are the variable costs by service and side.
	Lines []Line `json:"lines"`
	Amounts
	SharedUSD   float64 `json:"shared_usd"`
	SavingRatio float64 `json:"saving_ratio"`
}

// Day is one UTC day's totals.
type Day struct {
	Date string `json:"date"`
	// Fixed are the shared fixed costs of the day.
	Fixed    []Line  `json:"fixed"`
	FixedUSD float64 `json:"fixed_usd"`
	// ByService is the day's cost per service, variable and fixed.
	ByService map[string]float64 `json:"by_service"`
	Amounts
	// AllocatedUSD is the part of FixedUSD given to retailers; the rest
	// (a day without usage) is UnallocatedUSD.
	AllocatedUSD   float64 `json:"allocated_usd"`
	UnallocatedUSD float64 `json:"unallocated_usd"`
	RowsReceived   int64   `json:"rows_received"`
	RowsChanged    int64   `json:"rows_changed"`
	Reads          int64   `json:"reads"`
	// USDPerMillionChanged is (total - storefront variable) per million
	// changed rows; nil on a day without changes.
	USDPerMillionChanged *float64 `json:"usd_per_million_changed_rows"`
}

// RetailerTotal is one retailer's usage and cost over the range.
type RetailerTotal struct {
	RetailerID string      `json:"retailer_id"`
	Usage      usage.Usage `json:"usage"`
	Amounts
	SharedUSD float64 `json:"shared_usd"`
	// USDPerMillionChanged as for Day; nil without changes.
	USDPerMillionChanged *float64 `json:"usd_per_million_changed_rows"`
}

// Total is the whole range.
type Total struct {
	FixedUSD float64 `json:"fixed_usd"`
	Amounts
	UnallocatedUSD float64 `json:"unallocated_usd"`
	RowsReceived   int64   `json:"rows_received"`
	RowsChanged    int64   `json:"rows_changed"`
	Reads          int64   `json:"reads"`
	// SavingRatio is FullRewriteUSD / (TotalUSD - UnallocatedUSD).
	SavingRatio float64 `json:"saving_ratio"`
}

// AllocationRule is printed with every report.
const AllocationRule = "Shared fixed costs (Aurora capacity and storage, RDS Proxy, VPC interface endpoints, " +
	"CloudWatch alarms, dashboard and metrics, Secrets Manager and KMS; HTTP APIs have no fixed charge) are computed " +
	"per UTC day from the deployment's sizes and divided among the retailers with usage that day in proportion to " +
	"their variable cost that day: shared_usd(r,d) = fixed_usd(d) x variable_usd(r,d) / sum of variable_usd(*,d), " +
	"in equal shares when every variable cost that day is zero. The fixed cost of a day without any usage stays " +
	"unallocated (daily totals, not the CSV)."

// Definitions are printed with every report.
var Definitions = []string{
	"variable_usd: the retailer-day's metered usage at the table's first-tier unit prices (volume tiers apply to the account's month).",
	"total_usd = variable_usd + shared_usd.",
	"full_rewrite_usd: total_usd plus what writing every received row would have added: each unchanged row at the day's apply cost per changed row (the benchmark's rate on a day without changes) and its database I/O, and the chunks those rows fill (S3 PUT and GET, 3 FIFO requests, 1 SNS publish, the chunk object kept as long as the bucket keeps chunks, 19 days).",
	"saving_ratio = full_rewrite_usd / total_usd (1 when both are 0).",
	"USD per million changed rows = (total_usd - storefront variable cost) / rows_changed x 1,000,000.",
	"Ingestion: every function but read, the upload routes, S3, SQS, SNS, write I/O. Storefront: read requests, the read function, read I/O, answers' data transfer.",
}

// BuildReport prices the usage of [From, To] and allocates the shared
// fixed costs.
func (p Pricer) BuildReport(in ReportInput) (*Report, error) {
	from, to := in.From.UTC().Truncate(24*time.Hour), in.To.UTC().Truncate(24*time.Hour)
	if to.Before(from) {
		return nil, fmt.Errorf("report: to (%s) is before from (%s)", to.Format(usage.DateLayout), from.Format(usage.DateLayout))
	}
	days := int(to.Sub(from)/(24*time.Hour)) + 1
	if days > MaxReportDays {
		return nil, fmt.Errorf("report: %d days, more than %d", days, MaxReportDays)
	}
	byDay := map[string]map[string]*usage.Usage{}
	for _, du := range in.Usage {
		d, err := usage.ParseDay(du.Date)
		if err != nil {
			return nil, fmt.Errorf("report: usage of %q: %w", du.RetailerID, err)
		}
		if d.Before(from) || d.After(to) {
			continue
		}
		if du.RetailerID == "" {
			return nil, errors.New("report: usage without a retailer_id")
		}
		m := byDay[du.Date]
		if m == nil {
			m = map[string]*usage.Usage{}
			byDay[du.Date] = m
		}
		u := m[du.RetailerID]
		if u == nil {
			u = &usage.Usage{}
			m[du.RetailerID] = u
		}
		u.Add(du.Usage)
	}

	r := &Report{
		From: from.Format(usage.DateLayout), To: to.Format(usage.DateLayout),
		Prices: p.Prices.Describe(), PricesVersion: p.Prices.Version,
		AllocationRule: AllocationRule + " Deployment: " + in.Deployment.String() + ".",
		Definitions:    Definitions,
		Deployment:     in.Deployment,
	}
	r.Notes = append(r.Notes, "Figures that are estimates, not metered: "+p.estimatesNote())
	if in.ReadsNote != "" {
		r.Notes = append(r.Notes, in.ReadsNote)
	}
	fixed := p.FixedDaily(in.Deployment)
	fixedUSD := sum(fixed)
	retailers := map[string]*RetailerTotal{}
	for i := 0; i < days; i++ {
		date := from.AddDate(0, 0, i).Format(usage.DateLayout)
		day := Day{Date: date, Fixed: fixed, FixedUSD: fixedUSD, ByService: map[string]float64{}}
		for _, l := range fixed {
			day.ByService[l.Service] += l.USD
		}
		ids := make([]string, 0, len(byDay[date]))
		for id := range byDay[date] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		rows := make([]Row, 0, len(ids))
		for _, id := range ids {
			u := *byDay[date][id]
			row := Row{Date: date, RetailerID: id, Usage: u, Lines: p.Variable(u, in.Deployment)}
			for _, l := range row.Lines {
				row.VariableUSD += l.USD
				switch l.Side {
				case SideIngestion:
					row.IngestionUSD += l.USD
				case SideStorefront:
					row.StorefrontUSD += l.USD
				}
				day.ByService[l.Service] += l.USD
			}
			row.FullRewriteUSD = p.FullRewriteExtra(u) // the shared part is added below
			rows = append(rows, row)
			day.VariableUSD += row.VariableUSD
		}
		allocate(rows, fixedUSD)
		for i := range rows {
			row := &rows[i]
			row.TotalUSD = row.VariableUSD + row.SharedUSD
			row.FullRewriteUSD += row.TotalUSD
			row.SavingRatio = ratio(row.FullRewriteUSD, row.TotalUSD)
			day.AllocatedUSD += row.SharedUSD
			day.FullRewriteUSD += row.FullRewriteUSD
			day.IngestionUSD += row.IngestionUSD
			day.StorefrontUSD += row.StorefrontUSD
			day.RowsReceived += row.Usage.RowsReceived
			day.RowsChanged += row.Usage.RowsChanged()
			day.Reads += row.Usage.Reads
			rt := retailers[row.RetailerID]
			if rt == nil {
				rt = &RetailerTotal{RetailerID: row.RetailerID}
				retailers[row.RetailerID] = rt
			}
			rt.Usage.Add(row.Usage)
			rt.Amounts.add(row.Amounts)
			rt.SharedUSD += row.SharedUSD
		}
		if len(rows) == 0 {
			day.UnallocatedUSD = fixedUSD
			day.FullRewriteUSD = fixedUSD
		}
		day.TotalUSD = day.VariableUSD + day.FixedUSD
		day.USDPerMillionChanged = perMillion(day.TotalUSD-day.UnallocatedUSD-day.StorefrontUSD, day.RowsChanged)
		r.Rows = append(r.Rows, rows...)
		r.Days = append(r.Days, day)

		t := &r.Total
		t.FixedUSD += day.FixedUSD
		t.Amounts.add(day.Amounts)
		t.UnallocatedUSD += day.UnallocatedUSD
		t.RowsReceived += day.RowsReceived
		t.RowsChanged += day.RowsChanged
		t.Reads += day.Reads
	}
	r.Total.SavingRatio = ratio(r.Total.FullRewriteUSD-r.Total.UnallocatedUSD, r.Total.TotalUSD-r.Total.UnallocatedUSD)
	for _, rt := range retailers {
		rt.USDPerMillionChanged = perMillion(rt.TotalUSD-rt.StorefrontUSD, rt.Usage.RowsChanged())
		r.Retailers = append(r.Retailers, *rt)
	}
	sort.Slice(r.Retailers, func(i, j int) bool {
		a, b := r.Retailers[i], r.Retailers[j]
		if a.TotalUSD != b.TotalUSD {
			return a.TotalUSD > b.TotalUSD
		}
		return a.RetailerID < b.RetailerID
	})
	return r, nil
}

// allocate divides fixed among rows by their variable cost (equal shares
// when all are zero), so that the shares add up to fixed.
func allocate(rows []Row, fixed float64) {
	if len(rows) == 0 {
		return
	}
	total := 0.0
	for _, r := range rows {
		total += r.VariableUSD
	}
	for i := range rows {
		if total > 0 {
			rows[i].SharedUSD = fixed * rows[i].VariableUSD / total
		} else {
			rows[i].SharedUSD = fixed / float64(len(rows))
		}
	}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 1
	}
	return a / b
}

func perMillion(usd float64, rows int64) *float64 {
	if rows <= 0 {
		return nil
	}
	v := usd / float64(rows) * 1e6
	return &v
}

// estimatesNote names the figures the report prices with that are not
// metered.
func (p Pricer) estimatesNote() string {
	f := p.Figures
	return fmt.Sprintf("Aurora I/O (%g I/O per database row written, %g per storefront product read), CloudWatch Logs (%g bytes per ingestion invocation, %g per storefront request, %g per API access log line), "+
		"the shared Aurora capacity (the deployment's average ACU); the rest is metered and priced from %s.",
		f.V(FigIOPerRowWritten), f.V(FigIOPerRead), f.V(FigLogBytesPerInvocation), f.V(FigLogBytesPerRead), f.V(FigLogBytesPerAPIAccess), p.Prices.Version)
}
