package ops

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/platform/metrics"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// Reconciliation (DESIGN 9): every retailer's catalog against its newest
// applied snapshot, through that generation's index (the snapshot's
// (product_id, content hash) in product_id order), in one streaming
// merge-walk: the catalog's live rows come in product_id order from one
// consistent snapshot of the shard, each row's stored attributes hashed
// afresh (the stored hash is never trusted), the index streamed beside
// them; nothing is held but the divergent ids. A run goes through the
// reconcile-jobs queue: one message lists the retailers of a run of every
// retailer, page by page, and one message per retailer checks it, so that a
// run of any size is many short invocations. The scheduled collection
// (gc.go) goes through the same queue and consumer, its messages told
// apart by their kind.

// reconcileJob is a reconcile-jobs message: reconciliation's (Kind "" or
// "reconcile") or collection's (Kind "gc", gc.go).
type reconcileJob struct {
	// Kind: "" (every message before collection was queued too) or
	// jobReconcile: reconciliation's; jobCollect: collection's.
	Kind   string `json:"kind,omitempty"`
	RunID  string `json:"run_id"`
	Repair bool   `json:"repair"`
	// RetailerID: check (collect) this retailer. Otherwise the message
	// lists the retailers after After (Listed of them were listed before
	// it).
	RetailerID string `json:"retailer_id,omitempty"`
	After      string `json:"after,omitempty"`
	Listed     int    `json:"listed,omitempty"`
	// MoveRecords (collection): collect the old shards' forwarding
	// records; the run's last listing page queues it, Listed its total.
	MoveRecords bool `json:"move_records,omitempty"`
}

// The kinds of reconcile-jobs message.
const (
	jobReconcile = "reconcile"
	jobCollect   = "gc"
)

// retryLater is a job's failure that is expected to pass (a retailer
// switching shards): the queue delivers it again, logged as a WARN.
type retryLater struct{ err error }

func (e retryLater) Error() string { return e.err.Error() }
func (e retryLater) Unwrap() error { return e.err }

const (
	// defaultListPage is how many retailers a listing message lists (Config.ListPage).
	defaultListPage = 500
	// repairBatch is how many rows one repair transaction (and its change event) takes.
	repairBatch = 1000
	// maxDivergent bounds the divergent ids one check keeps (for the
	// verification of different rows and the repair): past it, the catalog
	// is better reloaded from a new upload than repaired row by row.
	maxDivergent = 1_000_000
	// reportLimit is the most results a report lists.
	reportLimit = 1000
	// runRetention is how long runs and their results are kept.
	runRetention = 90 * 24 * time.Hour
)

// newRunID is a run's id: prefix ("rc-" a reconciliation's, "gc-" a
// scheduled collection's) and 16 hex digits.
func newRunID(prefix string) string {
	var b [8]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// validRunID reports whether s looks like a run id.
func validRunID(s string) bool {
	if len(s) != 19 || s[:3] != "rc-" {
		return false
	}
	_, err := hex.DecodeString(s[3:])
	return err == nil
}

// StartReconcile starts a run of one retailer (retailerID) or of every one
// ("") and returns its id: the run is recorded and its first message
// queued; the work happens as the reconcile-jobs queue is consumed.
// catalog.ErrNotFound for an unknown retailer.
func (h *Handler) StartReconcile(ctx context.Context, retailerID string, repair, scheduled bool) (string, error) {
	if h.cfg.Queues.Reconcile == "" {
		return "", errors.New("reconcile: no reconcile-jobs queue configured")
	}
	run := catalog.ReconcileRun{ID: newRunID("rc-"), RetailerID: retailerID, Repair: repair, Scheduled: scheduled}
	job := reconcileJob{RunID: run.ID, Repair: repair}
	if retailerID != "" {
		if _, err := h.store.Retailer(ctx, retailerID); err != nil {
			return "", err
		}
		run.Total, job.RetailerID = 1, retailerID
	}
	if err := h.store.CreateReconcileRun(ctx, run); err != nil {
		return "", err
	}
	if err := h.sendJob(ctx, job); err != nil {
		return "", err
	}
	h.log.InfoContext(ctx, "reconciliation started", "run_id", run.ID, "retailer_id", retailerID, "repair", repair, "scheduled", scheduled)
	return run.ID, nil
}

func (h *Handler) sendJob(ctx context.Context, job reconcileJob) error {
	body, err := json.Marshal(job)
	if err != nil {
		return err
	}
	if err := h.queue.Send(ctx, h.cfg.Queues.Reconcile, string(body), "", ""); err != nil {
		return fmt.Errorf("queue reconcile job: %w", err)
	}
	return nil
}

// ScheduledReconcile is the scheduled run (daily on AWS, --reconcile-every
// locally): every retailer, no repair; and runs older than 90 days go.
func (h *Handler) ScheduledReconcile(ctx context.Context) error {
	if n, err := h.store.PruneReconcileRuns(ctx, h.cfg.Now().Add(-runRetention)); err != nil {
		return err
	} else if n > 0 {
		h.log.InfoContext(ctx, "old reconciliation runs pruned", "runs", n)
	}
	_, err := h.StartReconcile(ctx, "", false, true)
	return err
}

// HandleSQS handles reconcile-jobs messages (reconciliation's and
// collection's); a message whose work failed is reported for retry alone.
// A retailer whose check fails on its third delivery gets the failure as
// its result (the run can finish) instead; a retailer whose collection
// fails on its third delivery is given up with an ERROR naming it.
func (h *Handler) HandleSQS(ctx context.Context, ev lambdaevents.SQSEvent) (lambdaevents.SQSEventResponse, error) {
	var resp lambdaevents.SQSEventResponse
	for _, msg := range ev.Records {
		var job reconcileJob
		err := json.Unmarshal([]byte(msg.Body), &job)
		if err == nil && job.RunID == "" {
			err = errors.New("no run_id")
		}
		if err == nil && job.Kind != "" && job.Kind != jobReconcile && job.Kind != jobCollect {
			err = fmt.Errorf("unknown kind %q", job.Kind)
		}
		if err != nil {
			h.log.ErrorContext(ctx, "not a reconcile job; dropped", "message_id", msg.MessageId, "err", err)
			continue
		}
		receives, _ := strconv.Atoi(msg.Attributes["ApproximateReceiveCount"])
		if job.Kind == jobCollect {
			err = h.handleCollectJob(ctx, job, receives)
		} else {
			err = h.handleJob(ctx, job, receives)
		}
		if later := (retryLater{}); errors.As(err, &later) {
			h.log.WarnContext(ctx, "job left for a later delivery", "message_id", msg.MessageId, "kind", job.Kind,
				"run_id", job.RunID, "retailer_id", job.RetailerID, "receives", receives, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
		} else if err != nil {
			h.log.ErrorContext(ctx, "reconcile job failed", "message_id", msg.MessageId, "kind", job.Kind, "run_id", job.RunID,
				"retailer_id", job.RetailerID, "receives", receives, "err", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, lambdaevents.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
		}
	}
	return resp, nil
}

func (h *Handler) handleJob(ctx context.Context, job reconcileJob, receives int) error {
	if job.RetailerID == "" {
		return h.listRetailers(ctx, job)
	}
	res, err := h.ReconcileRetailer(ctx, job.RunID, job.RetailerID, job.Repair)
	if err != nil {
		if receives < 3 {
			return err
		}
		res.Error = err.Error()
		h.Metrics.Emit(ctx, metrics.Fields{RetailerID: job.RetailerID}, metrics.Count(metrics.ReconcileFailures, 1))
	}
	return h.store.RecordReconcileResult(ctx, res)
}

// listRetailers queues a check of each retailer of one page, then the next
// page (or, at the end, records the run's total). Repeating a page is
// harmless: a retailer's result is recorded once per run.
func (h *Handler) listRetailers(ctx context.Context, job reconcileJob) error {
	ids, err := h.store.RetailerIDs(ctx, job.After, h.cfg.ListPage)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := h.sendJob(ctx, reconcileJob{RunID: job.RunID, Repair: job.Repair, RetailerID: id}); err != nil {
			return err
		}
	}
	listed := job.Listed + len(ids)
	if len(ids) == h.cfg.ListPage {
		return h.sendJob(ctx, reconcileJob{RunID: job.RunID, Repair: job.Repair, After: ids[len(ids)-1], Listed: listed})
	}
	if listed == 0 {
		// No retailer at all: the run is done at once.
		return h.store.SetReconcileTotal(ctx, job.RunID, 0)
	}
	return h.store.SetReconcileTotal(ctx, job.RunID, listed)
}

// divergent is a product the walk found divergent.
type divergent struct {
	id    string
	index catalog.Hash // the snapshot's hash (missing, different)
	row   catalog.Hash // the catalog row's, afresh (different)
}

// walk is the merge of the catalog's rows with the index, over one part
// of the product ids: [from, to).
type walk struct {
	hasher rowHasher
	idx    *catalog.IndexReader
	// The index entries of the batch being walked (read from S3 before the
	// batch's transaction: none stays open across a call to S3, I12), the
	// next to take, and the first entry of the next batch, read ahead.
	batch     []catalog.Ref
	batchSize int    // entries a batch holds at most (Config.ReconcileBatch)
	arena     []byte // the batch's ids
	pos       int
	ahead     catalog.Ref
	hasNext   bool
	cur       catalog.Ref
	ok        bool
	to        []byte // nil: no end
	res       catalog.ReconcileResult
	keepAll   bool // keep missing and extra ids too (a repair)
	missing   []divergent
	diff      []divergent
	extra     []string
	tooMany   bool
}

// read reads the index's next entry of the part (ok false at its end),
// its id valid until the next read.
func (w *walk) read() (catalog.Ref, bool, error) {
	if w.idx == nil {
		return catalog.Ref{}, false, nil
	}
	r, err := w.idx.NextRef()
	if errors.Is(err, io.EOF) {
		return catalog.Ref{}, false, nil
	}
	if err != nil {
		return catalog.Ref{}, false, fmt.Errorf("read the index: %w", err)
	}
	if w.to != nil && bytes.Compare(r.ID, w.to) >= 0 {
		return catalog.Ref{}, false, nil
	}
	return r, true, nil
}

// skipTo reads past the index entries before from (they belong to the
// parts before this one) and keeps the first one after.
func (w *walk) skipTo(from string) error {
	for {
		r, ok, err := w.read()
		if err != nil || !ok {
			return err
		}
		if string(r.ID) >= from {
			w.keepAhead(r)
			return nil
		}
	}
}

// keepAhead keeps r (an entry just read) as the first of the next batch.
func (w *walk) keepAhead(r catalog.Ref) {
	w.ahead = catalog.Ref{ID: append(w.ahead.ID[:0], r.ID...), Hash: r.Hash}
	w.hasNext = true
}

// fill reads the next batch of index entries (at most w.batchSize) and
// returns where the batch's range of ids ends: the id of the first entry
// after it, or "" when the batch is the part's last (its range goes to the
// part's end). With no entry left it returns more false.
func (w *walk) fill() (end string, more bool, err error) {
	w.batch, w.arena, w.pos = w.batch[:0], w.arena[:0], 0
	if !w.hasNext {
		return "", false, nil
	}
	add := func(r catalog.Ref) {
		w.arena = append(w.arena, r.ID...)
		w.batch = append(w.batch, catalog.Ref{ID: w.arena[len(w.arena)-len(r.ID):], Hash: r.Hash})
	}
	add(w.ahead)
	w.hasNext = false
	for len(w.batch) < w.batchSize {
		r, ok, err := w.read()
		if err != nil || !ok {
			return "", true, err
		}
		add(r)
	}
	r, ok, err := w.read()
	if err != nil || !ok {
		return "", true, err
	}
	w.keepAhead(r)
	return string(w.ahead.ID), true, nil
}

// next moves to the next index entry of the batch.
func (w *walk) next() error {
	if w.pos >= len(w.batch) {
		w.ok = false
		return nil
	}
	w.cur, w.ok = w.batch[w.pos], true
	w.pos++
	w.res.Products++
	return nil
}

func (w *walk) example(id []byte) {
	if len(w.res.Examples) < 10 {
		w.res.Examples = append(w.res.Examples, string(id))
	}
}

func (w *walk) keep(n int) bool {
	if n >= maxDivergent {
		w.tooMany = true
		return false
	}
	return true
}

func (w *walk) missingEntry() {
	w.res.Missing++
	w.example(w.cur.ID)
	if w.keepAll && w.keep(len(w.missing)) {
		w.missing = append(w.missing, divergent{id: string(w.cur.ID), index: w.cur.Hash})
	}
}

// row takes the next catalog row of the part (ids increase).
func (w *walk) row(id, attributes []byte) error {
	w.res.Rows++
	for w.ok && bytes.Compare(w.cur.ID, id) < 0 {
		w.missingEntry()
		if err := w.next(); err != nil {
			return err
		}
	}
	if w.ok && bytes.Equal(w.cur.ID, id) {
		if h := w.hasher.hash(attributes); h != w.cur.Hash {
			w.res.Different++
			w.example(id)
			if w.keep(len(w.diff)) {
				w.diff = append(w.diff, divergent{id: string(id), index: w.cur.Hash, row: h})
			}
		}
		return w.next()
	}
	w.res.Extra++
	w.example(id)
	if w.keepAll && w.keep(len(w.extra)) {
		w.extra = append(w.extra, string(id))
	}
	return nil
}

// finish counts the part's index entries past its last row as missing.
func (w *walk) finish() error {
	for w.ok {
		w.missingEntry()
		if err := w.next(); err != nil {
			return err
		}
	}
	return nil
}

// merge adds the findings of the part after this one.
func (w *walk) merge(o *walk) {
	w.res.Products += o.res.Products
	w.res.Rows += o.res.Rows
	w.res.Missing += o.res.Missing
	w.res.Extra += o.res.Extra
	w.res.Different += o.res.Different
	for _, id := range o.res.Examples {
		if len(w.res.Examples) < 10 {
			w.res.Examples = append(w.res.Examples, id)
		}
	}
	w.missing = append(w.missing, o.missing...)
	w.diff = append(w.diff, o.diff...)
	w.extra = append(w.extra, o.extra...)
	w.tooMany = w.tooMany || o.tooMany || len(w.missing)+len(w.diff)+len(w.extra) > maxDivergent
}

// minPartRows is the fewest products a part of a walk is worth.
const minPartRows = 50_000

// parts splits the product ids of a walk into about equal parts by the
// applied generation's index (read once): part i is [bounds[i],
// bounds[i+1]), the last one without an end. Each part streams on a
// connection of its own, so that the database formats the rows'
// attributes (the walk's largest cost) on that many cores.
func (h *Handler) parts(ctx context.Context, retailerID string, fence catalog.Fence) ([]string, error) {
	n := int64(h.cfg.ReconcileWorkers)
	if n <= 1 || fence.Applied == 0 || fence.AppliedProducts < minPartRows*n {
		return []string{""}, nil
	}
	obj, err := h.blobs.Open(ctx, keys.Index(retailerID, fence.Applied), "")
	if err != nil {
		return nil, fmt.Errorf("open the index of generation %d: %w", fence.Applied, err)
	}
	defer closeQuietly(obj.Body)
	ir := catalog.NewIndexReader(obj.Body)
	bounds := []string{""}
	for i := int64(0); ; i++ {
		ref, err := ir.NextRef()
		if errors.Is(err, io.EOF) {
			return bounds, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read the index of generation %d: %w", fence.Applied, err)
		}
		if i > 0 && i == int64(len(bounds))*fence.AppliedProducts/n {
			bounds = append(bounds, string(ref.ID))
			if int64(len(bounds)) == n {
				return bounds, nil
			}
		}
	}
}

// walkPart walks the product ids in [from, to) (to "": no end).
func (h *Handler) walkPart(ctx context.Context, retailerID string, fence catalog.Fence, from, to string, repair bool) (*walk, error) {
	w := &walk{keepAll: repair, batchSize: h.cfg.ReconcileBatch}
	if to != "" {
		w.to = []byte(to)
	}
	if fence.Applied > 0 {
		obj, err := h.blobs.Open(ctx, keys.Index(retailerID, fence.Applied), "")
		if err != nil {
			return nil, fmt.Errorf("open the index of generation %d: %w", fence.Applied, err)
		}
		defer closeQuietly(obj.Body)
		w.idx = catalog.NewIndexReader(obj.Body)
	}
	if err := w.skipTo(from); err != nil {
		return nil, err
	}
	// Batch by batch: the index entries are read (S3) with no transaction
	// open, then compared with the catalog's rows of their range of ids in
	// a transaction of its own, in which the retailer's fence is the
	// walk's (a batch that finds it moved ends the walk superseded).
	lo := from
	for {
		end, more, err := w.fill()
		if err != nil {
			return nil, err
		}
		hi := end
		if hi == "" {
			hi = to
		}
		if err := w.next(); err != nil {
			return nil, err
		}
		if err := h.store.ScanCatalog(ctx, retailerID, fence, lo, hi, w.row); err != nil {
			return nil, err
		}
		if err := w.finish(); err != nil {
			return nil, err
		}
		if !more || end == "" {
			break
		}
		lo = end
	}
	return w, nil
}

// walkAll walks every part at once and merges their findings in id order.
func (h *Handler) walkAll(ctx context.Context, retailerID string, fence catalog.Fence, repair bool) (*walk, error) {
	bounds, err := h.parts(ctx, retailerID, fence)
	if err != nil {
		return nil, err
	}
	walks := make([]*walk, len(bounds))
	errs := make([]error, len(bounds))
	var wg sync.WaitGroup
	for i, from := range bounds {
		to := ""
		if i+1 < len(bounds) {
			to = bounds[i+1]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			walks[i], errs[i] = h.walkPart(ctx, retailerID, fence, from, to, repair)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err // catalog.ErrSuperseded as it is
		}
	}
	for _, o := range walks[1:] {
		walks[0].merge(o)
	}
	return walks[0], nil
}

// ReconcileRetailer compares a retailer's catalog with its newest applied
// snapshot and, with repair, rewrites the rows that differ. A retailer
// with a generation being applied is skipped (its catalog is in flux).
// The error is for failures worth a retry (storage, databases).
func (h *Handler) ReconcileRetailer(ctx context.Context, runID, retailerID string, repair bool) (catalog.ReconcileResult, error) {
	start := h.cfg.Now()
	res := catalog.ReconcileResult{RunID: runID, RetailerID: retailerID, CheckedAt: start}
	log := h.log.With("run_id", runID, "retailer_id", retailerID)
	fence, err := h.store.Fence(ctx, retailerID)
	if errors.Is(err, catalog.ErrNotFound) {
		res.Skipped = "the retailer is not registered"
		return res, nil
	}
	if err != nil {
		return res, err
	}
	res.Generation = fence.Applied
	if fence.Latest > fence.Applied {
		res.Skipped = fmt.Sprintf("generation %d is being applied: its catalog is in flux", fence.Latest)
		return res, nil
	}
	w, err := h.walkAll(ctx, retailerID, fence, repair)
	if errors.Is(err, catalog.ErrSuperseded) {
		res.Skipped = "a newer generation took over while the catalog was read"
		return res, nil
	}
	if err != nil {
		return res, err
	}
	w.res.RunID, w.res.RetailerID, w.res.CheckedAt, w.res.Generation = runID, retailerID, start, fence.Applied
	if w.res.Different > 0 || (repair && w.res.Missing > 0) {
		values, err := h.snapshotValues(ctx, retailerID, fence.Applied, w)
		if err != nil {
			return w.res, err
		}
		if err := h.verifyDifferent(ctx, retailerID, w, values); err != nil {
			return w.res, err
		}
		if repair {
			if err := h.repair(ctx, runID, retailerID, fence.Applied, w, values); err != nil {
				return w.res, err
			}
		}
	} else if repair && w.res.Extra > 0 {
		if err := h.repair(ctx, runID, retailerID, fence.Applied, w, nil); err != nil {
			return w.res, err
		}
	}
	res = w.res
	if w.tooMany && repair {
		res.Unrepaired = res.Missing + res.Extra + res.Different - res.Repaired
		log.WarnContext(ctx, "too many divergent rows to repair one by one: upload the snapshot again", "max", maxDivergent)
	}
	h.Metrics.Emit(ctx, metrics.Fields{RetailerID: retailerID, Generation: fence.Applied},
		metrics.Count(metrics.ReconcileRetailersChecked, 1),
		metrics.Count(metrics.ReconcileDivergentRetailers, boolCount(res.Divergent())),
		metrics.Count(metrics.ReconcileDivergentProducts, res.Missing+res.Extra+res.Different),
		metrics.Count(metrics.ReconcileRepairedProducts, res.Repaired),
		metrics.Duration(metrics.ReconcileSeconds, h.cfg.Now().Sub(start)))
	log.InfoContext(ctx, "retailer reconciled", "generation", fence.Applied, "products", res.Products, "rows", res.Rows,
		"missing", res.Missing, "extra", res.Extra, "different", res.Different, "repaired", res.Repaired,
		"unrepaired", res.Unrepaired, "elapsed_ms", h.cfg.Now().Sub(start).Milliseconds())
	return res, nil
}

func boolCount(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// snapshotValue is a product's row in the applied snapshot's upload.
type snapshotValue struct {
	attributes []byte
	hash       catalog.Hash
}

// snapshotValues reads the applied generation's upload for the divergent
// products the walk kept (different, and missing for a repair): their
// canonical attributes, when their hash is the index's (the upload is the
// snapshot the index was made from). A gone upload yields none.
func (h *Handler) snapshotValues(ctx context.Context, retailerID string, gen int64, w *walk) (map[string]snapshotValue, error) {
	want := make(map[string]catalog.Hash, len(w.diff)+len(w.missing))
	for _, d := range w.diff {
		want[d.id] = d.index
	}
	for _, d := range w.missing {
		want[d.id] = d.index
	}
	out := make(map[string]snapshotValue, len(want))
	if len(want) == 0 {
		return out, nil
	}
	g, err := h.store.Generation(ctx, retailerID, gen)
	if err != nil {
		return nil, err
	}
	format, err := snapshot.ParseFormat(g.Format)
	if err != nil {
		return nil, fmt.Errorf("generation %d: %w", gen, err)
	}
	obj, err := h.blobs.Open(ctx, keys.Upload(retailerID, gen), "")
	if errors.Is(err, blob.ErrNotFound) {
		h.log.WarnContext(ctx, "the applied snapshot's upload is gone: divergent rows cannot be verified or repaired",
			"retailer_id", retailerID, "generation", gen)
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the upload of generation %d: %w", gen, err)
	}
	defer closeQuietly(obj.Body)
	// The upload was accepted: the diff's product and inflate limits (which
	// an operator may have raised) are not this read's to apply again.
	rd, err := snapshot.NewReader(obj.Body, format, snapshot.Limits{MaxFileBytes: -1, MaxProducts: -1})
	if err != nil {
		return nil, fmt.Errorf("read the upload of generation %d: %w", gen, err)
	}
	defer closeQuietly(rd)
	for len(out) < len(want) {
		row, err := rd.Scan()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read the upload of generation %d: %w", gen, err)
		}
		if hash, ok := want[string(row.ID)]; ok && row.Hash == hash {
			out[string(row.ID)] = snapshotValue{attributes: bytes.Clone(row.Attributes), hash: row.Hash}
		}
	}
	return out, nil
}

// verifyDifferent keeps as different only the rows whose stored value is
// not what the database makes of the snapshot's: a JSON number is stored as
// jsonb numeric (1e3 reads back as 1000), so a row can hash otherwise than
// its snapshot line and still be exactly what the pipeline wrote. A row
// whose snapshot value is not known (the upload is gone) stays different.
func (h *Handler) verifyDifferent(ctx context.Context, retailerID string, w *walk, values map[string]snapshotValue) error {
	var kept []divergent
	for start := 0; start < len(w.diff); start += repairBatch {
		batch := w.diff[start:min(start+repairBatch, len(w.diff))]
		var known []divergent
		var attrs []string
		for _, d := range batch {
			if v, ok := values[d.id]; ok {
				known = append(known, d)
				attrs = append(attrs, string(v.attributes))
			} else {
				kept = append(kept, d)
			}
		}
		if len(known) == 0 {
			continue
		}
		stored, err := h.store.NormalizeAttributes(ctx, retailerID, attrs)
		if err != nil {
			return err
		}
		for i, d := range known {
			if w.hasher.hash([]byte(stored[i])) == d.row {
				w.res.Different-- // what the pipeline wrote for that line: not a divergence
				continue
			}
			kept = append(kept, d)
		}
	}
	w.diff = kept
	if !w.res.Divergent() {
		w.res.Examples = nil
	}
	return nil
}

// repair rewrites the divergent rows to the snapshot's values, in batches
// of repairBatch, each a fenced transaction with its change event (a claim
// check on a chunk-format object) and then the directory.
func (h *Handler) repair(ctx context.Context, runID, retailerID string, gen int64, w *walk, values map[string]snapshotValue) error {
	var ops []message.ChunkOp
	unknown := int64(0)
	for _, list := range [][]divergent{w.missing, w.diff} {
		for _, d := range list {
			v, ok := values[d.id]
			if !ok {
				unknown++
				continue
			}
			ops = append(ops, message.ChunkOp{Op: message.OpUpsert, ProductID: d.id, Hash: hex.EncodeToString(v.hash[:]), Attributes: v.attributes})
		}
	}
	for _, id := range w.extra {
		ops = append(ops, message.ChunkOp{Op: message.OpDelete, ProductID: id})
	}
	w.res.Unrepaired += unknown
	for n := 0; n*repairBatch < len(ops); n++ {
		batch := ops[n*repairBatch : min((n+1)*repairBatch, len(ops))]
		var body []byte
		for _, op := range batch {
			body = message.AppendChunkLine(body, op)
		}
		key := fmt.Sprintf("chunks/%s/%d/repair-%s-%d", retailerID, gen, runID, n)
		if err := h.blobs.Put(ctx, key, body); err != nil {
			return fmt.Errorf("write repair object %s: %w", key, err)
		}
		sum := sha256.Sum256(body)
		res, err := h.store.RepairRows(ctx, retailerID, gen, batch, key, hex.EncodeToString(sum[:]))
		if err != nil {
			return err
		}
		if res.Superseded {
			w.res.Unrepaired += int64(len(ops) - n*repairBatch)
			h.log.InfoContext(ctx, "repair stopped: a newer generation took over", "retailer_id", retailerID, "generation", gen)
			return nil
		}
		w.res.Repaired += res.Written
		w.res.Unrepaired += int64(len(res.Fenced))
		fenced := make(map[string]bool, len(res.Fenced))
		for _, id := range res.Fenced {
			fenced[id] = true
		}
		var dir []message.ChunkOp
		for _, op := range batch {
			if !fenced[op.ProductID] {
				dir = append(dir, op)
			}
		}
		if err := h.store.RepairDirectory(ctx, retailerID, gen, dir); err != nil {
			return err
		}
	}
	return nil
}
