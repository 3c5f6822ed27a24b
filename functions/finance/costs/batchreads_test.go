package costs

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/finance/usage"
)

// The report prices a storefront request once, however many products it
// read: a batch-get of 20 (20 reads, one read invocation) pays one API
// Gateway request and one request's log lines, and 20 reads' I/O; a day
// of 20 single GETs pays 20 of each.
func TestReportPricesABatchGetAsOneRequest(t *testing.T) {
	t.Parallel()
	p := DefaultPricer()
	day := func(reads, invocations int64) map[string]float64 {
		u := usage.Usage{Reads: reads}
		u.AddFunction("read", usage.FunctionUsage{Invocations: invocations, MBms: invocations * 5 * 1024})
		by := map[string]float64{}
		for _, l := range p.Variable(u, DefaultDeployment()) {
			if l.Side == SideStorefront {
				by[l.Service] += l.USD
			}
		}
		return by
	}
	batch, singles := day(20, 1), day(20, 20)
	approx(t, "API Gateway, one batch-get", batch[ServiceAPIGateway], 1*0.000001, 1e-12)
	approx(t, "API Gateway, 20 GETs", singles[ServiceAPIGateway], 20*0.000001, 1e-12)
	approx(t, "logs, one request", batch[ServiceLogs], 700.0/(1<<30)*0.5, 1e-12)
	approx(t, "read I/O follows the products", batch[ServiceAuroraIO], singles[ServiceAuroraIO], 1e-15)
	approx(t, "read I/O", batch[ServiceAuroraIO], 20*0.2*0.0000002, 1e-12)
}
