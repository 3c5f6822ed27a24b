package pgstore_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/catalog/storetest"
)

// The PostgreSQL stores keep the catalog store contract: every test of
// the suite on one control and one shard database (each test uses
// retailers of its own).
func TestStoresContract(t *testing.T) {
	t.Parallel()
	s := openStores(t)
	storetest.Run(t, func(t *testing.T) storetest.Store { return s })
}
