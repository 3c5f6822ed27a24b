package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
	"github.com/retailcatalog/catalog/scripts/local/stack"
)

type demoRun struct {
	api   *apiclient.Client
	admin string
	// expected holds each retailer's newest accepted snapshot.
	expected map[string]fixtures.Catalog
	tokens   map[string]string
	gens     map[string][]int64
}

func demo(ctx context.Context, args []string) error {
	fs := newFlagSet("demo", "[flags]", `Starts a stack of its own in --data-dir and tells a short story: onboarding,
uploads with changes, deletes, a rejected and a held file, a superseding
upload; exits 0 only if every catalog equals its newest accepted snapshot.`)
	dataDir := fs.String("data-dir", ".local/demo", "a data dir for the demo's own stack (wiped first)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := os.RemoveAll(*dataDir); err != nil {
		return err
	}
	fmt.Println("== starting the local stack (first run installs PostgreSQL and the queue emulator)")
	st, err := stack.Start(ctx, stack.Options{
		DataDir: *dataDir, Addr: "127.0.0.1:0", Shards: 2, Progress: os.Stdout,
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Printf("== API at %s\n", st.APIURL)
	d := &demoRun{api: apiclient.New(st.APIURL), admin: st.AdminToken,
		expected: map[string]fixtures.Catalog{}, tokens: map[string]string{}, gens: map[string][]int64{}}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := d.story(ctx); err != nil {
		return err
	}
	return d.verify(ctx)
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
	initech2 := initech.Clone()
	for i := 0; i < 20000; i += 2 {
		initech2[fmt.Sprintf("initech-%05d", i)]["availability"] = "back soon"
	}
	initech3 := initech.Clone()
	for i := 0; i < 20000; i += 3 {
		initech3[fmt.Sprintf("initech-%05d", i)]["price"] = "9.99"
	}
	slow, err := d.api.Reserve(ctx, d.tokens["initech"], "initech", "csv")
	if err != nil {
		return err
	}
	fast, err := d.api.Reserve(ctx, d.tokens["initech"], "initech", "csv")
	if err != nil {
		return err
	}
	if err := d.api.Put(ctx, slow, initech2.CSV(nil)); err != nil {
		return err
	}
	fmt.Printf("   generation %d uploaded (10,000 changes)\n", slow.Generation)
	for {
		s, err := d.api.Status(ctx, d.tokens["initech"], "initech", slow.Generation)
		if err != nil {
			return err
		}
		if s.State != "awaiting_upload" && s.State != "received" {
			fmt.Printf("   generation %d is %s; uploading generation %d\n", slow.Generation, s.State, fast.Generation)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := d.api.Put(ctx, fast, initech3.CSV(nil)); err != nil {
		return err
	}
	d.gens["initech"] = append(d.gens["initech"], slow.Generation, fast.Generation)
	for _, g := range []int64{slow.Generation, fast.Generation} {
		s, err := d.api.WaitSettled(ctx, d.tokens["initech"], "initech", g, nil)
		if err != nil {
			return err
		}
		fmt.Printf("   generation %d: %s%s\n", g, s.State, supersededBy(s))
	}
	if s, _ := d.api.Status(ctx, d.tokens["initech"], "initech", fast.Generation); s.State != "applied" {
		return fmt.Errorf("initech generation %d ended %s, want applied", fast.Generation, s.State)
	}
	d.expected["initech"] = initech3

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
	fmt.Println("\ndemo passed")
	return nil
}
