package snapshot

import "testing"

// StoreHooks connect the package's own tests (the fuzzers, the corpora) to
// the differential test against PostgreSQL (I11), which lives in the
// external test package snapshot_test (store_test.go): it may import the
// database driver and the test services, which this package must not.
// store_test.go sets Store in an init function; nil hooks check nothing.
type StoreHooks struct {
	// Setup connects to PostgreSQL, once per process (a fuzz worker is a
	// process of its own), starting a server when none is given.
	Setup func(tb testing.TB)
	// Rows writes rows the reader accepted to jsonb as the apply does
	// (binary COPY) and reads them back: each must be stored, read back
	// value-equal, and canonicalize to exactly its Attributes.
	Rows func(tb testing.TB, rows []Row)
	// JSONB returns what jsonb makes of a JSON text (its own print), or
	// false when it refuses the text.
	JSONB func(tb testing.TB, text string) (string, bool)
}

// Store is set by store_test.go.
var Store StoreHooks

func storeSetup(tb testing.TB) {
	if Store.Setup != nil {
		Store.Setup(tb)
	}
}

func storeRows(tb testing.TB, rows []Row) {
	if Store.Rows != nil && len(rows) > 0 {
		Store.Rows(tb, rows)
	}
}

// storeRefuses reports whether jsonb refuses text (false without a
// database: nothing checked).
func storeRefuses(tb testing.TB, text string) (refused, checked bool) {
	if Store.JSONB == nil {
		return false, false
	}
	_, ok := Store.JSONB(tb, text)
	return !ok, true
}
