package control_test

import (
	"testing"

	"github.com/retailcatalog/catalog/functions/serve/servetest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const admin = servetest.Admin

// fixture is the upload function's routes (upload's and control's) on
// databases of the test's own.
type fixture = servetest.Fixture

type errorBody = servetest.ErrorBody

func newFixture(t *testing.T) *fixture { return servetest.New(t, servetest.Options{}) }
