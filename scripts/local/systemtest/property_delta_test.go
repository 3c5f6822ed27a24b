package systemtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
	"github.com/retailcatalog/catalog/scripts/local/fixtures"
)

// Deltas and rollbacks in the property test's schedules (DESIGN 13). The
// model: a delta's catalog is the catalog of the newest generation applied
// before it with the delta laid over it (a delta waits for every older
// generation to be final); a rollback's is its source's.

// deltaRow is one row of a schedule's delta: a delete, or attributes set
// (a nil value removes the attribute: JSON null).
type deltaRow struct {
	id  string
	del bool
	set map[string]*string
}

// layDelta is base with rows laid over it.
func layDelta(base fixtures.Catalog, rows []deltaRow) fixtures.Catalog {
	c := base.Clone()
	if c == nil {
		c = fixtures.Catalog{}
	}
	for _, row := range rows {
		if row.del {
			delete(c, row.id)
			continue
		}
		attrs := maps.Clone(c[row.id])
		if attrs == nil {
			attrs = map[string]string{}
		}
		for k, v := range row.set {
			if v == nil {
				delete(attrs, k)
			} else {
				attrs[k] = *v
			}
		}
		c[row.id] = attrs
	}
	return c
}

// genDelta makes a delta against what the retailer last uploaded: price
// merges, a null removal (JSON Lines only), deletes, inserts, and the
// delete of a product that is not there; and its file, CSV or JSON Lines.
func (r *retailerRun) genDelta() ([]deltaRow, []byte) {
	rng := r.sc.rng
	ids := r.current.IDs()
	jsonl := rng.chance(60)
	price := func() *string { p := fmt.Sprint(rng.IntN(5)); return &p }
	var rows []deltaRow
	seen := map[string]bool{}
	add := func(row deltaRow) {
		if !seen[row.id] {
			seen[row.id] = true
			rows = append(rows, row)
		}
	}
	for k := 1 + rng.IntN(4); k > 0 && len(ids) > 0; k-- {
		set := map[string]*string{"price": price()}
		if jsonl && rng.chance(30) {
			set["description"] = nil
		}
		add(deltaRow{id: ids[rng.IntN(len(ids))], set: set})
	}
	for k := rng.IntN(3); k > 0 && len(ids) > 8; k-- {
		if id := ids[rng.IntN(len(ids))]; !r.isStable(id) {
			add(deltaRow{id: id, del: true})
		}
	}
	for k := rng.IntN(3); k > 0; k-- {
		set := map[string]*string{"price": price()}
		if jsonl {
			title := fmt.Sprint(rng.IntN(3))
			set["title"], set["availability"] = &title, nil
		}
		add(deltaRow{id: fmt.Sprintf("x-%d", rng.IntN(100)), set: set})
	}
	if rng.chance(30) {
		add(deltaRow{id: fmt.Sprintf("absent-%d", rng.IntN(100)), del: true})
	}
	var b bytes.Buffer
	if !jsonl {
		b.WriteString("product_id,price,_delete\n")
	}
	for _, row := range rows {
		switch {
		case jsonl && row.del:
			line, _ := json.Marshal(map[string]any{"product_id": row.id, "_delete": true})
			b.Write(append(line, '\n'))
		case jsonl:
			obj := map[string]any{"product_id": row.id}
			for k, v := range row.set {
				obj[k] = v // nil: null
			}
			line, _ := json.Marshal(obj)
			b.Write(append(line, '\n'))
		case row.del:
			fmt.Fprintf(&b, "%s,,true\n", row.id)
		default:
			fmt.Fprintf(&b, "%s,%s,\n", row.id, *row.set["price"])
		}
	}
	return rows, b.Bytes()
}

// registerDelta records the values a delta may give a product: laid over
// each value the product may have (or none), as the storefront may serve
// them.
func (r *retailerRun) registerDelta(rows []deltaRow) {
	r.knownMu.Lock()
	var extra []fixtures.Catalog
	for _, row := range rows {
		if row.del {
			continue
		}
		bases := append([]map[string]string{nil}, r.known[row.id]...)
		for _, base := range bases {
			c := fixtures.Catalog{}
			if base != nil {
				c[row.id] = base
			}
			extra = append(extra, layDelta(c, []deltaRow{row}))
		}
	}
	r.knownMu.Unlock()
	for _, c := range extra {
		r.register(c)
	}
}

// playDelta reserves a delta, registers what it may serve and PUTs it.
func (r *retailerRun) playDelta(ctx context.Context) {
	t := r.sc.t
	rows, file := r.genDelta()
	var slot apiclient.Slot
	err := retryMoving(ctx, func() (err error) {
		slot, err = r.sc.e.API.ReserveMode(ctx, r.token, r.id, "", "delta")
		return err
	})
	require.NoError(t, err, "seed %d: reserve a delta for %s", r.sc.seed, r.id)
	r.granted++
	r.registerDelta(rows)
	r.put(ctx, slot, file)
	r.uploads = append(r.uploads, upload{gen: slot.Generation, delta: rows})
}

// playRollback rolls back to an earlier upload once it settled, when it
// was applied.
func (r *retailerRun) playRollback(ctx context.Context) {
	t := r.sc.t
	var candidates []int64
	for _, u := range r.uploads {
		if u.want != nil || u.delta != nil {
			candidates = append(candidates, u.gen)
		}
	}
	if len(candidates) == 0 || r.granted >= propertyReservationsPerHour-2 {
		return
	}
	to := candidates[r.sc.rng.IntN(len(candidates))]
	st, err := r.sc.e.API.WaitSettled(ctx, r.token, r.id, to, nil)
	require.NoError(t, err, "seed %d: generation %d of %s", r.sc.seed, to, r.id)
	if st.State != "applied" {
		return
	}
	var rb apiclient.Status
	err = retryMoving(ctx, func() (err error) {
		rb, err = r.sc.e.API.Rollback(ctx, r.token, r.id, to)
		return err
	})
	require.NoError(t, err, "seed %d: roll %s back to %d", r.sc.seed, r.id, to)
	r.granted++
	r.uploads = append(r.uploads, upload{gen: rb.Generation, rollbackOf: to})
}

// modelContents is what each generation that may be applied holds, in
// generation order: a full upload its file, a delta the newest applied
// generation before it with the delta laid over it, a rollback (the
// retailer's or an undo) its source's.
func (r *retailerRun) modelContents(list []statusView) map[int64]fixtures.Catalog {
	t, seed := r.sc.t, r.sc.seed
	byUpload := map[int64]upload{}
	for _, u := range r.uploads {
		byUpload[u.gen] = u
	}
	slices.SortFunc(list, func(a, b statusView) int { return int(a.gen - b.gen) })
	content := map[int64]fixtures.Catalog{}
	var applied fixtures.Catalog // the newest applied generation's so far
	for _, s := range list {
		u, isUpload := byUpload[s.gen]
		switch {
		case s.source != nil: // a rollback: the retailer's or an undo
			if *s.source == 0 {
				content[s.gen] = fixtures.Catalog{}
				break
			}
			c, ok := content[*s.source]
			require.True(t, ok, "seed %d: %s rollback %d's source %d has no known content", seed, r.id, s.gen, *s.source)
			content[s.gen] = c
		case isUpload && u.delta != nil:
			require.Equal(t, "delta", s.mode, "seed %d: %s generation %d", seed, r.id, s.gen)
			require.Contains(t, []string{"applied", "superseded"}, s.state, "seed %d: %s delta %d", seed, r.id, s.gen)
			content[s.gen] = layDelta(applied, u.delta)
		case isUpload && u.want != nil:
			content[s.gen] = u.want
		}
		if s.state == "applied" {
			c, ok := content[s.gen]
			require.True(t, ok, "seed %d: %s applied generation %d has no known content", seed, r.id, s.gen)
			applied = c
		}
	}
	return content
}

// statusView is what modelContents reads of a status.
type statusView struct {
	gen         int64
	state, mode string
	source      *int64
}
