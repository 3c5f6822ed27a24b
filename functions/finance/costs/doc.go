// Package costs is the finance side of the catalog (DESIGN 10): the pricing
// of the usage counters metered per retailer per UTC day (package usage,
// which the meters import instead of this package), the dated price table and
// the figures measured by the project's benchmarks (both data files embedded
// from this directory), the cost report (CSV, JSON and a self-contained HTML
// page with SVG charts), and the capacity and cost model of the whole system
// at a given scale (catalogctl model).
//
// It imports no AWS or database package: adapters fill usage.Usage records
// from the control database; this package only computes and renders.
package costs
