package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// Verdicts of why (DESIGN 9): the first check that explains the complaint.
const (
	VerdictCurrent        = "current"         // the catalog shows the newest upload
	VerdictNoUploads      = "no_uploads"      // nothing was ever reserved
	VerdictAwaitingUpload = "awaiting_upload" // the newest slot has no file yet
	VerdictExpired        = "expired"         // the newest slot expired without a file
	VerdictRejected       = "rejected"        // the newest file was rejected
	VerdictHeld           = "held"            // the newest file waits for a confirmation
	VerdictInProgress     = "in_progress"     // the newest file is being diffed or applied
	VerdictStuck          = "stuck"           // no progress for StallAfter, or work in a dead-letter queue (or the catalog diverged)
	VerdictSuperseded     = "superseded"      // the file that came was superseded by a newer reservation
	VerdictNotInSnapshot  = "not_in_snapshot" // the product is not in the newest applied snapshot
	VerdictReplicaLag     = "replica_lag"     // the writer is right, the storefront's replica is behind
)

// Checks of why, in the order they run.
const (
	CheckRetailer    = "retailer_exists"
	CheckGeneration  = "newest_generation"
	CheckFileArrived = "file_arrived"
	CheckState       = "state"
	CheckChunks      = "chunks"
	CheckProduct     = "product"
	CheckReplicaLag  = "replica_lag"
)

// WhyStep is one check: what it looked at and what it found.
type WhyStep struct {
	Check  string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Why is the answer of GET /v1/admin/retailers/{retailer_id}/why.
type Why struct {
	Verdict string    `json:"verdict"`
	Steps   []WhyStep `json:"steps"`
}

func (h *Handler) why(w http.ResponseWriter, r *http.Request) {
	if err := h.authAdmin(r); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	id := r.PathValue("retailer_id")
	if err := catalog.ValidateRetailerID(id); err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	productID := r.URL.Query().Get("product_id")
	if r.URL.Query().Has("product_id") && !snapshot.ValidProductID(productID) {
		httpapi.WriteError(w, r, h.log, catalog.Errorf(catalog.ErrInvalid, "invalid_product_id",
			"product_id must be 1-%d bytes of UTF-8 without control characters", snapshot.MaxProductIDBytes))
		return
	}
	answer, err := h.Why(r.Context(), id, productID)
	if err != nil {
		httpapi.WriteError(w, r, h.log, err)
		return
	}
	h.log.InfoContext(r.Context(), "why", "retailer_id", id, "product_id", productID, "verdict", answer.Verdict)
	httpapi.WriteJSON(w, http.StatusOK, answer)
}

// whyRun is one answer in the making.
type whyRun struct {
	h        *Handler
	ctx      context.Context
	now      time.Time
	retailer string
	verdict  string
	steps    []WhyStep
	dead     []deadLetter // the dead letters of every queue, read once
	deadRead bool
}

func (w *whyRun) ok(check, format string, args ...any) {
	w.steps = append(w.steps, WhyStep{Check: check, OK: true, Detail: fmt.Sprintf(format, args...)})
}

// fail records a check that explains the complaint; the first one decides the verdict.
func (w *whyRun) fail(check, verdict, format string, args ...any) {
	w.steps = append(w.steps, WhyStep{Check: check, OK: false, Detail: fmt.Sprintf(format, args...)})
	w.decide(verdict)
}

func (w *whyRun) decide(verdict string) {
	if w.verdict == "" {
		w.verdict = verdict
	}
}

func (w *whyRun) since(t time.Time) string { return ago(w.now.Sub(t)) }

// Why runs the checks an on-call engineer makes for "I uploaded and my
// products still show the old values", in that order: the retailer; its
// newest reserved generation; whether its file arrived; its state and age;
// its chunks applied, in flight and in a dead-letter queue; with a product,
// its row against the newest applied snapshot; the replicas. The verdict
// is the first check that explains the complaint (current when none does).
// catalog.ErrNotFound for an unknown retailer.
func (h *Handler) Why(ctx context.Context, retailerID, productID string) (Why, error) {
	w := &whyRun{h: h, ctx: ctx, now: h.cfg.Now(), retailer: retailerID}
	r, err := h.store.Retailer(ctx, retailerID)
	if err != nil {
		return Why{}, err
	}
	w.ok(CheckRetailer, "retailer %s is registered (shard %d, since %s)", r.ID, r.Shard, r.CreatedAt.UTC().Format(time.DateOnly))
	gens, err := h.store.Generations(ctx, retailerID, 20)
	if err != nil {
		return Why{}, err
	}
	// A dry run changes nothing the storefront shows (DESIGN 13): the
	// answer is about the real uploads.
	gens = slices.DeleteFunc(gens, func(g catalog.GenerationStatus) bool { return g.DryRun })
	fence, err := h.store.Fence(ctx, retailerID)
	if err != nil {
		return Why{}, err
	}
	if len(gens) == 0 {
		w.fail(CheckGeneration, VerdictNoUploads, "no generation was ever reserved: the retailer has uploaded nothing "+
			"(an upload starts with POST /v1/retailers/%s/snapshots, or `catalogctl upload --retailer %s FILE`)", retailerID, retailerID)
		return w.answer(), nil
	}
	g := gens[0]
	w.ok(CheckGeneration, "newest reserved generation %d, reserved %s ago", g.Generation, w.since(g.CreatedAt))
	if err := w.checkArrival(g, gens); err != nil {
		return Why{}, err
	}
	if err := w.checkState(g, gens); err != nil {
		return Why{}, err
	}
	if err := w.noteParked(); err != nil {
		return Why{}, err
	}
	var row *catalog.CatalogRow
	if productID != "" {
		if row, err = w.checkProduct(productID, fence); err != nil {
			return Why{}, err
		}
	}
	if err := w.checkReplicas(productID, row); err != nil {
		return Why{}, err
	}
	return w.answer(), nil
}

// noteParked adds to the state step, when some of the retailer's change
// events are parked (they cannot be published: downstream systems miss
// them), how many and where to look. The catalog is not in question: the
// verdict stays.
func (w *whyRun) noteParked() error {
	_, n, err := w.h.store.ParkedOutbox(w.ctx, w.retailer, 0)
	if err != nil || n == 0 {
		return err
	}
	at := len(w.steps) - 1
	for i, s := range w.steps {
		if s.Check == CheckState {
			at = i
		}
	}
	w.steps[at].Detail += fmt.Sprintf("; %d of the retailer's change events are parked in its outbox, not published "+
		"(its webhook and analytics miss them): `catalogctl dlq list outbox --retailer %s`", n, w.retailer)
	return nil
}

func (w *whyRun) answer() Why {
	w.decide(VerdictCurrent)
	return Why{Verdict: w.verdict, Steps: w.steps}
}

// deadLetters are the dead letters of one upload (the queues are read once per answer).
func (w *whyRun) deadLetters(gen int64) ([]deadLetter, error) {
	if !w.deadRead {
		all, err := w.h.readDeadLetters(w.ctx)
		if err != nil {
			return nil, err
		}
		w.dead, w.deadRead = all, true
	}
	return deadLettersOf(w.dead, w.retailer, gen), nil
}

// checkArrival: did the newest generation's file arrive?
func (w *whyRun) checkArrival(g catalog.GenerationStatus, gens []catalog.GenerationStatus) error {
	newestArrived := ""
	for _, o := range gens[1:] {
		if o.ReceivedAt != nil {
			newestArrived = fmt.Sprintf(" (the newest upload that arrived is generation %d, %s %s ago)", o.Generation, o.State, w.since(settledAt(o)))
			break
		}
	}
	if g.ReceivedAt != nil {
		w.ok(CheckFileArrived, "file arrived %s ago (%s)", w.since(*g.ReceivedAt), g.ReceivedAt.UTC().Format(time.RFC3339))
		return nil
	}
	if g.State != catalog.StateAwaitingUpload && g.State != catalog.StateExpired {
		w.ok(CheckFileArrived, "no arrival time recorded; the generation is %s", g.State)
		return nil
	}
	key := keys.Upload(w.retailer, g.Generation)
	size, err := w.h.blobs.Size(w.ctx, key)
	switch {
	case err == nil && g.State == catalog.StateExpired:
		w.fail(CheckFileArrived, VerdictExpired, "a file of %d bytes is in S3, but it came after the upload URL expired%s: "+
			"reserve a new generation and upload again", size, errorNote(g))
	case err == nil:
		dead, derr := w.deadLetters(g.Generation)
		if derr != nil {
			return derr
		}
		for _, d := range dead {
			w.fail(CheckFileArrived, VerdictStuck, "a file of %d bytes is in S3, but its S3 event has been in %s since %s ago "+
				"(received %d times): its arrival was never recorded; the sweeper re-drives it, or redrive %s",
				size, d.Queue, w.since(d.SentAt), d.Receives, d.Queue)
			return nil
		}
		waited := w.now.Sub(g.CreatedAt)
		if waited > w.h.cfg.StallAfter {
			w.fail(CheckFileArrived, VerdictStuck, "a file of %d bytes is in S3, but its arrival was never recorded although the "+
				"generation was reserved %s ago: the S3 event was lost or waits in the arrivals queue", size, ago(waited))
			return nil
		}
		w.ok(CheckFileArrived, "a file of %d bytes is in S3; its arrival is being recorded", size)
		w.decide(VerdictInProgress)
	case errors.Is(err, blob.ErrNotFound):
		if old, ok, err := w.uploadToOlderSlot(gens); err != nil {
			return err
		} else if ok {
			w.fail(CheckFileArrived, VerdictSuperseded, "no file for generation %d; a file was uploaded to generation %d's URL, "+
				"but reserving %d had superseded that slot, so it is not applied: upload to generation %d's URL "+
				"(`catalogctl upload` reserves and uploads in one go)", g.Generation, old.Generation, g.Generation, g.Generation)
			return nil
		}
		if g.State == catalog.StateExpired {
			w.fail(CheckFileArrived, VerdictExpired, "no file arrived; the upload URL expired %s ago (%s)%s: reserve a new "+
				"generation and upload again", w.since(g.UploadExpires), g.UploadExpires.UTC().Format(time.RFC3339), newestArrived)
			return nil
		}
		w.fail(CheckFileArrived, VerdictAwaitingUpload, "no file yet; the upload URL is valid for %s more (until %s): PUT the file "+
			"to it with the headers the reservation returned%s", ago(g.UploadExpires.Sub(w.now)),
			g.UploadExpires.UTC().Format(time.RFC3339), newestArrived)
	default:
		return fmt.Errorf("look for the upload of generation %d: %w", g.Generation, err)
	}
	return nil
}

// uploadToOlderSlot finds an older generation that a newer reservation
// superseded while its slot was unused, and that has a file all the same:
// the retailer uploaded to an old URL.
func (w *whyRun) uploadToOlderSlot(gens []catalog.GenerationStatus) (catalog.GenerationStatus, bool, error) {
	looked := 0
	for _, o := range gens[1:] {
		if looked == 5 {
			break
		}
		if o.State != catalog.StateSuperseded || o.ReceivedAt != nil {
			continue
		}
		looked++
		_, err := w.h.blobs.Size(w.ctx, keys.Upload(w.retailer, o.Generation))
		if err == nil {
			return o, true, nil
		}
		if !errors.Is(err, blob.ErrNotFound) {
			return o, false, err
		}
	}
	return catalog.GenerationStatus{}, false, nil
}

func errorNote(g catalog.GenerationStatus) string {
	if g.ErrorCode == "" {
		return ""
	}
	if g.ErrorLine > 0 {
		return fmt.Sprintf(" (%s at line %d: %s)", g.ErrorCode, g.ErrorLine, g.ErrorMessage)
	}
	return fmt.Sprintf(" (%s: %s)", g.ErrorCode, g.ErrorMessage)
}

// checkState: the newest generation's state and age, and for work not
// finished, its chunks.
func (w *whyRun) checkState(g catalog.GenerationStatus, gens []catalog.GenerationStatus) error {
	p, err := w.h.store.Progress(w.ctx, w.retailer, g.Generation)
	if err != nil {
		return err
	}
	since := w.since(p.StateChangedAt)
	switch g.State {
	case catalog.StateAwaitingUpload, catalog.StateExpired:
		return nil // the arrival check said it all
	case catalog.StateRejected:
		if slices.Contains(catalog.FailureCodes, g.ErrorCode) {
			// Not the file's fault: the pipeline could not finish it (I10).
			w.fail(CheckState, VerdictRejected, "rejected %s ago%s: the pipeline could not finish it and put the catalog back "+
				"as it was; upload it again, and if it fails the same way an operator must look (alarm GenerationsFailed, docs/RUNBOOK.md)",
				since, errorNote(g))
			return nil
		}
		w.fail(CheckState, VerdictRejected, "rejected %s ago%s: fix the file and upload it again", since, errorNote(g))
		return nil
	case catalog.StateSuperseded:
		by := "a newer generation"
		if g.SupersededBy != nil {
			by = fmt.Sprintf("generation %d", *g.SupersededBy)
		}
		w.fail(CheckState, VerdictSuperseded, "superseded by %s %s ago", by, since)
		return nil
	case catalog.StateHeld:
		if !g.Confirmed {
			w.fail(CheckState, VerdictHeld, "held %s ago%s: nothing of it is applied until it is confirmed "+
				"(`catalogctl confirm %s %d`), or upload a corrected file", since, errorNote(g), w.retailer, g.Generation)
			return nil
		}
		w.ok(CheckState, "held, confirmed; waiting for its diff to run again (%s since the hold)", since)
	case catalog.StateApplied:
		w.ok(CheckState, "applied %s ago: %d inserted, %d updated, %d deleted, %d unchanged; %s", since,
			g.Inserted, g.Updated, g.Deleted, g.Unchanged, plural(int(g.Products), "product", "products"))
		w.ok(CheckChunks, "all %s applied", plural(g.ChunksTotal, "chunk", "chunks"))
		return nil
	case catalog.StateReceived:
		w.ok(CheckState, "received %s ago, waiting for its diff (a retailer's diffs run one at a time, in arrival order)", since)
	case catalog.StateDiffing:
		w.ok(CheckState, "diffing for %s", since)
	case catalog.StateApplying:
		w.ok(CheckState, "applying for %s (diff finished %s ago: %d inserted, %d updated, %d deleted)", since, since,
			g.Inserted, g.Updated, g.Deleted)
	default:
		w.ok(CheckState, "%s for %s", g.State, since)
	}
	return w.checkUnfinished(g, p)
}

// checkUnfinished: work not finished is in progress, or stuck when it has
// not moved for StallAfter or some of it sits in a dead-letter queue.
func (w *whyRun) checkUnfinished(g catalog.GenerationStatus, p catalog.Progress) error {
	dead, err := w.deadLetters(g.Generation)
	if err != nil {
		return err
	}
	var parts []string
	inDLQ := map[string][]deadLetter{}
	for _, d := range dead {
		if d.Kind == chunkMessages && p.Applied(d.Seq) {
			continue // applied since (a redrive): nothing is missing
		}
		inDLQ[d.Queue] = append(inDLQ[d.Queue], d)
	}
	deadChunks := 0
	for _, q := range slices.Sorted(maps.Keys(inDLQ)) {
		ds := inDLQ[q]
		oldest := ds[0].SentAt
		for _, d := range ds {
			if d.SentAt.Before(oldest) {
				oldest = d.SentAt
			}
		}
		what := plural(len(ds), "chunk", "chunks")
		if ds[0].Kind == s3Events {
			what = "its diff job"
			if len(ds) > 1 {
				what = fmt.Sprintf("its diff job (%d copies)", len(ds))
			}
		} else {
			deadChunks += len(ds)
		}
		parts = append(parts, fmt.Sprintf("%s in %s since %s ago", what, q, w.since(oldest)))
	}
	if g.State == catalog.StateApplying {
		applied := len(p.AppliedSeqs)
		inFlight := max(g.ChunksTotal-applied-deadChunks, 0)
		parts = append([]string{fmt.Sprintf("%d of %d chunks applied, %d in flight", applied, g.ChunksTotal, inFlight)}, parts...)
	}
	last := p.LastMoved()
	idle := w.now.Sub(last)
	parts = append(parts, fmt.Sprintf("last progress %s ago", ago(idle)))
	if p.Redrives > 0 && p.LastRedriveAt != nil {
		parts = append(parts, fmt.Sprintf("re-driven %s by the sweeper, last %s ago",
			plural(p.Redrives, "time", "times"), w.since(*p.LastRedriveAt)))
	}
	detail := strings.Join(parts, "; ")
	sweeper := "the sweeper re-drives it"
	if p.Redrives >= w.h.cfg.MaxRedrives {
		// Only an offboarding stays (the sweeper rejects and undoes the rest).
		sweeper = "the sweeper gave up after its re-drives: an operator must look (alarm GenerationsStuck)"
	}
	switch {
	case len(inDLQ) > 0:
		w.fail(CheckChunks, VerdictStuck, "%s: inspect the dead-letter queue, then redrive it (safe: every step is idempotent); %s",
			detail, sweeper)
	case idle > w.h.cfg.StallAfter:
		w.fail(CheckChunks, VerdictStuck, "%s, over the %s allowed: %s", detail, ago(w.h.cfg.StallAfter), sweeper)
	default:
		w.ok(CheckChunks, "%s", detail)
		w.decide(VerdictInProgress)
	}
	return nil
}

// settledAt is when an arrived generation last moved, as far as its
// status tells: applied, else arrived.
func settledAt(g catalog.GenerationStatus) time.Time {
	if g.AppliedAt != nil {
		return *g.AppliedAt
	}
	return *g.ReceivedAt
}

// checkProduct: the product's row on the writer against the newest applied
// snapshot (its index entry: the snapshot's content hash of the product).
func (w *whyRun) checkProduct(productID string, fence catalog.Fence) (*catalog.CatalogRow, error) {
	row, err := w.h.store.CatalogRow(w.ctx, w.retailer, productID)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return nil, err
	}
	var live *catalog.CatalogRow
	rowNote := "the catalog has never had it"
	if err == nil {
		if row.Deleted {
			rowNote = fmt.Sprintf("the catalog has it deleted (by generation %d, %s ago)", row.Generation, w.since(row.UpdatedAt))
		} else {
			live = &row
			rowNote = fmt.Sprintf("the catalog row (generation %d, updated %s ago) is %s", row.Generation, w.since(row.UpdatedAt),
				clip(string(row.Attributes), 300))
		}
	}
	if fence.Applied == 0 {
		w.fail(CheckProduct, VerdictNotInSnapshot, "no generation of %s was ever applied; %s", w.retailer, rowNote)
		return live, nil
	}
	want, inSnapshot, err := w.snapshotHash(fence.Applied, productID)
	if errors.Is(err, blob.ErrNotFound) {
		// The index is the snapshot's record: without it neither this
		// check, reconciliation, nor the next diff (its baseline) can run.
		w.fail(CheckProduct, VerdictStuck, "%s; generation %d's index (%s, the newest applied snapshot's record) is missing, so "+
			"its value cannot be compared, and every diff of %s fails on it until the object is restored", rowNote, fence.Applied, keys.Index(w.retailer, fence.Applied), w.retailer)
		return live, nil
	}
	if err != nil {
		return nil, err
	}
	// A newer generation that took over may be writing: a row it wrote
	// (or a stopped generation before it, I5) is work in flux, not a divergence.
	inFlux := fence.Latest > fence.Applied && err == nil && row.Generation > fence.Applied
	pending := ""
	if fence.Latest > fence.Applied {
		if pending, err = w.pendingChange(fence.Latest, productID, want, inSnapshot); err != nil {
			return nil, err
		}
	}
	switch {
	case !inSnapshot && live == nil:
		w.fail(CheckProduct, VerdictNotInSnapshot, "%q is not in generation %d's snapshot (the newest applied); %s%s",
			productID, fence.Applied, rowNote, pending)
	case inFlux:
		w.ok(CheckProduct, "%s (written by a generation newer than %d, the newest applied: work in progress)%s", rowNote, fence.Applied, pending)
	case !inSnapshot:
		w.fail(CheckProduct, VerdictStuck, "%q is not in generation %d's snapshot, but the catalog still has it (%s): the catalog "+
			"diverged from the snapshot; `catalogctl reconcile --retailer %s --repair` rewrites it", productID, fence.Applied, rowNote, w.retailer)
	case live != nil && rowHash(live.Attributes) == want:
		w.ok(CheckProduct, "%s, equal to generation %d's snapshot (the newest applied)%s", rowNote, fence.Applied, pending)
	default:
		w.fail(CheckProduct, VerdictStuck, "%s, which differs from generation %d's snapshot (the newest applied): the catalog "+
			"diverged from the snapshot; `catalogctl reconcile --retailer %s --repair` rewrites it", rowNote, fence.Applied, w.retailer)
	}
	return live, nil
}

// pendingChange says what the generation being applied does to the
// product, from its index (written before its chunks are sent).
func (w *whyRun) pendingChange(latest int64, productID string, applied catalog.Hash, inApplied bool) (string, error) {
	next, inNext, err := w.snapshotHash(latest, productID)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return fmt.Sprintf("; generation %d, being diffed, may change it", latest), nil
	case err != nil:
		return "", err
	case inNext && !inApplied:
		return fmt.Sprintf("; generation %d, being applied, inserts it", latest), nil
	case !inNext && inApplied:
		return fmt.Sprintf("; generation %d, being applied, deletes it", latest), nil
	case inNext && next != applied:
		return fmt.Sprintf("; generation %d, being applied, changes it", latest), nil
	case inNext:
		return fmt.Sprintf("; generation %d, being applied, leaves it as it is", latest), nil
	}
	return "", nil
}

// snapshotHash looks productID up in a generation's index (a sorted walk:
// the index is streamed, never held whole).
func (w *whyRun) snapshotHash(gen int64, productID string) (catalog.Hash, bool, error) {
	obj, err := w.h.blobs.Open(w.ctx, keys.Index(w.retailer, gen), "")
	if err != nil {
		return catalog.Hash{}, false, fmt.Errorf("open the index of generation %d: %w", gen, err)
	}
	defer closeQuietly(obj.Body)
	ir := catalog.NewIndexReader(obj.Body)
	id := []byte(productID)
	for {
		ref, err := ir.NextRef()
		if errors.Is(err, io.EOF) {
			return catalog.Hash{}, false, nil
		}
		if err != nil {
			return catalog.Hash{}, false, fmt.Errorf("read the index of generation %d: %w", gen, err)
		}
		switch c := bytes.Compare(ref.ID, id); {
		case c == 0:
			return ref.Hash, true, nil
		case c > 0:
			return catalog.Hash{}, false, nil
		}
	}
}

// rowHash is the content hash of a row's stored attributes, computed afresh
// (the stored hash is not trusted): the canonical form of the JSON the
// database returns, hashed as the diff hashes a snapshot row.
func rowHash(attributes []byte) catalog.Hash { return new(rowHasher).hash(attributes) }

// checkReplicas: does the storefront (its read replicas) show what the writer has?
func (w *whyRun) checkReplicas(productID string, live *catalog.CatalogRow) error {
	rep, ok := w.h.store.(ReplicaReporter)
	var health catalog.ReplicaHealth
	if ok {
		var err error
		if health, err = rep.ReplicaHealth(w.ctx, w.retailer); err != nil {
			return err
		}
	}
	if health.Replicas == 0 {
		w.ok(CheckReplicaLag, "no read replicas: the storefront reads the writer")
		return nil
	}
	state := fmt.Sprintf("%d replicas, %d lagging beyond %s (skipped until they catch up), %d down",
		health.Replicas, health.Lagging, ago(health.MaxLag), health.Down)
	if productID == "" {
		w.ok(CheckReplicaLag, "%s; give a product to compare what the storefront serves with the writer", state)
		return nil
	}
	served, err := w.h.store.Product(w.ctx, w.retailer, productID, false)
	switch {
	case errors.Is(err, catalog.ErrNotFound) && live == nil:
		w.ok(CheckReplicaLag, "the storefront does not show %q either (%s)", productID, state)
	case errors.Is(err, catalog.ErrNotFound):
		w.fail(CheckReplicaLag, VerdictReplicaLag, "the storefront does not show %q yet, the writer has generation %d of it: "+
			"a read replica lags (%s)", productID, live.Generation, state)
	case err != nil:
		return err
	case live == nil:
		w.fail(CheckReplicaLag, VerdictReplicaLag, "the storefront still shows %q (generation %d), the writer has it deleted: "+
			"a read replica lags (%s)", productID, served.Generation, state)
	case served.Generation < live.Generation:
		w.fail(CheckReplicaLag, VerdictReplicaLag, "the storefront serves generation %d of %q, the writer has generation %d: "+
			"a read replica lags (%s)", served.Generation, productID, live.Generation, state)
	default:
		w.ok(CheckReplicaLag, "the storefront serves the writer's generation %d of %q (%s)", served.Generation, productID, state)
	}
	return nil
}
