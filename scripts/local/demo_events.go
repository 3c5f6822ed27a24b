package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/publish/analytics"
	"github.com/retailcatalog/catalog/functions/publish/webhook"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// demoHookSecret is the secret the demo's retailer signs its webhook with.
const demoHookSecret = "acme-webhook-secret-0123456789"

// hookReceiver is the demo retailer's webhook receiver, on 127.0.0.1: it
// checks each delivery's signature and keeps what arrived.
type hookReceiver struct {
	srv *http.Server
	url string
	mu  sync.Mutex
	got []delivery
}

type delivery struct {
	id, state string
	gen       int64
	signed    bool
}

// hookLimits bound what one client can hold of the demo's receiver: a
// connection and a goroutine for at most these times, headers and a body
// of at most these sizes.
type hookLimits struct {
	readHeader, read, write, idle time.Duration
	maxHeader                     int
	maxBody                       int64
}

// defaultHookLimits fit what the receiver takes: envelopes of at most 200
// KiB (DESIGN 8) from the webhooks consumer, which gives a receiver 10 s
// to answer.
var defaultHookLimits = hookLimits{readHeader: 5 * time.Second, read: 10 * time.Second, write: 10 * time.Second,
	idle: 30 * time.Second, maxHeader: 16 << 10, maxBody: 1 << 20}

func startHookReceiver() (*hookReceiver, error) { return startHookReceiverWith(defaultHookLimits) }

func startHookReceiverWith(l hookLimits) (*hookReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rc := &hookReceiver{url: "http://" + ln.Addr().String() + "/hooks/catalog"}
	rc.srv = &http.Server{ReadHeaderTimeout: l.readHeader, ReadTimeout: l.read, WriteTimeout: l.write, IdleTimeout: l.idle,
		MaxHeaderBytes: l.maxHeader, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, l.maxBody))
			if err != nil {
				w.WriteHeader(http.StatusRequestEntityTooLarge) // or cut off: not a delivery
				return
			}
			var env message.Envelope
			_ = json.Unmarshal(body, &env)
			d := delivery{id: r.Header.Get(webhook.HeaderEventID), gen: env.Generation,
				signed: webhook.Verify([]byte(demoHookSecret), body, r.Header.Get(webhook.HeaderSignature))}
			if env.Status != nil {
				d.state = env.Status.State
			}
			rc.mu.Lock()
			rc.got = append(rc.got, d)
			rc.mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		})}
	go rc.srv.Serve(ln)
	return rc, nil
}

func (rc *hookReceiver) deliveries() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

func (rc *hookReceiver) close() { rc.srv.Close() }

// hooked are the demo's retailers with a webhook.
var hooked = []string{"acme", "globex"}

// registerWebhook saves the receiver as a retailer's webhook, as the
// retailer would (PUT /v1/retailers/{id}/webhook).
func (d *demoRun) registerWebhook(ctx context.Context, retailer string) error {
	err := d.api.Do(ctx, http.MethodPut, "/v1/retailers/"+retailer+"/webhook", d.tokens[retailer],
		map[string]string{"url": d.hooks.url, "secret": demoHookSecret}, nil)
	if err != nil {
		return fmt.Errorf("register %s's webhook: %w", retailer, err)
	}
	fmt.Printf("   %s's webhook: %s (the demo's receiver; every delivery signed with %s's secret)\n", retailer, d.hooks.url, retailer)
	return nil
}

// changeEvents shows what left the system as events: the webhook
// deliveries the receiver got, and the analytics files, whose
// reconstruction must equal every catalog; then that nothing waits in the
// outboxes.
func (d *demoRun) changeEvents(ctx context.Context, st *stack.Stack) error {
	d.step("change events: every upload's outcome to the retailers' webhooks, every change to the analytics files")
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	// Every outcome of the hooked retailers' uploads reaches their webhook.
	want := map[string]bool{}
	for _, r := range hooked {
		items, err := d.api.List(ctx, d.tokens[r], r, 100)
		if err != nil {
			return err
		}
		for _, s := range items {
			if typ := message.SnapshotType(s.State); typ != "" { // a state with an outcome event
				want[message.EventID(typ, r, s.Generation, 0)] = true
			}
		}
	}
	if err := waitUntil(ctx, func() bool {
		got := map[string]bool{}
		for _, dl := range d.hooks.deliveries() {
			got[dl.id] = true
		}
		for id := range want {
			if !got[id] {
				return false
			}
		}
		return true
	}); err != nil {
		return fmt.Errorf("the webhooks did not get every outcome (%d wanted, %d deliveries): %w", len(want), len(d.hooks.deliveries()), err)
	}
	for _, dl := range d.hooks.deliveries() {
		if !dl.signed {
			return fmt.Errorf("delivery %s: bad signature", dl.id)
		}
		fmt.Printf("   webhook <- %-24s %-10s X-Catalog-Signature verified\n", dl.id, dl.state)
	}

	// The analytics files reconstruct every catalog.
	for _, r := range []string{"acme", "globex", "initech"} {
		var files, rows int
		var got fixtures.Catalog
		var readErr error
		err := waitUntil(ctx, func() bool {
			got, files, rows, readErr = st.AnalyticsCatalog(ctx, r)
			return readErr == nil && reflect.DeepEqual(got, d.expected[r])
		})
		if err != nil {
			return fmt.Errorf("%s: the analytics files (%d, %d rows) reconstruct %d products, the catalog has %d (%v): %w",
				r, files, rows, len(got), len(d.expected[r]), readErr, err)
		}
		fmt.Printf("   %-8s %d Parquet files, %d change rows: the latest row per product equals the catalog (%d products)\n", r, files, rows, len(got))
	}
	keys, err := st.Blobs.List(ctx, analytics.RetailerPrefix("acme"))
	if err != nil {
		return err
	}
	sort.Strings(keys)
	for i, k := range keys {
		if i == 3 {
			fmt.Printf("   ... (%d more)\n", len(keys)-3)
			break
		}
		fmt.Printf("   s3://%s/%s\n", st.Bucket, k)
	}

	// Nothing is left waiting to be published.
	if err := waitUntil(ctx, func() bool {
		empty, err := st.OutboxEmpty(ctx)
		return err == nil && empty
	}); err != nil {
		return fmt.Errorf("events still wait in an outbox: %w", err)
	}
	fmt.Printf("   outboxes: empty (every committed change published; the sweeper publishes anything the fast path missed within 90 s)\n")
	fmt.Printf("   the files stay under %s/s3/%s/%s (Parquet: any reader, or Athena on AWS)\n",
		strings.TrimSuffix(st.Options.DataDir, "/"), st.Bucket, analytics.Prefix)
	return nil
}

// waitUntil polls ok until it holds or ctx ends.
func waitUntil(ctx context.Context, ok func() bool) error {
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}
