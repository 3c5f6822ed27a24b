package inmem

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/catalog"
)

// reconciliation keeps the runs and results of reconciliation, as the
// control database's reconcile_runs and reconcile_results do.
type reconciliation struct {
	runs    map[string]*catalog.ReconcileRun
	results map[string]map[string]catalog.ReconcileResult // run -> retailer -> result
}

// RetailerIDs returns up to limit registered retailer ids after after, in order.
func (s *Store) RetailerIDs(ctx context.Context, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.retailers {
		if id > after {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if len(ids) > limit {
		ids = ids[:limit]
	}
	return ids, nil
}

// CreateReconcileRun records a new run.
func (s *Store) CreateReconcileRun(ctx context.Context, run catalog.ReconcileRun) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reconcile.runs == nil {
		s.reconcile.runs = map[string]*catalog.ReconcileRun{}
		s.reconcile.results = map[string]map[string]catalog.ReconcileResult{}
	}
	if _, ok := s.reconcile.runs[run.ID]; ok {
		return fmt.Errorf("create reconcile run %s: exists", run.ID)
	}
	run.RequestedAt = s.now()
	s.reconcile.runs[run.ID] = &run
	s.reconcile.results[run.ID] = map[string]catalog.ReconcileResult{}
	return nil
}

func (s *Store) runOf(runID string) (*catalog.ReconcileRun, error) {
	run := s.reconcile.runs[runID]
	if run == nil {
		return nil, catalog.Errorf(catalog.ErrNotFound, "run_not_found", "no reconciliation run %q", runID)
	}
	return run, nil
}

// finishRun finishes a run whose every retailer has a result.
func (s *Store) finishRun(run *catalog.ReconcileRun) {
	if run.FinishedAt == nil && run.Total > 0 && len(s.reconcile.results[run.ID]) >= run.Total {
		now := s.now()
		run.FinishedAt = &now
	}
}

// SetReconcileTotal records how many retailers a run checks.
func (s *Store) SetReconcileTotal(ctx context.Context, runID string, total int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	run, err := s.runOf(runID)
	if err != nil {
		return err
	}
	run.Total = total
	s.finishRun(run)
	return nil
}

// RecordReconcileResult records (or overwrites) a retailer's result.
func (s *Store) RecordReconcileResult(ctx context.Context, r catalog.ReconcileResult) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	run, err := s.runOf(r.RunID)
	if err != nil {
		return err
	}
	r.Examples = slices.Clone(r.Examples)
	s.reconcile.results[r.RunID][r.RetailerID] = r
	s.finishRun(run)
	return nil
}

// ReconcileReport returns a run as far as it has got.
func (s *Store) ReconcileReport(ctx context.Context, runID string, limit int) (catalog.ReconcileReport, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	run, err := s.runOf(runID)
	if err != nil {
		return catalog.ReconcileReport{}, err
	}
	rep := catalog.ReconcileReport{Run: *run}
	results := s.reconcile.results[runID]
	ids := make([]string, 0, len(results))
	for id := range results {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := results[id]
		rep.Results++
		if r.Skipped == "" && r.Error == "" {
			rep.Checked++
		}
		if r.Divergent() {
			rep.Divergent++
		}
		if (r.Divergent() || r.Skipped != "" || r.Error != "") && len(rep.Notable) < limit {
			r.Examples = slices.Clone(r.Examples)
			rep.Notable = append(rep.Notable, r)
		}
	}
	return rep, nil
}

// PruneReconcileRuns deletes the runs requested before a time.
func (s *Store) PruneReconcileRuns(ctx context.Context, before time.Time) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for id, run := range s.reconcile.runs {
		if run.RequestedAt.Before(before) {
			delete(s.reconcile.runs, id)
			delete(s.reconcile.results, id)
			n++
		}
	}
	return n, nil
}

// RepairDirectory brings the directory in line with a repair's ops, over
// entries of the repair's own generation too.
func (s *Store) RepairDirectory(ctx context.Context, retailerID string, gen int64, ops []events.ChunkOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.directory == nil {
		s.directory = map[string]map[string]dirEntry{}
	}
	for _, op := range ops {
		byRetailer := s.directory[op.ProductID]
		if byRetailer == nil {
			byRetailer = map[string]dirEntry{}
			s.directory[op.ProductID] = byRetailer
		}
		if e, ok := byRetailer[retailerID]; ok && e.generation > gen {
			continue
		}
		byRetailer[retailerID] = dirEntry{generation: gen, deleted: op.Op == events.OpDelete}
	}
	return nil
}

// ScanCatalog calls fn with each live row of the retailer with product_id
// in [from, to) (to "": no end) in product_id byte order, the retailer's
// fence being expect (catalog.ErrSuperseded otherwise). The rows are those
// of the moment of the call.
func (s *Store) ScanCatalog(ctx context.Context, retailerID string, expect catalog.Fence, from, to string, fn func(id, attributes []byte) error) error {
	s.mu.Lock()
	st, err := s.registered(retailerID)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	type row struct {
		id    string
		attrs []byte
	}
	var rows []row
	var latest, applied int64
	if st != nil {
		latest, applied = st.latest, st.applied
		for id, p := range st.products {
			if !p.deleted && id >= from && (to == "" || id < to) {
				rows = append(rows, row{id, bytes.Clone(p.attributes)})
			}
		}
	}
	s.mu.Unlock()
	if latest != expect.Latest || applied != expect.Applied {
		return catalog.ErrSuperseded
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].id < rows[j].id })
	for _, r := range rows {
		if err := fn([]byte(r.id), r.attrs); err != nil {
			return err
		}
	}
	return nil
}

// NormalizeAttributes returns the objects as given: the in-memory store
// keeps attributes as it receives them.
func (s *Store) NormalizeAttributes(ctx context.Context, retailerID string, attributes []string) ([]string, error) {
	return slices.Clone(attributes), nil
}

// RepairRows rewrites rows of the applied generation gen to the snapshot's
// values, fenced as pgstore's RepairRows is, with its change event.
func (s *Store) RepairRows(ctx context.Context, retailerID string, gen int64, ops []events.ChunkOp, objectKey, sha256 string) (catalog.RepairResult, error) {
	hashes := make([][]byte, len(ops))
	for i, op := range ops {
		if op.Op != events.OpUpsert {
			continue
		}
		h, err := hex.DecodeString(op.Hash)
		if err != nil || len(h) != 16 {
			return catalog.RepairResult{}, fmt.Errorf("repair %s/%d: product %q: bad content hash %q", retailerID, gen, op.ProductID, op.Hash)
		}
		hashes[i] = h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var res catalog.RepairResult
	st := s.state[retailerID]
	if st == nil || st.latest != gen || st.applied != gen {
		res.Superseded = true
		return res, nil
	}
	if st.repairs == nil {
		st.repairs = map[int64]int{}
	}
	st.repairs[gen]++
	if g := st.gens[gen]; g != nil {
		res.Seq = g.ChunksTotal + st.repairs[gen] - 1
	}
	now := s.now()
	unchanged := []string{}
	for i, op := range ops {
		row, exists := st.products[op.ProductID]
		if exists && row.generation > gen {
			res.Fenced = append(res.Fenced, op.ProductID)
			unchanged = append(unchanged, op.ProductID)
			continue
		}
		switch op.Op {
		case events.OpUpsert:
			if exists && !row.deleted && bytes.Equal(row.attributes, op.Attributes) && bytes.Equal(row.hash, hashes[i]) {
				unchanged = append(unchanged, op.ProductID)
				continue
			}
			st.products[op.ProductID] = &productRow{attributes: bytes.Clone(op.Attributes), hash: hashes[i], generation: gen, updatedAt: now}
		case events.OpDelete:
			if !exists || row.deleted {
				unchanged = append(unchanged, op.ProductID)
				continue
			}
			st.products[op.ProductID] = &productRow{generation: gen, deleted: true, updatedAt: now}
		}
		res.Written++
	}
	s.outbox.add(catalog.OutboxEntry{Type: "catalog.changes", RetailerID: retailerID, Generation: gen, Seq: res.Seq,
		ObjectKey: objectKey, SHA256: sha256, Changed: int(res.Written), Unchanged: unchanged, EventTime: now, CreatedAt: now})
	return res, nil
}
