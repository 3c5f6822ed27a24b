// Package servetest runs the upload function's routes, package upload's
// and package control's together as the function serves them, on
// databases of the test's own and the in-memory blob store (its presigned
// GETs served on loopback) and queue: the fixture of both packages' tests.
package servetest

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/platform/metrics/metricstest"
	"github.com/retailcatalog/catalog/functions/ports/inmem"
	"github.com/retailcatalog/catalog/functions/serve/control"
	"github.com/retailcatalog/catalog/functions/serve/upload"
	"github.com/retailcatalog/catalog/functions/serve/upload/uploadwiring"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// Admin is the fixture's admin token.
const Admin = "admin-token"

// Shards is how many shards the fixture's databases have.
const Shards = 4

// ErrorBody is an error answer's code.
type ErrorBody struct {
	Error struct{ Code string } `json:"error"`
}

// Store is what both handlers ask of the databases.
type Store interface {
	upload.Store
	control.Store
}

// Options change the fixture: the handlers' configurations (the admin
// token and the diff queue are the fixture's), and a store in front of the
// fixture's databases (a test's wrapper).
type Options struct {
	Upload  upload.Config
	Control control.Config
	// Wrap, when set, is the store the handlers use, given the fixture's.
	Wrap func(*pgstore.Stores) Store
}

// Fixture is the upload function's routes on their own databases.
type Fixture struct {
	T       *testing.T
	Store   *pgstore.Stores
	Queue   *inmem.Queue
	Blobs   *inmem.Blobs
	Metrics *metricstest.Capture
	Upload  *upload.Handler
	Control *control.Handler
}

// New builds the fixture; its metrics are validated when the test ends.
func New(t *testing.T, o Options) *Fixture {
	t.Helper()
	f := &Fixture{T: t, Store: pgstoretest.New(t, pgstoretest.Shards(Shards)), Queue: inmem.NewQueue(), Blobs: inmem.NewBlobs(),
		Metrics: &metricstest.Capture{}}
	var store Store = f.Store
	if o.Wrap != nil {
		store = o.Wrap(f.Store)
	}
	o.Upload.AdminToken, o.Control.AdminToken = Admin, Admin
	if o.Upload.DiffQueueURL == "" {
		o.Upload.DiffQueueURL = "diff-jobs"
	}
	if o.Upload.Region == "" {
		o.Upload.Region = "us-east-1"
	}
	// The blob store's presigned GETs are served, as S3 serves them.
	blobServer := httptest.NewServer(f.Blobs)
	t.Cleanup(blobServer.Close)
	f.Blobs.BaseURL = blobServer.URL
	log := slog.New(slog.DiscardHandler)
	f.Upload = upload.New(o.Upload, store, f.Blobs, f.Queue, log)
	f.Upload.Metrics = metrics.New(f.Metrics, metrics.Options{Function: "upload"})
	f.Upload.Plans = f.Blobs
	f.Control = control.New(o.Control, store, f.Blobs, log)
	t.Cleanup(func() {
		if err := f.Metrics.Validate(); err != nil {
			t.Error(err)
		}
	})
	return f
}

// Handler serves both handlers' routes, as the upload function does (those
// enabled so far: EnableWebhooks adds some).
func (f *Fixture) Handler() http.Handler { return uploadwiring.Routes(f.Upload, f.Control) }

// Routes are both handlers' routes.
func (f *Fixture) Routes() []string { return append(f.Upload.Routes(), f.Control.Routes()...) }

// Call makes a request and decodes a JSON answer into out (when not nil).
func (f *Fixture) Call(method, path, token, body string, out any) int {
	f.T.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	w := httptest.NewRecorder()
	f.Handler().ServeHTTP(w, req)
	if out != nil {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			f.T.Fatalf("%s %s: body %s: %v", method, path, w.Body, err)
		}
	}
	return w.Code
}

// Onboard registers a retailer through the admin route and returns its token.
func (f *Fixture) Onboard(id string) string {
	f.T.Helper()
	var created struct {
		RetailerID string `json:"retailer_id"`
		Token      string `json:"token"`
		Shard      int    `json:"shard"`
	}
	if code := f.Call("POST", "/v1/admin/retailers", Admin, `{"retailer_id":"`+id+`"}`, &created); code != http.StatusCreated {
		f.T.Fatalf("onboard %s: %d", id, code)
	}
	if created.RetailerID != id || created.Shard != catalog.ShardFor(id, Shards) || !strings.HasPrefix(created.Token, "rt_") {
		f.T.Fatalf("onboard %s: %+v", id, created)
	}
	return created.Token
}
