package costs

import "github.com/retailcatalog/catalog/functions/finance/usage"

// Side is the part of the system a cost belongs to.
type Side string

// The sides of the system.
const (
	SideIngestion  Side = "ingestion"
	SideStorefront Side = "storefront"
	SideShared     Side = "shared"
)

func sideOf(function string) Side {
	if usage.StorefrontFunctions[function] {
		return SideStorefront
	}
	return SideIngestion
}

// lambdaGBs is the GB-seconds of every function; side selects "" (all),
// SideIngestion or SideStorefront.
func lambdaGBs(u usage.Usage, side Side) float64 {
	var mbms int64
	for name, f := range u.Functions {
		if side == "" || sideOf(name) == side {
			mbms += f.MBms
		}
	}
	return float64(mbms) / usage.MBmsPerGBs
}

// lambdaRequests is the invocations of every function of side ("" for all).
func lambdaRequests(u usage.Usage, side Side) int64 {
	var n int64
	for name, f := range u.Functions {
		if side == "" || sideOf(name) == side {
			n += f.Invocations
		}
	}
	return n
}
