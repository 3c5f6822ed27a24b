package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"time"

	usagecounts "github.com/retailcatalog/catalog/functions/finance/usage"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/finance/costs"
	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/eventsource"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

type demoRun struct {
	api   *apiclient.Client
	admin string
	gate  *applyGate
	// expected holds each retailer's newest accepted snapshot.
	expected map[string]fixtures.Catalog
	tokens   map[string]string
	gens     map[string][]int64
	hooks    *hookReceiver // the retailers' webhook receiver (demo_events.go)
}

func demo(ctx context.Context, args []string) error {
	fs := newFlagSet("demo", "[flags]", `Starts a stack of its own in --data-dir and tells a short story: onboarding,
uploads with changes, deletes, a rejected and a held file, a superseding
upload; then the change events that left: the signed webhook deliveries a
receiver of its own got, and the analytics Parquet files; exits 0 only if
every catalog equals its newest accepted snapshot, every outcome reached the
webhooks and the analytics files reconstruct every catalog.

`+environmentHelp)
	dataDir := fs.String("data-dir", ".local/demo", "a data dir for the demo's own stack: a new or empty one, or one the demo made (wiped first)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	gate := &applyGate{}
	opts := stack.Options{DataDir: *dataDir, Addr: "127.0.0.1:0", Shards: 2, Progress: os.Stdout, ChunkRows: 2000, WrapApply: gate.wrap}
	env, err := readEnvironment(os.Getenv, &opts)
	if err != nil {
		return err
	}
	level := slog.LevelWarn
	if env.taken["CATALOG_LOG_LEVEL"] {
		level = env.logLevel
	}
	opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if err := resetDemoDir(*dataDir); err != nil {
		return err
	}
	fmt.Println("== starting the local stack (first run installs PostgreSQL and the queue emulator)")
	if len(env.names) > 0 {
		fmt.Printf("== from the environment: %s\n", strings.Join(env.names, ", "))
	}
	st, err := stack.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Printf("== API at %s\n", st.APIURL)
	hooks, err := startHookReceiver()
	if err != nil {
		return err
	}
	defer hooks.close()
	d := &demoRun{api: apiclient.New(st.APIURL), admin: st.AdminToken, gate: gate,
		expected: map[string]fixtures.Catalog{}, tokens: map[string]string{}, gens: map[string][]int64{}, hooks: hooks}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := d.story(ctx); err != nil {
		return err
	}
	if err := d.verify(ctx); err != nil {
		return err
	}
	if err := d.changeEvents(ctx, st); err != nil {
		return err
	}
	if err := d.costs(ctx, st, *dataDir); err != nil {
		return err
	}
	fmt.Println("\ndemo passed: every catalog equals its newest accepted snapshot, every outcome reached the webhooks, the analytics files equal the catalogs")
	return nil
}

// costs shows what the demo's day cost, from the usage every function
// metered (DESIGN 10), and keeps the HTML report in the data dir.
func (d *demoRun) costs(ctx context.Context, st *stack.Stack, dataDir string) error {
	d.step("what it cost: the usage every function metered, priced (GET /v1/admin/costs)")
	if err := st.FlushUsage(ctx); err != nil {
		return err
	}
	today := time.Now().UTC().Format(usagecounts.DateLayout)
	raw, err := d.api.Costs(ctx, d.admin, today, today, "json")
	if err != nil {
		return fmt.Errorf("cost report: %w", err)
	}
	var rep costs.Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("cost report: %w", err)
	}
	for _, r := range rep.Retailers {
		u := r.Usage
		fmt.Printf("   %-8s %d uploads, %d rows received, %d changed, %d storefront reads: $%.6f (variable $%.6f + shared $%.6f); a full rewrite $%.6f\n",
			r.RetailerID, u.Uploads, u.RowsReceived, u.RowsChanged(), u.Reads, r.TotalUSD, r.VariableUSD, r.SharedUSD, r.FullRewriteUSD)
	}
	fmt.Printf("   %s\n   shared costs: %s\n", rep.Prices, rep.AllocationRule)
	page, err := d.api.Costs(ctx, d.admin, today, today, "html")
	if err != nil {
		return fmt.Errorf("cost report: %w", err)
	}
	out := filepath.Join(dataDir, "costs.html")
	if err := os.WriteFile(out, page, 0o644); err != nil {
		return err
	}
	fmt.Printf("\n== the cost report with its charts: %s (open it in a browser). Later, with the demo's data:\n"+
		"   go run ./scripts/local up --data-dir %s     # prints the admin token\n"+
		"   CATALOG_API=<its address> CATALOG_ADMIN_TOKEN=<token> go run ./scripts/catalogctl costs --format html --out costs.html\n", out, dataDir)
	return nil
}

func (d *demoRun) step(format string, args ...any) { fmt.Printf("\n-- "+format+"\n", args...) }

func (d *demoRun) upload(ctx context.Context, retailer, format string, data []byte, wantState string) (apiclient.Status, error) {
	gen, err := d.api.Upload(ctx, d.tokens[retailer], retailer, format, data)
	if err != nil {
		return apiclient.Status{}, fmt.Errorf("upload for %s: %w", retailer, err)
	}
	d.gens[retailer] = append(d.gens[retailer], gen)
	fmt.Printf("   %s: generation %d uploaded (%d bytes)\n", retailer, gen, len(data))
	st, err := d.api.WaitSettled(ctx, d.tokens[retailer], retailer, gen, func(s apiclient.Status) {
		fmt.Printf("   %s/%d: %s, chunks %d/%d\n", retailer, gen, s.State, s.Chunks.Applied, s.Chunks.Total)
	})
	if err != nil {
		return st, err
	}
	if wantState != "" && st.State != wantState {
		return st, fmt.Errorf("%s generation %d ended %s, want %s (%+v)", retailer, gen, st.State, wantState, st.Error)
	}
	return st, nil
}

func (d *demoRun) story(ctx context.Context) error {
	d.step("onboarding three retailers")
	for _, r := range []string{"acme", "globex", "initech"} {
		ret, err := d.api.CreateRetailer(ctx, d.admin, r)
		if err != nil {
			return err
		}
		d.tokens[r] = ret.Token
		fmt.Printf("   %s on shard %d (token shown once)\n", r, ret.Shard)
	}
	for _, r := range hooked {
		if err := d.registerWebhook(ctx, r); err != nil {
			return err
		}
	}

	d.step("acme: first snapshot, 300 products as CSV")
	acme := fixtures.Generate("acme", 300)
	if _, err := d.upload(ctx, "acme", "csv", acme.CSV(nil), "applied"); err != nil {
		return err
	}
	d.expected["acme"] = acme

	d.step("acme: second snapshot with columns reordered, 10 updates, 5 deletes, 5 inserts")
	acme2 := acme.Clone()
	for i := 0; i < 10; i++ {
		acme2[fmt.Sprintf("acme-%05d", i*7)]["price"] = "0.99"
	}
	for i := 0; i < 5; i++ {
		delete(acme2, fmt.Sprintf("acme-%05d", 200+i))
		acme2[fmt.Sprintf("acme-new-%d", i)] = map[string]string{"title": "New", "brand": "Acme", "price": "1.00", "availability": "in stock", "description": ""}
	}
	reordered := []string{"description", "price", "title", "availability", "brand"}
	st, err := d.upload(ctx, "acme", "", acme2.CSV(reordered), "applied")
	if err != nil {
		return err
	}
	fmt.Printf("   changes: %+v (the column reorder changed nothing)\n", st.Changes)
	if st.Changes.Updated != 10 || st.Changes.Deleted != 5 || st.Changes.Inserted != 5 {
		return fmt.Errorf("acme generation 2 changes %+v, want 10 updated, 5 deleted, 5 inserted", st.Changes)
	}
	d.expected["acme"] = acme2

	d.step("globex: first snapshot, 200 products as gzipped JSON Lines")
	globex := fixtures.Generate("globex", 200)
	if _, err := d.upload(ctx, "globex", "", fixtures.Gzip(globex.JSONL()), "applied"); err != nil {
		return err
	}
	d.expected["globex"] = globex

	d.step("globex: a malformed file is rejected whole")
	bad := []byte("product_id,title\nglobex-1,ok\nglobex-2,\"never closed\n")
	st, err = d.upload(ctx, "globex", "csv", bad, "rejected")
	if err != nil {
		return err
	}
	fmt.Printf("   rejected: %s at line %v: %s\n", st.Error.Code, deref(st.Error.Line), st.Error.Message)

	d.step("globex: a snapshot deleting 150 of 200 products is held, then confirmed")
	globex3 := fixtures.Catalog{}
	for _, id := range globex.IDs()[:50] {
		globex3[id] = globex[id]
	}
	st, err = d.upload(ctx, "globex", "csv", globex3.CSV(nil), "held")
	if err != nil {
		return err
	}
	fmt.Printf("   held: %s\n", st.Error.Message)
	gen := d.gens["globex"][len(d.gens["globex"])-1]
	if _, err := d.api.Confirm(ctx, d.tokens["globex"], "globex", gen); err != nil {
		return err
	}
	if st, err = d.api.WaitApplied(ctx, d.tokens["globex"], "globex", gen, nil); err != nil || st.State != "applied" {
		return fmt.Errorf("confirmed globex generation ended %s: %v", st.State, err)
	}
	fmt.Printf("   confirmed and applied: %+v\n", st.Changes)
	d.expected["globex"] = globex3

	d.step("initech: 20,000 products, then an upload superseded by a newer one while it applies")
	initech := fixtures.Generate("initech", 20000)
	if _, err := d.upload(ctx, "initech", "csv", initech.CSV(nil), "applied"); err != nil {
		return err
	}
	if err := d.supersedeWhileApplying(ctx, initech); err != nil {
		return err
	}

	d.step("statuses, newest first")
	for _, r := range []string{"acme", "globex", "initech"} {
		items, err := d.api.List(ctx, d.tokens[r], r, 10)
		if err != nil {
			return err
		}
		for _, s := range items {
			errText := ""
			if s.Error != nil {
				errText = " error=" + s.Error.Code
			}
			fmt.Printf("   %-8s gen %d  %-10s +%d ~%d -%d =%d  chunks %d/%d%s%s\n", r, s.Generation, s.State,
				s.Changes.Inserted, s.Changes.Updated, s.Changes.Deleted, s.Changes.Unchanged,
				s.Chunks.Applied, s.Chunks.Total, supersededBy(s), errText)
		}
	}

	d.step("a few products from the storefront")
	for _, pid := range []string{"acme-00007", "acme-new-0", "globex-00001", "initech-00003"} {
		r := strings.SplitN(pid, "-", 2)[0]
		p, err := d.api.Product(ctx, r, pid)
		if err != nil {
			return err
		}
		fmt.Printf("   %s/%s gen %d: %s\n", r, pid, p.Generation, p.Attributes)
	}
	if _, err := d.api.Product(ctx, "acme", "acme-00200"); err == nil {
		return errors.New("deleted product acme-00200 is still served")
	}
	fmt.Println("   acme/acme-00200: 404 (deleted by generation 2)")
	return nil
}

// supersedeWhileApplying uploads a generation of 10,000 changes and, while
// it applies, a newer one: the older stops where it is (I4) and ends
// superseded, and the newer is applied whole. A chunk takes well under a
// second here, so the demo holds the older generation's chunks after its
// first back, as a slow or stalled apply worker would, until the newer
// upload has taken over; then they are let go, and find the fence raised.
func (d *demoRun) supersedeWhileApplying(ctx context.Context, initech fixtures.Catalog) error {
	tok := d.tokens["initech"]
	initech2 := initech.Clone()
	for i := 0; i < 20000; i += 2 {
		initech2[fmt.Sprintf("initech-%05d", i)]["availability"] = "back soon"
	}
	initech3 := initech.Clone()
	for i := 0; i < 20000; i += 3 {
		initech3[fmt.Sprintf("initech-%05d", i)]["price"] = "9.99"
	}
	slow, err := d.api.Reserve(ctx, tok, "initech", "csv")
	if err != nil {
		return err
	}
	d.gate.hold("initech", slow.Generation)
	defer d.gate.release()
	if err := d.api.Put(ctx, slow, initech2.CSV(nil)); err != nil {
		return err
	}
	fmt.Printf("   generation %d uploaded (10,000 changes); the demo holds its chunks after the first back, as a slow worker would\n", slow.Generation)
	s, err := d.api.WaitFor(ctx, tok, "initech", slow.Generation, func(s apiclient.Status) bool {
		return s.State == "applying" && s.Chunks.Applied >= 1 || apiclient.Settled(s.State)
	}, nil)
	if err != nil {
		return err
	}
	if s.State != "applying" {
		return fmt.Errorf("initech generation %d ended %s before a newer upload arrived", slow.Generation, s.State)
	}
	fmt.Printf("   generation %d: applying, chunks %d/%d; uploading generation %d\n", slow.Generation, s.Chunks.Applied, s.Chunks.Total, slow.Generation+1)

	fast, err := d.api.Reserve(ctx, tok, "initech", "csv")
	if err != nil {
		return err
	}
	if err := d.api.Put(ctx, fast, initech3.CSV(nil)); err != nil {
		return err
	}
	s, err = d.api.WaitFor(ctx, tok, "initech", slow.Generation, func(s apiclient.Status) bool { return apiclient.Settled(s.State) }, nil)
	if err != nil {
		return err
	}
	fmt.Printf("   generation %d arrived: generation %d is %s%s, chunks %d/%d; its held chunks are let go\n",
		fast.Generation, slow.Generation, s.State, supersededBy(s), s.Chunks.Applied, s.Chunks.Total)
	d.gate.release()
	d.gens["initech"] = append(d.gens["initech"], slow.Generation, fast.Generation)
	for _, g := range []int64{slow.Generation, fast.Generation} {
		s, err := d.api.WaitSettled(ctx, tok, "initech", g, nil)
		if err != nil {
			return err
		}
		fmt.Printf("   generation %d: %s%s, chunks %d/%d\n", g, s.State, supersededBy(s), s.Chunks.Applied, s.Chunks.Total)
		want := map[int64]string{slow.Generation: "superseded", fast.Generation: "applied"}[g]
		if s.State != want {
			return fmt.Errorf("initech generation %d ended %s, want %s", g, s.State, want)
		}
	}
	d.expected["initech"] = initech3
	return nil
}

// applyGate holds back, in the apply poller, the chunks of one generation
// after its first (seq > 0) until released; the other messages of a batch go
// through at once.
type applyGate struct {
	mu       sync.Mutex
	retailer string
	gen      int64
	open     chan struct{}
}

// hold starts holding back the chunks of retailer's generation gen.
func (g *applyGate) hold(retailer string, gen int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.retailer, g.gen, g.open = retailer, gen, make(chan struct{})
}

// release lets the held chunks go; it may be called more than once.
func (g *applyGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
}

// held returns the channel to wait on when msg is held back, else nil.
func (g *applyGate) held(msg lambdaevents.SQSMessage) chan struct{} {
	var m message.ChunkMessage
	if json.Unmarshal([]byte(msg.Body), &m) != nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil || m.RetailerID != g.retailer || m.Generation != g.gen || m.Seq == 0 {
		return nil
	}
	return g.open
}

func (g *applyGate) wrap(next eventsource.Handler) eventsource.Handler {
	return func(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
		var now, later []lambdaevents.SQSMessage
		var wait chan struct{}
		for _, m := range ev.Records {
			if ch := g.held(m); ch != nil {
				later, wait = append(later, m), ch
			} else {
				now = append(now, m)
			}
		}
		var out lambdaevents.SQSEventResponse
		run := func(part []lambdaevents.SQSMessage) error {
			if len(part) == 0 {
				return nil
			}
			resp, err := next(ctx, lambdaevents.SQSEvent{Records: part})
			out.BatchItemFailures = append(out.BatchItemFailures, resp.BatchItemFailures...)
			return err
		}
		if err := run(now); err != nil {
			return out, err
		}
		if len(later) > 0 {
			select {
			case <-wait:
			case <-ctx.Done(): // not released in time: delivered again later
				for _, m := range later {
					out.BatchItemFailures = append(out.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
				}
				return out, nil
			}
		}
		return out, run(later)
	}
}

// demoMarker marks a data dir as the demo's own: only such a dir (or a new
// or empty one) is wiped, never the data that `up` keeps.
const demoMarker = ".catalog-demo"

// resetDemoDir empties dir for a fresh demo stack, refusing a directory
// with anything in it that the demo did not make.
func resetDemoDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("demo data dir: %w", err)
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, demoMarker)); err != nil {
			return fmt.Errorf("--data-dir %s holds files the demo did not make (the data of `up`?), and the demo wipes its "+
				"data dir first: choose a new or empty directory (the default is .local/demo), or delete this one yourself", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("wipe the demo's data dir: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo data dir: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, demoMarker), []byte("made by `go run ./scripts/local demo`, which wipes this directory at every run\n"), 0o644)
}

func deref(p *int) any {
	if p == nil {
		return "-"
	}
	return *p
}

func supersededBy(s apiclient.Status) string {
	if s.SupersededBy != nil {
		return fmt.Sprintf(" (superseded by %d)", *s.SupersededBy)
	}
	return ""
}

// verify checks that every retailer's catalog equals its newest accepted snapshot.
func (d *demoRun) verify(ctx context.Context) error {
	d.step("checking every catalog against its newest accepted snapshot")
	ok := true
	for _, r := range []string{"acme", "globex", "initech"} {
		products, err := d.api.Catalog(ctx, r)
		if err != nil {
			return err
		}
		raw := map[string][]byte{}
		for _, p := range products {
			raw[p.ProductID] = p.Attributes
		}
		got, err := fixtures.FromJSON(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		if reflect.DeepEqual(got, d.expected[r]) {
			fmt.Printf("   %s: %d products, equal to the snapshot\n", r, len(got))
		} else {
			ok = false
			fmt.Printf("   %s: MISMATCH: %d products served, %d expected\n", r, len(got), len(d.expected[r]))
		}
	}
	if !ok {
		return errors.New("demo failed: a catalog differs from its newest snapshot")
	}
	return nil
}
