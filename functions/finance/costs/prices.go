package costs

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
)

//go:embed prices.json
var pricesJSON []byte

// Price keys of the table (prices.json). Every key the package uses must be
// in the table: ParsePrices refuses a table without one of them.
const (
	PriceLambdaGBSecond       = "lambda_arm64_gb_second"
	PriceLambdaRequest        = "lambda_request"
	PriceAPIRequest           = "api_http_request"
	PriceSQSStandard          = "sqs_standard_request"
	PriceSQSFIFO              = "sqs_fifo_request"
	PriceSNSPublish           = "sns_publish"
	PriceS3GBMonth            = "s3_standard_gb_month"
	PriceS3ClassA             = "s3_class_a_request"
	PriceS3ClassB             = "s3_class_b_request"
	PriceAuroraACUHour        = "aurora_serverless_v2_acu_hour"
	PriceAuroraStorageGBMonth = "aurora_storage_gb_month"
	PriceAuroraIO             = "aurora_io_request"
	PriceRDSProxyACUHour      = "rds_proxy_acu_hour"
	PriceRDSProxyMinACU       = "rds_proxy_min_acu"
	PriceEndpointAZHour       = "vpc_interface_endpoint_az_hour"
	PriceEndpointGB           = "vpc_interface_endpoint_gb"
	PriceLogsIngestGB         = "cloudwatch_logs_ingest_gb"
	PriceCustomMetricMonth    = "cloudwatch_custom_metric_month"
	PriceAlarmMonth           = "cloudwatch_alarm_month"
	PriceDashboardMonth       = "cloudwatch_dashboard_month"
	PriceSecretMonth          = "secrets_manager_secret_month"
	PriceKMSKeyMonth          = "kms_key_month"
	PriceDataTransferOutGB    = "data_transfer_out_gb"
	PriceCloudFrontRequest    = "cloudfront_https_request"
	PriceCloudFrontDataOutGB  = "cloudfront_data_out_gb"
	PriceALBHour              = "alb_hour"
	PriceALBLCUHour           = "alb_lcu_hour"
	PriceFargateARMVCPUHour   = "fargate_arm64_vcpu_hour"
	PriceFargateARMGBHour     = "fargate_arm64_gb_hour"
)

var requiredPriceKeys = []string{
	PriceLambdaGBSecond, PriceLambdaRequest, PriceAPIRequest, PriceSQSStandard, PriceSQSFIFO,
	PriceSNSPublish, PriceS3GBMonth, PriceS3ClassA, PriceS3ClassB, PriceAuroraACUHour,
	PriceAuroraStorageGBMonth, PriceAuroraIO, PriceRDSProxyACUHour, PriceRDSProxyMinACU,
	PriceEndpointAZHour, PriceEndpointGB, PriceLogsIngestGB, PriceCustomMetricMonth,
	PriceAlarmMonth, PriceDashboardMonth, PriceSecretMonth, PriceKMSKeyMonth,
	PriceDataTransferOutGB, PriceCloudFrontRequest, PriceCloudFrontDataOutGB, PriceALBHour,
	PriceALBLCUHour, PriceFargateARMVCPUHour, PriceFargateARMGBHour,
}

// PriceTable is the dated list-price table of one region (prices.json).
type PriceTable struct {
	// Version changes whenever a price changes.
	Version string `json:"version"`
	// Region the prices are for (us-east-1).
	Region   string `json:"region"`
	Currency string `json:"currency"`
	// AsOf is the date the prices were written down.
	AsOf string `json:"as_of"`
	// Status says how the prices were obtained and how far to trust them.
	Status string `json:"status"`
	// Unverified lists the keys whose price no stored page showed.
	Unverified []string `json:"unverified,omitempty"`
	// MonthHours is the hours in a billing month (AWS uses 730).
	MonthHours float64          `json:"month_hours"`
	Prices     map[string]Price `json:"prices"`
}

// Price is the list price of one unit, with optional monthly volume tiers.
type Price struct {
	// USD is the price of one Unit in the first tier.
	USD  float64 `json:"usd"`
	Unit string  `json:"unit"`
	// Tiers, when present, price a month's volume: each tier's USD applies
	// to the quantity up to its UpTo (the last tier has no UpTo).
	Tiers  []Tier `json:"tiers,omitempty"`
	Source string `json:"source"`
	Note   string `json:"note,omitempty"`
	// Checked, when present, is the page the price was compared with.
	Checked *Check `json:"checked,omitempty"`
}

// Check records where a price was confirmed.
type Check struct {
	// URL of the page copy read.
	URL string `json:"url"`
	// By is who published it: "aws", "mirror" (a copy of an AWS page on
	// another host) or "third-party".
	By string `json:"by"`
	// Shows is the figure the page gives, in our words.
	Shows string `json:"shows"`
	// PageDate is the page's own date, when it shows one.
	PageDate string `json:"page_date,omitempty"`
}

// Tier is one volume tier of a Price.
type Tier struct {
	// UpTo is the cumulative monthly quantity where the tier ends; nil for
	// the last tier.
	UpTo *float64 `json:"up_to,omitempty"`
	USD  float64  `json:"usd"`
}

// Monthly prices a month's quantity through the tiers (the first tier's
// price when there are none).
func (p Price) Monthly(quantity float64) float64 {
	if len(p.Tiers) == 0 || quantity <= 0 {
		return quantity * p.USD
	}
	total, from := 0.0, 0.0
	for _, t := range p.Tiers {
		to := math.Inf(1)
		if t.UpTo != nil {
			to = *t.UpTo
		}
		if quantity <= from {
			break
		}
		total += (math.Min(quantity, to) - from) * t.USD
		from = to
	}
	return total
}

// DefaultPrices returns the embedded price table.
func DefaultPrices() *PriceTable {
	t, err := ParsePrices(pricesJSON)
	if err != nil {
		panic(fmt.Sprintf("costs: embedded prices.json: %v", err))
	}
	return t
}

// ParsePrices reads and validates a price table: every key the package
// prices with is present, prices are non-negative, tiers ascend and end
// open, each price names its source, and checked and unverified (both
// optional) are well formed.
func ParsePrices(raw []byte) (*PriceTable, error) {
	var t PriceTable
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	var errs []error
	if t.Version == "" || t.AsOf == "" || t.Region == "" || t.Status == "" {
		errs = append(errs, errors.New("price table: version, as_of, region and status are required"))
	}
	if t.MonthHours <= 0 {
		errs = append(errs, errors.New("price table: month_hours must be positive"))
	}
	for _, k := range requiredPriceKeys {
		if _, ok := t.Prices[k]; !ok {
			errs = append(errs, fmt.Errorf("price table: missing %q", k))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(t.Prices)) {
		p := t.Prices[k]
		if p.USD < 0 || p.Source == "" || p.Unit == "" {
			errs = append(errs, fmt.Errorf("price %q: needs a non-negative usd, a unit and a source", k))
		}
		for i, tier := range p.Tiers {
			last := i == len(p.Tiers)-1
			switch {
			case tier.USD < 0:
				errs = append(errs, fmt.Errorf("price %q tier %d: negative", k, i))
			case last && tier.UpTo != nil:
				errs = append(errs, fmt.Errorf("price %q: the last tier must have no up_to", k))
			case !last && tier.UpTo == nil:
				errs = append(errs, fmt.Errorf("price %q tier %d: only the last tier may omit up_to", k, i))
			case !last && i > 0 && *tier.UpTo <= *p.Tiers[i-1].UpTo:
				errs = append(errs, fmt.Errorf("price %q tier %d: up_to must ascend", k, i))
			}
		}
		if len(p.Tiers) > 0 && p.Tiers[0].USD != p.USD {
			errs = append(errs, fmt.Errorf("price %q: usd must equal the first tier's", k))
		}
		if c := p.Checked; c != nil && (c.URL == "" || c.Shows == "" || !slices.Contains([]string{"aws", "mirror", "third-party"}, c.By)) {
			errs = append(errs, fmt.Errorf("price %q: checked needs a url, what it shows and by aws, mirror or third-party", k))
		}
	}
	for _, k := range t.Unverified {
		if p, ok := t.Prices[k]; !ok || p.Checked != nil {
			errs = append(errs, fmt.Errorf("price table: unverified %q must be a price without checked", k))
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &t, nil
}

// Unit is the first-tier price of key. It panics on a key the table does
// not have: ParsePrices guarantees every key the package uses.
func (t *PriceTable) Unit(key string) float64 { return t.get(key).USD }

// Monthly prices a month's quantity of key through its tiers.
func (t *PriceTable) Monthly(key string, quantity float64) float64 {
	return t.get(key).Monthly(quantity)
}

func (t *PriceTable) get(key string) Price {
	p, ok := t.Prices[key]
	if !ok {
		panic(fmt.Sprintf("costs: price %q not in table %s", key, t.Version))
	}
	return p
}

// DaysPerMonth is the days in the table's billing month (730 h / 24).
func (t *PriceTable) DaysPerMonth() float64 { return t.MonthHours / 24 }

// Describe is the one-line provenance printed with every report and model.
func (t *PriceTable) Describe() string {
	return fmt.Sprintf("price table %s: %s list prices in %s as of %s (%s)", t.Version, t.Region, t.Currency, t.AsOf, t.Status)
}
