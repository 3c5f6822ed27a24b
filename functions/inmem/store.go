package inmem

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/events"
	"github.com/retailcatalog/catalog/functions/catalog"
	"github.com/retailcatalog/catalog/functions/costs"
)

// Store is the control database and the shards in memory: the retailer
// registry, each retailer's generations, fence and catalog (with
// tombstones), the chunks counted and the product directory. It keeps the
// rules of pgstore's SQL (fencing, exactly-once chunk counts, no
// resurrection, only changed rows written), as the storetest suite checks
// for both, and implements every handler's Store. One mutex makes each
// method one transaction.
type Store struct {
	// Shards is how many shards retailers are placed on [1]; a retailer's
	// shard is only recorded, every retailer lives in this one Store.
	Shards int
	// Now is the clock [time.Now].
	Now func() time.Time

	mu        sync.Mutex
	retailers map[string]catalog.Retailer
	state     map[string]*retailerState // created by a retailer's first reservation
	directory map[string]map[string]dirEntry
	outbox    outbox
	reconcile reconciliation
	versions  map[versionKey]int64 // consumers' version state
	usage     []costs.DayUsage     // added in the same "transaction" as the work, like pgstore's
	webhooks  map[string]catalog.Webhook
}

type retailerState struct {
	reserved, latest, applied, appliedProducts int64
	gens                                       map[int64]*generation
	products                                   map[string]*productRow
	chunks                                     map[[2]int64]bool // (generation, seq) counted
	chunkTimes                                 map[[2]int64]time.Time
	redrives                                   map[int64]*redrive
	repairs                                    map[int64]int // generation -> repair events written
}

type generation struct {
	catalog.GenerationStatus
	indexWritten   bool
	objectETag     string   // the pinned upload version
	attributeNames []string // the snapshot's, once read whole
	offboarding    bool
	stateChangedAt time.Time // the last state change (or the reservation)
}

type productRow struct {
	attributes []byte
	hash       []byte
	generation int64
	deleted    bool
	updatedAt  time.Time
}

type dirEntry struct {
	generation int64
	deleted    bool
}

// NewStore returns an empty store of one shard.
func NewStore() *Store { return &Store{} }

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func retailerNotFound(id string) error {
	return catalog.Errorf(catalog.ErrNotFound, "retailer_not_found", "retailer %q not found", id)
}

func generationNotFound(id string, gen int64) error {
	return catalog.Errorf(catalog.ErrNotFound, "generation_not_found", "retailer %q has no generation %d", id, gen)
}

// ShardCount is the number of shards retailers are placed on.
func (s *Store) ShardCount() int { return max(s.Shards, 1) }

// CreateRetailer registers a retailer; catalog.ErrConflict when it exists.
// A zero hold policy takes catalog.DefaultHoldPolicy, as the database's defaults do.
func (s *Store) CreateRetailer(ctx context.Context, r catalog.Retailer) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.retailers[r.ID]; ok {
		return catalog.Errorf(catalog.ErrConflict, "retailer_exists", "retailer %q already exists", r.ID)
	}
	if r.Hold == (catalog.HoldPolicy{}) {
		r.Hold = catalog.DefaultHoldPolicy
	}
	r.OffboardedAt = nil
	r.TokenHash = bytes.Clone(r.TokenHash)
	r.CreatedAt = s.now()
	if s.retailers == nil {
		s.retailers = map[string]catalog.Retailer{}
	}
	s.retailers[r.ID] = r
	return nil
}

// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
func (s *Store) Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.retailers[retailerID]
	if !ok {
		return r, retailerNotFound(retailerID)
	}
	return r, nil
}

// SetHoldPolicy sets a retailer's hold thresholds; catalog.ErrConflict when offboarded.
func (s *Store) SetHoldPolicy(ctx context.Context, retailerID string, p catalog.HoldPolicy) error {
	return s.changeRetailer(retailerID, func(r *catalog.Retailer) {
		r.Hold.DeleteFraction, r.Hold.UpdateFraction = p.DeleteFraction, p.UpdateFraction
	})
}

// SetToken replaces a retailer's token hash; catalog.ErrConflict when offboarded.
func (s *Store) SetToken(ctx context.Context, retailerID string, hash []byte) error {
	return s.changeRetailer(retailerID, func(r *catalog.Retailer) { r.TokenHash = bytes.Clone(hash) })
}

func (s *Store) changeRetailer(retailerID string, change func(*catalog.Retailer)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.retailers[retailerID]
	if !ok {
		return retailerNotFound(retailerID)
	}
	if r.OffboardedAt != nil {
		return catalog.Offboarded(retailerID)
	}
	change(&r)
	s.retailers[retailerID] = r
	return nil
}

// Offboard revokes the retailer's token, marks it offboarded and reserves,
// once, the generation whose empty snapshot (confirmed in advance) removes
// its catalog; it returns that generation.
func (s *Store) Offboard(ctx context.Context, retailerID string, revokedHash []byte, expires time.Time) (int64, error) {
	s.mu.Lock()
	r, ok := s.retailers[retailerID]
	if !ok {
		s.mu.Unlock()
		return 0, retailerNotFound(retailerID)
	}
	r.TokenHash = bytes.Clone(revokedHash)
	if r.OffboardedAt == nil {
		now := s.now()
		r.OffboardedAt = &now
	}
	s.retailers[retailerID] = r
	if st := s.state[retailerID]; st != nil {
		for gen, g := range st.gens {
			if g.offboarding {
				s.mu.Unlock()
				return gen, nil
			}
		}
	}
	s.mu.Unlock()
	gen, err := s.ReserveGeneration(ctx, retailerID, "csv", expires, 0)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.state[retailerID].gens[gen]
	g.offboarding, g.Confirmed = true, true
	return gen, nil
}

// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
func (s *Store) RetailerByTokenHash(ctx context.Context, hash []byte) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, r := range s.retailers {
		if bytes.Equal(r.TokenHash, hash) {
			return id, nil
		}
	}
	return "", nil
}

// registered returns the retailer's state (nil before its first
// reservation), or catalog.ErrNotFound when the registry does not know it.
func (s *Store) registered(retailerID string) (*retailerState, error) {
	if _, ok := s.retailers[retailerID]; !ok {
		return nil, retailerNotFound(retailerID)
	}
	return s.state[retailerID], nil
}

// withState runs fn on a registered retailer's state; noState is the error
// when the retailer has reserved nothing yet (no fence row).
func (s *Store) withState(retailerID string, noState error, fn func(st *retailerState) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil {
		return err
	}
	if st == nil {
		return noState
	}
	defer s.watchStates(retailerID, st)()
	return fn(st)
}

func noFence(op, retailerID string) error {
	return fmt.Errorf("%s %s: retailer has no reserved generation", op, retailerID)
}

// ReserveGeneration reserves the retailer's next generation, in increasing
// order, awaiting its upload until expires, and supersedes the retailer's
// older slots still awaiting theirs; with perHour > 0, at most perHour per
// rolling hour (then catalog.ErrRateLimited).
func (s *Store) ReserveGeneration(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil {
		return 0, err
	}
	if st == nil {
		st = &retailerState{gens: map[int64]*generation{}, products: map[string]*productRow{}, chunks: map[[2]int64]bool{}}
		if s.state == nil {
			s.state = map[string]*retailerState{}
		}
		s.state[retailerID] = st
	}
	defer s.watchStates(retailerID, st)()
	now := s.now()
	if perHour > 0 {
		inWindow := 0
		for g := st.reserved; g >= 1; g-- {
			gg, ok := st.gens[g]
			if !ok || !gg.CreatedAt.After(now.Add(-time.Hour)) {
				break
			}
			if inWindow++; inWindow == perHour {
				return 0, catalog.TooManyReservations(retailerID, perHour, gg.CreatedAt.Add(time.Hour).Sub(now))
			}
		}
	}
	st.reserved++
	gen := st.reserved
	st.gens[gen] = &generation{GenerationStatus: catalog.GenerationStatus{
		RetailerID: retailerID, Generation: gen, State: catalog.StateAwaitingUpload, Format: format,
		ObjectKey: events.UploadKey(retailerID, gen), UploadExpires: expires, CreatedAt: now}, stateChangedAt: now}
	for n, older := range st.gens {
		if n < gen && older.State == catalog.StateAwaitingUpload {
			if older.UploadExpires.Before(now) {
				older.State = catalog.StateExpired
			} else {
				older.State = catalog.StateSuperseded
				by := gen
				older.SupersededBy = &by
			}
		}
	}
	return gen, nil
}

// MarkArrived records that gen's upload arrived at: a slot awaiting it
// becomes received, unless it came more than grace after the slot's expiry
// (then the slot ends expired); it returns the state after.
func (s *Store) MarkArrived(ctx context.Context, retailerID string, gen int64, at time.Time, grace time.Duration) (catalog.State, error) {
	var state catalog.State
	err := s.withState(retailerID, generationNotFound(retailerID, gen), func(st *retailerState) error {
		g, ok := st.gens[gen]
		if !ok {
			return generationNotFound(retailerID, gen)
		}
		if g.State == catalog.StateAwaitingUpload || g.State == catalog.StateExpired {
			if at.After(g.UploadExpires.Add(grace)) {
				g.State, g.ReceivedAt = catalog.StateExpired, nil
				g.ErrorCode = catalog.CodeUploadExpired
				g.ErrorMessage = fmt.Sprintf("the upload arrived at %s, after its slot expired at %s; reserve a new generation and upload again",
					at.UTC().Format(time.RFC3339), g.UploadExpires.UTC().Format(time.RFC3339))
			} else {
				at := at
				g.State, g.ReceivedAt, g.ErrorCode, g.ErrorMessage = catalog.StateReceived, &at, "", ""
			}
		}
		state = g.viewState(s.now())
		return nil
	})
	return state, err
}

// newerArrival is the newest generation after gen whose upload arrived
// (0: none); gen, not yet applying, then ends superseded by it.
func (s *Store) newerArrival(st *retailerState, gen int64) int64 {
	var newer int64
	for n, g := range st.gens {
		if n > gen && g.ReceivedAt != nil && g.State != catalog.StateRejected && g.State != catalog.StateExpired {
			newer = max(newer, n)
		}
	}
	if g, ok := st.gens[gen]; ok && newer > 0 {
		switch g.State {
		case catalog.StateAwaitingUpload, catalog.StateReceived, catalog.StateDiffing, catalog.StateHeld:
			g.State = catalog.StateSuperseded
			g.SupersededBy = &newer
		}
	}
	return newer
}

// NewerArrival returns the newest generation after gen whose upload has
// arrived (0: none); gen, not yet applying, then ends superseded by it.
func (s *Store) NewerArrival(ctx context.Context, retailerID string, gen int64) (int64, error) {
	var newer int64
	err := s.withState(retailerID, noFence("newer arrival than", retailerID), func(st *retailerState) error {
		newer = s.newerArrival(st, gen)
		return nil
	})
	return newer, err
}

// viewState is the state the status route shows: a slot past its expiry
// reads expired.
func (g *generation) viewState(now time.Time) catalog.State {
	if g.State == catalog.StateAwaitingUpload && g.UploadExpires.Before(now) {
		return catalog.StateExpired
	}
	return g.State
}

func (g *generation) status(now time.Time) catalog.GenerationStatus {
	st := g.GenerationStatus
	st.State = g.viewState(now)
	st.ReceivedAt, st.AppliedAt, st.SupersededBy = clonePtr(st.ReceivedAt), clonePtr(st.AppliedAt), clonePtr(st.SupersededBy)
	st.Problems = slices.Clone(st.Problems)
	return st
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Generation returns one generation's status; catalog.ErrNotFound when it was never reserved.
func (s *Store) Generation(ctx context.Context, retailerID string, gen int64) (catalog.GenerationStatus, error) {
	var out catalog.GenerationStatus
	err := s.withState(retailerID, generationNotFound(retailerID, gen), func(st *retailerState) error {
		g, ok := st.gens[gen]
		if !ok {
			return generationNotFound(retailerID, gen)
		}
		out = g.status(s.now())
		return nil
	})
	return out, err
}

// Generations lists a retailer's generations, newest first, at most limit.
func (s *Store) Generations(ctx context.Context, retailerID string, limit int) ([]catalog.GenerationStatus, error) {
	return s.GenerationsBefore(ctx, retailerID, 0, limit)
}

// GenerationsBefore lists a retailer's generations older than before (0:
// from the newest), newest first.
func (s *Store) GenerationsBefore(ctx context.Context, retailerID string, before int64, limit int) ([]catalog.GenerationStatus, error) {
	out := []catalog.GenerationStatus{}
	err := s.withState(retailerID, nil, func(st *retailerState) error {
		from := st.reserved
		if before > 0 && before-1 < from {
			from = before - 1
		}
		for g := from; g >= 1 && len(out) < limit; g-- {
			if gg, ok := st.gens[g]; ok {
				out = append(out, gg.status(s.now()))
			}
		}
		return nil
	})
	return out, err
}

// Confirm marks a held generation confirmed: catalog.ErrConflict when it is
// not held or a newer generation has arrived.
func (s *Store) Confirm(ctx context.Context, retailerID string, gen int64) error {
	return s.withState(retailerID, generationNotFound(retailerID, gen), func(st *retailerState) error {
		g, ok := st.gens[gen]
		if !ok {
			return generationNotFound(retailerID, gen)
		}
		if g.State != catalog.StateHeld {
			return catalog.Errorf(catalog.ErrConflict, "not_held", "generation %d is %s, not held", gen, g.State)
		}
		var newer int64
		for n, other := range st.gens {
			if n > gen && other.ReceivedAt != nil && other.State != catalog.StateRejected && other.State != catalog.StateExpired {
				newer = max(newer, n)
			}
		}
		if st.latest > gen || newer > 0 {
			return catalog.Errorf(catalog.ErrConflict, "not_latest", "generation %d is no longer the latest: generation %d arrived", gen, max(st.latest, newer))
		}
		g.Confirmed = true
		return nil
	})
}

// markSuperseded ends gen as superseded by latest (nothing when finished).
func (s *Store) markSuperseded(g *generation, latest int64) {
	if g.State.Terminal() {
		return
	}
	g.State = catalog.StateSuperseded
	g.SupersededBy = nil
	if latest != g.Generation {
		g.SupersededBy = &latest
	}
	if g.ReceivedAt == nil {
		now := s.now()
		g.ReceivedAt = &now
	}
}

// BeginDiff records that gen's upload arrived and decides whether to read
// it, pinning the first upload version seen, as pgstore.Shard.BeginDiff does.
func (s *Store) BeginDiff(ctx context.Context, retailerID string, gen int64, etag string) (catalog.DiffDecision, error) {
	var d catalog.DiffDecision
	s.mu.Lock()
	defer s.mu.Unlock()
	st, err := s.registered(retailerID)
	if err != nil {
		return d, err
	}
	if st == nil {
		d.Reason = "retailer has no reserved generation on this shard"
		return d, nil
	}
	defer s.watchStates(retailerID, st)()
	g, ok := st.gens[gen]
	if !ok {
		d.Reason = "generation was never reserved"
		return d, nil
	}
	d.Confirmed = g.Confirmed
	if g.State.Terminal() {
		d.Reason = "generation is " + string(g.State)
		return d, nil
	}
	if etag != "" && g.objectETag != "" && etag != g.objectETag {
		d.Reason = fmt.Sprintf("another version of the upload (%s) refused: the generation holds %s", etag, g.objectETag)
		if g.State == catalog.StateHeld {
			g.reject(catalog.Rejection{Code: catalog.CodeUploadChanged,
				Message: "the held upload was replaced after it was read; upload it again to a new generation"})
		}
		return d, nil
	}
	if g.State == catalog.StateHeld && !g.Confirmed {
		d.Reason = "generation is held, awaiting confirmation"
		return d, nil
	}
	if g.State == catalog.StateAwaitingUpload || g.State == catalog.StateReceived {
		s.addUsage(retailerID, costs.Usage{Uploads: 1})
	}
	if st.latest > gen {
		s.markSuperseded(g, st.latest)
		d.Reason = fmt.Sprintf("superseded by generation %d", st.latest)
		return d, nil
	}
	if g.State != catalog.StateApplying {
		if newer := s.newerArrival(st, gen); newer > 0 {
			d.Reason = fmt.Sprintf("superseded by generation %d, which has arrived", newer)
			return d, nil
		}
	}
	if g.objectETag == "" {
		g.objectETag = etag
	}
	switch g.State {
	case catalog.StateAwaitingUpload, catalog.StateReceived, catalog.StateDiffing, catalog.StateHeld:
		g.State = catalog.StateDiffing
		if g.ReceivedAt == nil {
			now := s.now()
			g.ReceivedAt = &now
		}
		g.ErrorCode, g.ErrorMessage, g.ErrorLine = "", "", 0
	}
	d.Format = g.Format
	d.Proceed, d.Baseline, d.BaselineProducts, d.ETag = true, st.applied, st.appliedProducts, g.objectETag
	d.BaselineNames = st.names(st.applied)
	return d, nil
}

// PinUpload pins etag as gen's upload version unless one is pinned, and
// returns the pinned version.
func (s *Store) PinUpload(ctx context.Context, retailerID string, gen int64, etag string) (string, error) {
	var pinned string
	err := s.withState(retailerID, generationNotFound(retailerID, gen), func(st *retailerState) error {
		g, ok := st.gens[gen]
		if !ok {
			return generationNotFound(retailerID, gen)
		}
		if g.objectETag == "" {
			g.objectETag = etag
		}
		pinned = g.objectETag
		return nil
	})
	return pinned, err
}

// TakeOver makes gen the retailer's latest, supersedes every older
// unfinished generation and returns the baseline and the stopped
// generations (I5); catalog.ErrSuperseded when a newer generation took over first.
func (s *Store) TakeOver(ctx context.Context, retailerID string, gen int64) (catalog.DiffDecision, error) {
	var d catalog.DiffDecision
	err := s.withState(retailerID, noFence("take over", retailerID), func(st *retailerState) error {
		g, ok := st.gens[gen]
		if !ok {
			return fmt.Errorf("take over %s/%d: generation was never reserved", retailerID, gen)
		}
		d.Baseline, d.BaselineProducts, d.Confirmed = st.applied, st.appliedProducts, g.Confirmed
		d.BaselineNames = st.names(st.applied)
		if st.latest > gen || (g.State != catalog.StateDiffing && g.State != catalog.StateApplying) {
			s.markSuperseded(g, st.latest)
			return catalog.ErrSuperseded
		}
		if g.State == catalog.StateDiffing && s.newerArrival(st, gen) > 0 {
			return catalog.ErrSuperseded
		}
		st.latest = max(st.latest, gen)
		for n, older := range st.gens {
			if n < gen {
				switch older.State {
				case catalog.StateReceived, catalog.StateDiffing, catalog.StateApplying, catalog.StateHeld:
					older.State = catalog.StateSuperseded
					by := gen
					older.SupersededBy = &by
				}
			}
		}
		for n := d.Baseline + 1; n < gen; n++ {
			if older, ok := st.gens[n]; ok && older.indexWritten {
				d.Stopped = append(d.Stopped, n)
			}
		}
		d.Proceed = true
		return nil
	})
	return d, err
}

// Reject ends an unfinished generation with its problems (I7, or its
// pinned upload gone).
func (s *Store) Reject(ctx context.Context, retailerID string, gen int64, rej catalog.Rejection) error {
	return s.withState(retailerID, nil, func(st *retailerState) error {
		if g, ok := st.gens[gen]; ok && (g.State == catalog.StateReceived || g.State == catalog.StateDiffing ||
			g.State == catalog.StateApplying || g.State == catalog.StateHeld) {
			g.reject(rej)
		}
		return nil
	})
}

// reject records a rejection; its problems are its list, or its one
// problem when it has no list.
func (g *generation) reject(rej catalog.Rejection) {
	g.State, g.ErrorCode, g.ErrorMessage, g.ErrorLine = catalog.StateRejected, rej.Code, rej.Message, rej.Line
	g.Problems, g.MoreProblems = slices.Clone(rej.Problems), rej.More
	if len(g.Problems) == 0 {
		g.Problems = []catalog.Problem{{Code: rej.Code, Line: rej.Line, Message: rej.Message}}
	}
}

// Hold parks a generation being diffed until the retailer confirms it (I8).
func (s *Store) Hold(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts) error {
	return s.withState(retailerID, nil, func(st *retailerState) error {
		if g, ok := st.gens[gen]; ok && g.State == catalog.StateDiffing {
			g.State, g.ErrorCode, g.ErrorMessage, g.ErrorLine = catalog.StateHeld, code, message, 0
			g.setCounts(c)
			s.addUsage(retailerID, costs.Usage{BytesUploaded: c.Bytes, RowsReceived: c.Products})
		}
		return nil
	})
}

// names are a generation's attribute names (nil: unknown or none).
func (st *retailerState) names(gen int64) []string {
	if g, ok := st.gens[gen]; ok && g.attributeNames != nil {
		return slices.Clone(g.attributeNames)
	}
	return nil
}

func (g *generation) setCounts(c catalog.Counts) {
	g.attributeNames = slices.Clone(c.AttributeNames)
	g.Inserted, g.Updated, g.Deleted, g.Unchanged, g.Products = c.Inserted, c.Updated, c.Deleted, c.Unchanged, c.Products
}

// StartApplying records that gen's index is written and its chunks are
// about to be sent; with zero chunks gen is applied at once.
// catalog.ErrSuperseded when a newer generation arrived meanwhile.
func (s *Store) StartApplying(ctx context.Context, retailerID string, gen int64, c catalog.Counts, chunks int) error {
	return s.withState(retailerID, noFence("start applying", retailerID), func(st *retailerState) error {
		g, ok := st.gens[gen]
		if st.latest != gen || !ok || (g.State != catalog.StateDiffing && g.State != catalog.StateApplying) {
			return catalog.ErrSuperseded
		}
		if g.State == catalog.StateDiffing {
			u := costs.Usage{RowsInserted: c.Inserted, RowsUpdated: c.Updated, RowsDeleted: c.Deleted}
			if !g.Confirmed {
				u.BytesUploaded, u.RowsReceived = c.Bytes, c.Products
			}
			s.addUsage(retailerID, u)
		}
		g.State, g.indexWritten, g.ChunksTotal = catalog.StateApplying, true, chunks
		g.setCounts(c)
		g.ErrorCode, g.ErrorMessage, g.ErrorLine = "", "", 0
		if chunks == 0 {
			s.finish(st, g)
		}
		return nil
	})
}

// finish marks an applying generation applied and makes it the baseline.
func (s *Store) finish(st *retailerState, g *generation) {
	if g.State != catalog.StateApplying {
		return
	}
	now := s.now()
	g.State, g.AppliedAt = catalog.StateApplied, &now
	if st.applied < g.Generation {
		st.applied, st.appliedProducts = g.Generation, g.Products
	}
}

// IsLatest reports whether gen is still the retailer's newest arrived generation.
func (s *Store) IsLatest(ctx context.Context, retailerID string, gen int64) (bool, error) {
	var latest bool
	err := s.withState(retailerID, noFence("latest generation of", retailerID), func(st *retailerState) error {
		latest = st.latest <= gen
		return nil
	})
	return latest, err
}

// ApplyChunk writes one chunk of gen at once: the fence (I2, I4), the chunk
// count (exactly once), the fenced upserts and tombstones (I3) that skip
// unchanged rows (I6), the chunk's change event and, for the last chunk,
// the generation's completion.
func (s *Store) ApplyChunk(ctx context.Context, m events.ChunkMessage, ops []events.ChunkOp) (catalog.ApplyResult, error) {
	retailerID, gen, seq := m.RetailerID, m.Generation, m.Seq
	var res catalog.ApplyResult
	hashes := make([][]byte, len(ops))
	for i, op := range ops {
		if op.Op != events.OpUpsert {
			continue
		}
		h, err := hex.DecodeString(op.Hash)
		if err != nil {
			return res, fmt.Errorf("apply chunk %d of %s/%d: product %q: content hash %q is not hex", seq, retailerID, gen, op.ProductID, op.Hash)
		}
		hashes[i] = h
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.registered(retailerID); err != nil {
		return res, err
	}
	st := s.state[retailerID]
	if st == nil || st.latest > gen {
		res.Outcome = catalog.ChunkSuperseded
		return res, nil
	}
	defer s.watchStates(retailerID, st)()
	key := [2]int64{gen, int64(seq)}
	if st.chunks[key] {
		res.Outcome = catalog.ChunkDuplicate
		return res, nil
	}
	g, ok := st.gens[gen]
	if !ok || g.State != catalog.StateApplying {
		res.Outcome = catalog.ChunkSuperseded // the generation is not applying: nothing written
		return res, nil
	}
	st.chunks[key] = true
	now := s.now()
	if st.chunkTimes == nil {
		st.chunkTimes = map[[2]int64]time.Time{}
	}
	st.chunkTimes[key] = now
	unchanged := []string{}
	for i, op := range ops {
		row, exists := st.products[op.ProductID]
		switch op.Op {
		case events.OpUpsert:
			if exists && (row.generation >= gen || (!row.deleted && bytes.Equal(row.hash, hashes[i]))) {
				unchanged = append(unchanged, op.ProductID)
				continue
			}
			st.products[op.ProductID] = &productRow{attributes: bytes.Clone(op.Attributes), hash: hashes[i], generation: gen, updatedAt: now}
			res.Written++
		case events.OpDelete:
			if !exists || row.generation >= gen || row.deleted {
				unchanged = append(unchanged, op.ProductID)
				continue
			}
			st.products[op.ProductID] = &productRow{generation: gen, deleted: true, updatedAt: now}
			res.Written++
		}
	}
	changeEvent := catalog.OutboxEntry{Type: "catalog.changes", RetailerID: retailerID, Generation: gen, Seq: seq,
		ObjectKey: m.Key, SHA256: m.SHA256, Changed: int(res.Written), Unchanged: unchanged, EventTime: now, CreatedAt: now}
	s.outbox.add(changeEvent)
	g.ChunksApplied++
	s.addUsage(retailerID, costs.Usage{Chunks: 1, DBRowsWritten: 2 * res.Written})
	if g.ChunksApplied >= g.ChunksTotal {
		res.GenerationApplied = true
		s.finish(st, g)
	}
	return res, nil
}

// ChunkCounted reports whether chunk seq of gen has been counted.
func (s *Store) ChunkCounted(ctx context.Context, retailerID string, gen int64, seq int) (bool, error) {
	var counted bool
	err := s.withState(retailerID, nil, func(st *retailerState) error {
		counted = st.chunks[[2]int64{gen, int64(seq)}]
		return nil
	})
	return counted, err
}

// UpdateDirectory brings the product directory in line with a committed
// chunk of gen: fenced by generation (an entry of gen or newer is never
// changed), so it is idempotent and order-proof.
func (s *Store) UpdateDirectory(ctx context.Context, retailerID string, gen int64, ops []events.ChunkOp) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	last := map[string]bool{}
	for _, op := range ops {
		last[op.ProductID] = op.Op == events.OpDelete
	}
	if s.directory == nil {
		s.directory = map[string]map[string]dirEntry{}
	}
	for id, deleted := range last {
		byRetailer := s.directory[id]
		if byRetailer == nil {
			byRetailer = map[string]dirEntry{}
			s.directory[id] = byRetailer
		}
		if e, ok := byRetailer[retailerID]; ok && e.generation >= gen {
			continue
		}
		byRetailer[retailerID] = dirEntry{generation: gen, deleted: deleted}
	}
	return nil
}

// DirectoryRetailers returns, in order, at most limit retailers whose
// catalog holds a live product with this id.
func (s *Store) DirectoryRetailers(ctx context.Context, productID string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{}
	for id, e := range s.directory[productID] {
		if !e.deleted {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Unfinished lists the generations still diffing or applying and the
// confirmed holds, by retailer and generation.
func (s *Store) Unfinished(ctx context.Context) ([]catalog.UnfinishedGeneration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []catalog.UnfinishedGeneration
	for id, st := range s.state {
		for _, g := range st.gens {
			switch {
			case g.State == catalog.StateReceived, g.State == catalog.StateDiffing, g.State == catalog.StateApplying,
				g.State == catalog.StateHeld && g.Confirmed:
				out = append(out, catalog.UnfinishedGeneration{RetailerID: id, Generation: g.Generation, ObjectKey: g.ObjectKey})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].RetailerID != out[j].RetailerID {
			return out[i].RetailerID < out[j].RetailerID
		}
		return out[i].Generation < out[j].Generation
	})
	return out, nil
}

func (r *productRow) product(retailerID, productID string) catalog.Product {
	return catalog.Product{RetailerID: retailerID, ProductID: productID, Attributes: bytes.Clone(r.attributes),
		Generation: r.generation, UpdatedAt: r.updatedAt}
}

// Product returns a live product; catalog.ErrNotFound when absent or
// deleted. There are no replicas: fresh changes nothing.
func (s *Store) Product(ctx context.Context, retailerID, productID string, fresh bool) (catalog.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.registered(retailerID); err != nil {
		return catalog.Product{}, err
	}
	if st := s.state[retailerID]; st != nil {
		if row, ok := st.products[productID]; ok && !row.deleted {
			return row.product(retailerID, productID), nil
		}
	}
	return catalog.Product{}, catalog.Errorf(catalog.ErrNotFound, "product_not_found", "retailer %q has no product %q", retailerID, productID)
}

// Products returns up to limit live products with product_id > after, in
// byte order, stopping after the product that brings the total size of
// their attributes to maxBytes (<= 0: no bound).
func (s *Store) Products(ctx context.Context, retailerID, after string, limit, maxBytes int, fresh bool) ([]catalog.Product, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.registered(retailerID); err != nil {
		return nil, err
	}
	out := []catalog.Product{}
	st := s.state[retailerID]
	if st == nil {
		return out, nil
	}
	ids := make([]string, 0, len(st.products))
	for id, row := range st.products {
		if !row.deleted && strings.Compare(id, after) > 0 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	size := 0
	for _, id := range ids[:min(limit, len(ids))] {
		if maxBytes > 0 && size >= maxBytes {
			break
		}
		p := st.products[id].product(retailerID, id)
		out = append(out, p)
		size += len(p.Attributes)
	}
	return out, nil
}

// KnownGenerations returns the retailer's latest and applied generations
// (the store has no replicas: they are the writer's).
func (s *Store) KnownGenerations(ctx context.Context, retailerID string) (latest, applied int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.registered(retailerID); err != nil {
		return 0, 0, err
	}
	if st := s.state[retailerID]; st != nil {
		return st.latest, st.applied, nil
	}
	return 0, 0, nil
}

// Replicated is false: the store has no replicas.
func (s *Store) Replicated(ctx context.Context, retailerID string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.registered(retailerID)
	return false, err
}

// addUsage records usage of today (UTC by the store's clock); the caller
// holds the mutex.
func (s *Store) addUsage(retailerID string, u costs.Usage) {
	s.usage = append(s.usage, costs.DayUsage{Date: s.now().UTC().Format(costs.DateLayout), RetailerID: retailerID, Usage: u})
}

// AddUsage adds usage records (what the functions count in memory).
func (s *Store) AddUsage(ctx context.Context, records []costs.DayUsage) error {
	for _, r := range records {
		if _, err := costs.ParseDay(r.Date); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range records {
		c := costs.DayUsage{Date: r.Date, RetailerID: r.RetailerID}
		c.Usage.Add(r.Usage)
		s.usage = append(s.usage, c)
	}
	return nil
}

// Usage returns the usage of the days [from, to], one record per
// retailer-day, ordered by day then retailer.
func (s *Store) Usage(ctx context.Context, from, to time.Time) ([]costs.DayUsage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	lo, hi := from.UTC().Format(costs.DateLayout), to.UTC().Format(costs.DateLayout)
	byKey := map[[2]string]*costs.DayUsage{}
	var keys [][2]string
	for _, r := range s.usage {
		if r.Date < lo || r.Date > hi {
			continue
		}
		k := [2]string{r.Date, r.RetailerID}
		cur := byKey[k]
		if cur == nil {
			cur = &costs.DayUsage{Date: r.Date, RetailerID: r.RetailerID}
			byKey[k] = cur
			keys = append(keys, k)
		}
		cur.Usage.Add(r.Usage)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	out := make([]costs.DayUsage, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out, nil
}
