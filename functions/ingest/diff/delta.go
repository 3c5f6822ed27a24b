package diff

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// Delta uploads and materialized catalogs (DESIGN 13). A delta's diff reads
// the delta (small), reads the current values of the products it names
// from the shard, merges, and sends normal chunks of full rows; its index
// is the baseline's with the delta's entries merged in, so the next full
// snapshot diffs as after any other. When a stopped generation may have
// written rows (I5), the shard no longer holds the baseline's values for
// them: the delta is then laid over the baseline's catalog materialized
// from its chain (the newest full snapshot and the deltas after it) into a
// JSON Lines file in the spill directory, which is diffed as a full
// snapshot, repairing every row as any newer generation does. A rollback
// to a delta generation is diffed the same way, on its source's catalog.

// DeltaStore is what the diff needs of the databases for deltas and
// rollbacks to them. pgstore.Stores implements it.
type DeltaStore interface {
	// Chain returns the objects whose merge is generation gen's catalog,
	// oldest first: a full snapshot (none: the empty catalog), then the
	// deltas applied after it up to gen.
	Chain(ctx context.Context, retailerID string, gen int64) ([]catalog.ChainLink, error)
	// CurrentProducts returns the live products among ids.
	CurrentProducts(ctx context.Context, retailerID string, ids []string) ([]catalog.StoredProduct, error)
	// WaitingDelta returns the oldest received delta whose older
	// generations are all final (0: none): its diff may start.
	WaitingDelta(ctx context.Context, retailerID string) (int64, error)
}

// currentBatch is how many product ids one CurrentProducts call asks for.
const currentBatch = 1000

// deltaChange is what a delta does to one product it names.
type deltaChange struct {
	id     string
	delete bool
	attrs  []byte // canonical, for an upsert
	hash   catalog.Hash
	insert bool
	before []byte // canonical, the live value: kept for a plan only (a dry run's or a held delta's, keepBefore)
}

// startWaitingDelta sends the diff job of a delta that waited for a
// generation now final (I10: it must not stay received). Best effort: the
// stuck sweeper re-drives it otherwise.
func (h *Handler) startWaitingDelta(ctx context.Context, log interface {
	WarnContext(context.Context, string, ...any)
}, retailerID string) {
	if h.Jobs == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	gen, err := h.store.WaitingDelta(ctx, retailerID)
	if err == nil && gen > 0 {
		err = h.Jobs.SendDiffJob(ctx, retailerID, gen)
	}
	if err != nil {
		log.WarnContext(ctx, "start a waiting delta; the stuck sweeper will", "err", err)
	}
}

// prepareContent runs before the full snapshot's diff: a delta is diffed
// here (done), or laid over a materialized baseline that the full diff
// then reads (r.local); a rollback to a generation whose catalog is not one
// full snapshot reads its materialized catalog.
func (r *run) prepareContent(ctx context.Context) (done bool, err error) {
	switch r.decision.Mode {
	case catalog.ModeDelta:
		return r.diffDelta(ctx)
	case catalog.ModeRollback:
		links, err := r.h.store.Chain(ctx, r.job.RetailerID, r.decision.Source)
		if err != nil {
			return false, err
		}
		if len(links) == 0 || (len(links) == 1 && links[0].Mode == catalog.ModeFull) {
			return false, nil // its source's upload, as read today
		}
		return false, r.materialize(ctx, links, nil)
	}
	return false, nil
}

// diffDelta reads the delta, holds it when the hold rules say so, takes
// over and sends its changes (or, with stopped generations to repair,
// materializes the catalog it makes for the full diff: done is false).
func (r *run) diffDelta(ctx context.Context) (done bool, err error) {
	r.started = time.Now()
	ops, rejected, err := r.readDelta(ctx)
	if err != nil || rejected || ops == nil {
		return true, err
	}
	r.read = time.Now()
	changes, unchanged, err := r.deltaChanges(ctx, ops)
	var se *snapshot.Error
	if errors.As(err, &se) {
		return true, r.reject(ctx, se)
	}
	if err != nil {
		return true, err
	}
	if err := r.keepCounts(ctx); err != nil { // the catalog it leaves: the next upload's baseline counts
		return true, err
	}
	plan := catalog.Plan{Unchanged: unchanged}
	for _, c := range changes {
		switch {
		case c.delete:
			plan.Deleted++
		case c.insert:
			plan.Inserted++
		default:
			plan.Updated++
		}
	}
	r.products = max(r.decision.BaselineProducts+plan.Inserted-plan.Deleted, 0)
	if r.decision.DryRun {
		return true, r.previewDelta(ctx, plan, changes) // delta_preview.go: nothing is written
	}
	if !r.decision.Confirmed && r.decision.BaselineProducts > 0 {
		// The holds of any generation (I8), on what the delta changes;
		// attribute_dropped (DESIGN 13, "a delta is checked only on the
		// products it names") from what deltaChanges gathered (deltaDrift).
		// A held delta's plan is its changes, each with the live value
		// it was merged into (deltaChanges keeps it when a hold may apply).
		if held, err := r.holdPlan(ctx, plan, r.decision, func(ctx context.Context) (int, error) {
			return r.writeDeltaPlan(ctx, changes)
		}); err != nil || held {
			return true, err
		}
	}
	takeover, err := r.store.TakeOver(ctx, r.job.RetailerID, r.job.Generation)
	if errors.Is(err, catalog.ErrSuperseded) {
		r.log.InfoContext(ctx, "a newer generation took over first; stopping")
		r.ended(ctx, catalog.StateSuperseded)
		return true, nil
	}
	if err != nil {
		return true, err
	}
	if len(takeover.Stopped) > 0 {
		// The shard may hold a stopped generation's values (I5): lay the
		// delta over the baseline's own catalog and diff that in full.
		links, err := r.h.store.Chain(ctx, r.job.RetailerID, takeover.Baseline)
		if err != nil {
			return true, err
		}
		r.log.InfoContext(ctx, "delta over stopped generations: diffed on the materialized catalog", "stopped", takeover.Stopped,
			"baseline", takeover.Baseline, "chain", len(links))
		r.decision.Confirmed = true // its holds were decided on the delta
		return false, r.materialize(ctx, links, ops)
	}
	return true, r.sendDelta(ctx, takeover, plan, changes)
}

// readDelta reads the delta whole (I7: the reader's checks, and duplicate
// product_ids): its ops in file order, nil when rejected or superseded.
func (r *run) readDelta(ctx context.Context) (ops []snapshot.DeltaOp, rejected bool, err error) {
	obj, err := r.openUpload(ctx, r.decision.ETag)
	if err != nil {
		return nil, false, err
	}
	defer obj.Body.Close()
	r.etag, r.size = obj.ETag, obj.Size
	if r.decision.ETag == "" && r.decision.ObjectKey != "" {
		pinned, err := r.store.PinUpload(ctx, r.job.RetailerID, r.job.Generation, obj.ETag)
		if err != nil {
			return nil, false, err
		}
		if pinned != obj.ETag {
			return nil, false, &uploadGone{fmt.Errorf("upload %s is %s, but %s was read first: %w", r.job.Key, obj.ETag, pinned, blob.ErrChanged)}
		}
	}
	if r.h.cfg.MaxUploadBytes > 0 && obj.Size > r.h.cfg.MaxUploadBytes {
		return nil, true, r.reject(ctx, &snapshot.Error{Code: snapshot.CodeFileTooLarge,
			Message: fmt.Sprintf("the upload has %d bytes, over the limit of %d", obj.Size, r.h.cfg.MaxUploadBytes)})
	}
	format, err := snapshot.ParseFormat(r.decision.Format)
	if err != nil {
		return nil, false, err
	}
	rd, err := snapshot.NewReader(obj.Body, format, r.deltaLimits())
	if err != nil {
		rejected, err := r.rejectOrFail(ctx, err)
		return nil, rejected, err
	}
	defer rd.Close()
	spill, err := newProblemSpill(r.h.cfg.SpillDir)
	if err != nil {
		return nil, false, err
	}
	defer spill.Close()
	rd.AllProblems = spill // every problem, for the problems file (DESIGN 13), as a full snapshot's
	seen := map[string]int{}
	// The problems of rows the reader takes (duplicate ids, odd _delete
	// values), in line order: the first MaxListedProblems kept (I12),
	// every one counted.
	var rowProblems []snapshot.Problem
	var rowProblemCount int
	rowProblem := func(p snapshot.Problem) {
		if rowProblemCount++; len(rowProblems) < snapshot.MaxListedProblems {
			rowProblems = append(rowProblems, p)
		}
	}
	ops = []snapshot.DeltaOp{}
	for {
		row, err := rd.Next()
		if err == io.EOF {
			break
		}
		var se *snapshot.Error
		if errors.As(err, &se) {
			cut := rowProblemCount > len(rowProblems)
			se = snapshot.Merge(se, rowProblems...)
			se.More = se.More || cut
			r.problems = readerProblems(spill, rowProblems, rd.ProblemsCut() || cut)
			return nil, true, r.reject(ctx, se)
		}
		if err != nil {
			return nil, false, fmt.Errorf("read delta: %w", err)
		}
		if first, ok := seen[row.ProductID]; ok {
			rowProblem(snapshot.DuplicateProblem(row.ProductID, first, row.Line))
			continue
		}
		seen[row.ProductID] = row.Line
		if se := snapshot.DeleteProblem(row, rd.Format()); se != nil {
			rowProblem(se.List()[0])
			continue
		}
		op, err := snapshot.ParseDelta(row, rd.Format())
		if err != nil {
			return nil, false, err
		}
		ops = append(ops, op)
		if len(ops)&0xFFF == 0 && ctx.Err() != nil {
			return nil, false, fmt.Errorf("read delta: %w", ctx.Err())
		}
	}
	if len(rowProblems) > 0 {
		cut := rowProblemCount > len(rowProblems)
		r.problems = readerProblems(nil, rowProblems, cut)
		return nil, true, r.reject(ctx, snapshot.Reject(rowProblems, cut))
	}
	// Read without a problem: an empty problems file, as a full snapshot's
	// (DESIGN 13: the route answers 200 for every generation whose file
	// was read), before any state says that the delta was read.
	if err := r.writeProblems(ctx, noProblems); err != nil {
		return nil, false, err
	}
	r.names = slices.DeleteFunc(rd.AttributeNames(), func(n string) bool { return n == snapshot.DeleteAttribute })
	// The generation's attribute names: the baseline's and the delta's.
	r.names = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(r.decision.BaselineNames), r.names...))))
	return ops, false, nil
}

// deltaLimits are the reader's limits for a delta (those of a full
// snapshot, _delete accepted).
// deltaLimits are the reader's limits for a delta: a full snapshot's, and
// at most Config.MaxDeltaRows rows and MaxDeltaBytes decompressed (it is
// held in memory whole).
func (r *run) deltaLimits() snapshot.Limits {
	l := snapshot.Limits{MaxRowBytes: r.h.cfg.MaxRowBytes, MaxFileBytes: r.h.cfg.MaxInflatedBytes,
		MaxProducts: r.h.cfg.MaxProducts, Delta: true}.WithDefaults()
	if l.MaxFileBytes > r.h.cfg.MaxDeltaBytes {
		l.MaxFileBytes = r.h.cfg.MaxDeltaBytes
	}
	if l.MaxProducts > r.h.cfg.MaxDeltaRows {
		l.MaxProducts = r.h.cfg.MaxDeltaRows
	}
	return l
}

// deltaChanges merges ops into the current values of their products (read
// from the shard in batches): the changes, sorted by product_id, and how
// many named products the delta does not change; a *snapshot.Error listing
// every row whose merge passes the attribute limit (I11), in line order.
func (r *run) deltaChanges(ctx context.Context, ops []snapshot.DeltaOp) ([]deltaChange, int64, error) {
	var changes []deltaChange
	var unchanged int64
	maxAttrs := snapshot.Limits{}.WithDefaults().MaxAttributesBytes
	var base catalog.AttributeCounts // nil: unknown (no baseline, or one read before counts were kept)
	if r.decision.Baseline > 0 {
		var err error
		if base, err = r.store.AttributeCounts(ctx, r.job.RetailerID, r.decision.Baseline); err != nil {
			return nil, 0, err
		}
	}
	drift := newDeltaDrift(base)
	var problems []snapshot.Problem // rows merged past the attribute limit
	tooLarge := 0
	// The live values are kept when the delta may end with a plan to show
	// before it applies: a dry run, or one that may be held (diffDelta's
	// condition for deciding its holds).
	keepBefore := r.decision.DryRun || (!r.decision.Confirmed && r.decision.BaselineProducts > 0)
	defer func() { r.deltaDrop, r.counts = &drift.drop, drift.counts }()
	for start := 0; start < len(ops); start += currentBatch {
		batch := ops[start:min(start+currentBatch, len(ops))]
		ids := make([]string, len(batch))
		for i, op := range batch {
			ids[i] = op.ProductID
		}
		stored, err := r.h.store.CurrentProducts(ctx, r.job.RetailerID, ids)
		if err != nil {
			return nil, 0, err
		}
		current := make(map[string]catalog.StoredProduct, len(stored))
		for _, p := range stored {
			current[p.ProductID] = p
		}
		for _, op := range batch {
			p, exists := current[op.ProductID]
			var before []byte
			if exists {
				if before, err = snapshot.Canonicalize(p.Attributes); err != nil {
					return nil, 0, fmt.Errorf("product %q: stored attributes: %w", op.ProductID, err)
				}
			}
			after, live, err := op.Apply(before, maxAttrs)
			var se *snapshot.Error
			if errors.As(err, &se) {
				// Every row merged past the limit is listed (section 4:
				// corrected in one round), the first MaxListedProblems kept.
				if tooLarge++; len(problems) < snapshot.MaxListedProblems {
					problems = append(problems, se.List()...)
				}
				continue
			}
			if err != nil {
				return nil, 0, err
			}
			var from []byte // what a dry run's or a held delta's plan shows as "from"
			if keepBefore {
				from = before
			}
			if err := drift.add(op, before, after, live, exists); err != nil {
				return nil, 0, fmt.Errorf("product %q: %w", op.ProductID, err)
			}
			switch {
			case !live && !exists:
				unchanged++ // deleting a product not in the catalog
			case !live:
				changes = append(changes, deltaChange{id: op.ProductID, delete: true, before: from})
			case exists && bytes.Equal(before, after):
				unchanged++
			default:
				changes = append(changes, deltaChange{id: op.ProductID, attrs: after, hash: catalog.HashAttributes(after), insert: !exists, before: from})
			}
		}
	}
	if len(problems) > 0 {
		// The problems file has every one kept (up to MaxListedProblems);
		// the status the first MaxProblems.
		r.problems = readerProblems(nil, problems, tooLarge > len(problems))
		return nil, 0, snapshot.Reject(problems, tooLarge > len(problems))
	}
	slices.SortFunc(changes, func(a, b deltaChange) int { return strings.Compare(a.id, b.id) })
	return changes, unchanged, nil
}

// sendDelta writes the delta's index (the baseline's, its changes merged
// in), records its counts and chunks and sends them: upserts, then deletes.
func (r *run) sendDelta(ctx context.Context, takeover catalog.DiffDecision, plan catalog.Plan, changes []deltaChange) error {
	merged := time.Now()
	if err := r.writeDeltaIndex(ctx, takeover.Baseline, changes); err != nil {
		return err
	}
	indexed := time.Now()
	var upserts []deltaChange
	var lines []int32
	sizes := catalog.NewRowSizes(r.h.limits())
	for _, c := range changes {
		if c.delete {
			plan.Deletes = append(plan.Deletes, c.id)
			continue
		}
		upserts = append(upserts, c)
		line := int32(len(upserts))
		lines = append(lines, line)
		sizes.Add(line, message.UpsertLineLen([]byte(c.id), len(c.attrs)))
	}
	chunkPlan := catalog.PlanChunks(r.h.limits(), lines, sizes, plan.Deletes, message.DeleteLineLen)
	counts := r.countsOf(plan)
	if len(chunkPlan) == 0 {
		var err error
		if counts.EmptyPlan, err = r.emptyAppliedPlan(ctx, takeover); err != nil {
			return err
		}
	}
	if started, err := r.startApplying(ctx, takeover, plan, counts, len(chunkPlan)); err != nil || !started {
		return err
	}
	r.log.InfoContext(ctx, "delta planned", "baseline", takeover.Baseline, "inserted", plan.Inserted, "updated", plan.Updated,
		"deleted", plan.Deleted, "unchanged", plan.Unchanged, "chunks", len(chunkPlan),
		"elapsed_ms", time.Since(r.started).Milliseconds(), "read_ms", r.read.Sub(r.started).Milliseconds(),
		"merge_ms", merged.Sub(r.read).Milliseconds(), "index_ms", indexed.Sub(merged).Milliseconds())
	if len(chunkPlan) == 0 {
		r.appliedWithoutChunks(ctx)
		return nil
	}
	queueURL := r.h.cfg.SmallQueueURL
	if plan.Ops() >= r.h.cfg.LargeThreshold {
		queueURL = r.h.cfg.LargeQueueURL
	}
	c := r.newChunker(ctx, queueURL, chunkPlan, r.newAppliedPlan(plan.Ops(), takeover.Baseline, len(takeover.Stopped) > 0), nil)
	defer c.wait()
	for _, u := range upserts {
		if err := c.upsert([]byte(u.id), u.hash, u.attrs); err != nil || c.halted() {
			c.wait()
			if err == nil {
				err = c.err
			}
			return err
		}
	}
	for _, id := range plan.Deletes {
		if err := c.delete(id); err != nil || c.halted() {
			c.wait()
			if err == nil {
				err = c.err
			}
			return err
		}
	}
	sent, stopped, err := c.finish()
	if err != nil || stopped {
		return err
	}
	if sent != c.total {
		return fmt.Errorf("sent %d chunks, planned %d", sent, c.total)
	}
	return nil
}

// writeDeltaIndex writes the delta generation's index: the baseline's
// entries with the changes merged in (I5 holds across mixed histories:
// the next diff reads it as any generation's index). It appears before any
// chunk is sent.
func (r *run) writeDeltaIndex(ctx context.Context, baseline int64, changes []deltaChange) error {
	w, err := r.h.blobs.Create(ctx, keys.Index(r.job.RetailerID, r.job.Generation))
	if err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if err := r.mergeIndex(ctx, w, baseline, changes); err != nil {
		if aerr := w.Abort(); aerr != nil {
			r.log.WarnContext(ctx, "abort the index upload", "err", aerr)
		}
		return err
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	return nil
}

func (r *run) mergeIndex(ctx context.Context, w io.Writer, baseline int64, changes []deltaChange) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	iw := catalog.NewIndexWriter(bw)
	next := func() (catalog.Ref, error) { return catalog.Ref{}, io.EOF }
	if baseline > 0 {
		obj, err := r.h.blobs.Open(ctx, keys.Index(r.job.RetailerID, baseline), "")
		if err != nil {
			return fmt.Errorf("open index of generation %d: %w", baseline, err)
		}
		defer obj.Body.Close()
		ir := catalog.NewIndexReader(bufio.NewReaderSize(obj.Body, 1<<20))
		next = ir.NextRef
	}
	ref, err := next()
	i := 0
	for {
		if err != nil && err != io.EOF {
			return fmt.Errorf("read index of generation %d: %w", baseline, err)
		}
		baseDone := err == io.EOF
		if baseDone && i == len(changes) {
			break
		}
		cmp := 1 // take the change
		if !baseDone {
			cmp = -1
			if i < len(changes) {
				cmp = strings.Compare(string(ref.ID), changes[i].id)
			}
		}
		switch {
		case cmp < 0: // a product the delta leaves as it is
			if err := iw.AddRef(ref.ID, ref.Hash); err != nil {
				return err
			}
			ref, err = next()
			continue
		case cmp == 0:
			ref, err = next()
		}
		if c := changes[i]; !c.delete {
			if aerr := iw.AddRef([]byte(c.id), c.hash); aerr != nil {
				return aerr
			}
		}
		i++
	}
	if err := iw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// materialize writes the catalog of links, with ops (a delta being diffed,
// nil for none) laid over it, as a JSON Lines file in the spill directory,
// and makes the run read it in place of its upload (r.local).
func (r *run) materialize(ctx context.Context, links []catalog.ChainLink, ops []snapshot.DeltaOp) error {
	composed := map[string]snapshot.DeltaOp{}
	lay := func(op snapshot.DeltaOp) {
		if prev, ok := composed[op.ProductID]; ok {
			op = snapshot.ComposeDelta(prev, op)
		}
		composed[op.ProductID] = op
	}
	var base *catalog.ChainLink
	for i, l := range links {
		if l.Mode != catalog.ModeDelta {
			if i == 0 {
				base = &links[i]
			}
			continue
		}
		if err := r.readChainDelta(ctx, l, lay); err != nil {
			return err
		}
	}
	for _, op := range ops {
		lay(op)
	}
	f, err := os.CreateTemp(r.h.cfg.SpillDir, "catalog-materialized-*.jsonl")
	if err != nil {
		return fmt.Errorf("materialize the catalog: %w", err)
	}
	r.local = f.Name()
	bw := bufio.NewWriterSize(f, 1<<20)
	maxAttrs := snapshot.Limits{}.WithDefaults().MaxAttributesBytes
	var line []byte
	if base != nil && base.ObjectKey != "" {
		err := r.readChainLink(ctx, *base, snapshot.Limits{MaxRowBytes: r.h.cfg.MaxRowBytes, MaxFileBytes: r.h.cfg.MaxInflatedBytes,
			MaxProducts: r.h.cfg.MaxProducts}, func(row snapshot.Row, _ snapshot.Format) error {
			attrs := row.Attributes
			if op, ok := composed[row.ProductID]; ok {
				delete(composed, row.ProductID)
				after, live, err := op.Apply(attrs, maxAttrs)
				if err != nil || !live {
					return err
				}
				attrs = after
			}
			line = snapshot.AppendJSONLine(line[:0], row.ProductID, attrs)
			_, err := bw.Write(line)
			return err
		})
		if err != nil {
			f.Close()
			return err
		}
	}
	rest := make([]string, 0, len(composed))
	for id := range composed {
		rest = append(rest, id)
	}
	slices.Sort(rest)
	for _, id := range rest {
		after, live, err := composed[id].Apply(nil, maxAttrs)
		if err != nil {
			f.Close()
			return err
		}
		if live {
			line = snapshot.AppendJSONLine(line[:0], id, after)
			if _, err := bw.Write(line); err != nil {
				f.Close()
				return err
			}
		}
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("materialize the catalog: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("materialize the catalog: %w", err)
	}
	r.decision.Format, r.decision.ETag = string(snapshot.FormatJSONL), ""
	r.log.InfoContext(ctx, "catalog materialized", "links", len(links), "delta_rows", len(ops))
	return nil
}

// readChainDelta lays every row of a delta of the chain.
func (r *run) readChainDelta(ctx context.Context, l catalog.ChainLink, lay func(snapshot.DeltaOp)) error {
	return r.readChainLink(ctx, l, r.deltaLimits(), func(row snapshot.Row, format snapshot.Format) error {
		op, err := snapshot.ParseDelta(row, format)
		if err == nil {
			lay(op)
		}
		return err
	})
}

// readChainLink reads every row of one object of a chain, at its pinned
// version; an object gone is *uploadGone (the generation is rejected).
func (r *run) readChainLink(ctx context.Context, l catalog.ChainLink, limits snapshot.Limits, fn func(snapshot.Row, snapshot.Format) error) error {
	obj, err := r.h.blobs.Open(ctx, l.ObjectKey, l.ETag)
	if errors.Is(err, blob.ErrChanged) || errors.Is(err, blob.ErrNotFound) {
		return &uploadGone{fmt.Errorf("generation %d's upload, part of the catalog read: %w", l.Generation, err)}
	}
	if err != nil {
		return fmt.Errorf("open generation %d's upload: %w", l.Generation, err)
	}
	defer obj.Body.Close()
	format, err := snapshot.ParseFormat(l.Format)
	if err != nil {
		return err
	}
	rd, err := snapshot.NewReader(obj.Body, format, limits)
	if err != nil {
		return fmt.Errorf("read generation %d's upload: %w", l.Generation, err)
	}
	defer rd.Close()
	rd.Workers = r.h.cfg.Workers
	for {
		row, err := rd.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read generation %d's upload: %w", l.Generation, err)
		}
		if err := fn(row, rd.Format()); err != nil {
			return err
		}
	}
}

// openLocal opens the materialized catalog the run reads instead of its upload.
func (r *run) openLocal() (blob.Object, error) {
	f, err := os.Open(r.local)
	if err != nil {
		return blob.Object{}, fmt.Errorf("open the materialized catalog: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return blob.Object{}, err
	}
	return blob.Object{Body: f, Size: st.Size()}, nil
}

// removeLocal removes the materialized catalog, if any, and the applied
// plan's sorted runs.
func (r *run) removeLocal() {
	r.applied.close()
	if r.local != "" {
		os.Remove(r.local)
		r.local = ""
	}
}
