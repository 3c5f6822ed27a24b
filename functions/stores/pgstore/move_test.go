package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
)

// moveTables are the tables of a shard that hold a retailer's rows.
var moveTables = []string{"products", "consumer_versions", "retailer_state", "generations", "applied_chunks",
	"outbox", "generation_redrives", "generation_repairs", "usage_daily", "move_changes"}

// moveFixture is a retailer on shard 0 of two, with a catalog, its
// generations, events, consumer versions and usage, and a writer that
// goes on writing generations through the stores' routing as the pipeline
// does (a write refused while the retailer moves is tried again).
type moveFixture struct {
	t  *testing.T
	s  *pgstore.Stores
	id string

	mu       sync.Mutex
	want     map[string]string // product id -> attributes ("" deleted)
	gen      int64
	refused  atomic.Int64
	versions int
}

const moveProducts = 3000

func newMoveFixture(t *testing.T) *moveFixture {
	t.Helper()
	return newMoveFixtureOn(t, pgstoretest.New(t, pgstoretest.Shards(2)))
}

// moveTestOptions are the fixture's move settings: small batches, short
// leases and route waits.
var moveTestOptions = pgstore.MoveOptions{Batch: 700, Lease: 400 * time.Millisecond, RouteGrace: 200 * time.Millisecond, CatchUpLeft: 50}

// newMoveFixtureOn is newMoveFixture on stores of the test's own.
func newMoveFixtureOn(t *testing.T, s *pgstore.Stores) *moveFixture {
	t.Helper()
	return newMoveFixtureNamed(t, s, "mover")
}

// newMoveFixtureNamed is newMoveFixtureOn for retailer id (several on the
// same stores).
func newMoveFixtureNamed(t *testing.T, s *pgstore.Stores, id string) *moveFixture {
	t.Helper()
	ctx := context.Background()
	s.Moves = moveTestOptions
	f := &moveFixture{t: t, s: s, id: id, want: map[string]string{}, gen: 1}
	require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: f.id, Shard: 0, TokenHash: []byte(id + " token")}))
	sh := s.Shards[0].Pool()
	_, err := sh.Exec(ctx, `INSERT INTO retailer_state (retailer_id, reserved_generation, latest_generation, applied_generation, applied_products)
		VALUES ($1, 1, 1, 1, $2)`, f.id, moveProducts)
	require.NoError(t, err)
	_, err = sh.Exec(ctx, `INSERT INTO generations (retailer_id, generation, state, object_key, upload_expires_at, products)
		VALUES ($1, 1, 'applied', 'snapshots/mover/1', now(), $2)`, f.id, moveProducts) // its applied event: an outbox row
	require.NoError(t, err)
	_, err = sh.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
		SELECT $1, 'p-' || lpad(i::text, 5, '0'), jsonb_build_object('v', 1, 'i', i, 'name', 'it''s \ "'), '\x01', 1
		FROM generate_series(1, $2) AS i`, f.id, moveProducts)
	require.NoError(t, err)
	_, err = sh.Exec(ctx, `INSERT INTO consumer_versions (consumer, retailer_id, product_id, generation)
		SELECT c, $1, 'p-' || lpad(i::text, 5, '0'), 1 FROM generate_series(1, $2) AS i, unnest(ARRAY['analytics', 'webhooks']) AS c`, f.id, moveProducts)
	require.NoError(t, err)
	_, err = sh.Exec(ctx, `INSERT INTO applied_chunks (retailer_id, generation, seq) VALUES ($1, 1, 0)`, f.id)
	require.NoError(t, err)
	_, err = sh.Exec(ctx, `INSERT INTO usage_daily (day, retailer_id, uploads, rows_inserted) VALUES (current_date, $1, 1, $2)`, f.id, moveProducts)
	require.NoError(t, err)
	for i := 1; i <= moveProducts; i++ {
		f.want[fmt.Sprintf("p-%05d", i)] = fmt.Sprintf(`{"i": %d, "v": 1, "name": "it's \\ \""}`, i)
	}
	f.versions = 2 * moveProducts
	return f
}

// write writes generation gen+1: 40 products changed (p-00001..p-00010
// among them, every time), one inserted, one deleted, its state, its
// chunk, its event, a consumer version and its usage, in one transaction
// of the retailer's shard as routed now. A refusal (CM001: the retailer
// is moving) is retried.
func (f *moveFixture) write(ctx context.Context, rnd *rand.Rand) error {
	f.mu.Lock()
	gen := f.gen + 1
	f.mu.Unlock()
	changed := []string{}
	for i := 1; i <= 10; i++ {
		changed = append(changed, fmt.Sprintf("p-%05d", i))
	}
	for range 30 {
		changed = append(changed, fmt.Sprintf("p-%05d", 11+rnd.IntN(moveProducts-10)))
	}
	inserted := fmt.Sprintf("q-%05d", gen)
	deleted := fmt.Sprintf("p-%05d", 100+rnd.IntN(moveProducts-100))
	for {
		_, sh, err := f.s.ForRetailer(ctx, f.id)
		if err != nil {
			return err
		}
		err = pgx.BeginFunc(ctx, sh.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO generations (retailer_id, generation, state, object_key, upload_expires_at)
				VALUES ($1, $2::bigint, 'applying', 'snapshots/mover/' || $2::bigint::text, now())`, f.id, gen); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE products SET attributes = jsonb_build_object('v', $2::bigint), generation = $2, deleted = false
				WHERE retailer_id = $1 AND product_id = ANY($3) AND generation < $2 AND NOT deleted`, f.id, gen, changed); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
				VALUES ($1, $2, jsonb_build_object('v', $3::bigint), '\x02', $3)`, f.id, inserted, gen); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE products SET deleted = true, attributes = NULL, content_hash = NULL, generation = $3
				WHERE retailer_id = $1 AND product_id = $2 AND generation <= $3`, f.id, deleted, gen); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO consumer_versions (consumer, retailer_id, product_id, generation) VALUES ('analytics', $1, $2, $3)`,
				f.id, inserted, gen); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO applied_chunks (retailer_id, generation, seq) VALUES ($1, $2, 0)`, f.id, gen); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE usage_daily SET uploads = uploads + 1 WHERE retailer_id = $1 AND day = current_date`, f.id); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE generations SET state = 'applied', applied_at = now() WHERE retailer_id = $1 AND generation = $2`, f.id, gen); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE retailer_state SET reserved_generation = $2, latest_generation = $2, applied_generation = $2
				WHERE retailer_id = $1`, f.id, gen)
			return err
		})
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "CM001" {
			f.refused.Add(1)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write generation %d: %w", gen, err)
		}
		break
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen = gen
	for _, id := range changed {
		if f.want[id] != "" {
			f.want[id] = fmt.Sprintf(`{"v": %d}`, gen)
		}
	}
	f.want[inserted] = fmt.Sprintf(`{"v": %d}`, gen)
	f.want[deleted] = ""
	f.versions++
	return nil
}

// writeUntil writes generations until stop is closed.
func (f *moveFixture) writeUntil(ctx context.Context, stop <-chan struct{}) <-chan error {
	errc := make(chan error, 1)
	go func() {
		rnd := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			if err := f.write(ctx, rnd); err != nil {
				errc <- err
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return errc
}

// readUntil reads p-00001..p-00010 as the storefront does until stop is
// closed: each must be found, at a generation never lower than one seen.
func (f *moveFixture) readUntil(ctx context.Context, stop <-chan struct{}) <-chan error {
	errc := make(chan error, 1)
	go func() {
		seen := map[string]int64{}
		reads := 0
		for {
			select {
			case <-stop:
				if reads == 0 {
					errc <- errors.New("the reader read nothing")
				} else {
					errc <- nil
				}
				return
			default:
			}
			id := fmt.Sprintf("p-%05d", 1+reads%10)
			p, err := f.s.Product(ctx, f.id, id, false)
			if err != nil {
				errc <- fmt.Errorf("read %d of %s: %w", reads, id, err)
				return
			}
			if p.Generation < seen[id] {
				errc <- fmt.Errorf("read %d of %s: generation %d after %d", reads, id, p.Generation, seen[id])
				return
			}
			seen[id] = p.Generation
			reads++
		}
	}()
	return errc
}

// runMoves runs the moves until none runs, as the ops poller does.
func (f *moveFixture) runMoves(ctx context.Context) {
	f.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		running, err := f.s.RunMoves(ctx, time.Now().Add(time.Minute))
		if err != nil {
			f.t.Logf("run moves: %v", err)
		}
		if running == 0 && err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.t.Fatal("the move did not end within 2 minutes")
}

// catalogOn reads the retailer's products on shard i: live ones with
// attributes, tombstones with "".
func (f *moveFixture) catalogOn(ctx context.Context, i int) map[string]string {
	f.t.Helper()
	rows, err := f.s.Shards[i].Pool().Query(ctx, `SELECT product_id, coalesce(attributes::text, '') FROM products WHERE retailer_id = $1`, f.id)
	require.NoError(f.t, err)
	got := map[string]string{}
	for rows.Next() {
		var id, attrs string
		require.NoError(f.t, rows.Scan(&id, &attrs))
		got[id] = attrs
	}
	require.NoError(f.t, rows.Err())
	return got
}

func (f *moveFixture) count(ctx context.Context, shard int, table string) int64 {
	f.t.Helper()
	var n int64
	require.NoError(f.t, f.s.Shards[shard].Pool().QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE retailer_id = $1", f.id).Scan(&n))
	return n
}

// requireWhole checks that shard i holds the whole retailer as written,
// and the other shard nothing of it but, at most, its forwarding record.
func (f *moveFixture) requireWhole(ctx context.Context, shard int) {
	f.t.Helper()
	f.mu.Lock()
	want, gen, versions := f.want, f.gen, f.versions
	f.mu.Unlock()
	got := f.catalogOn(ctx, shard)
	require.Equal(f.t, len(want), len(got), "products on shard %d", shard)
	var diffs []string
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			diffs = append(diffs, fmt.Sprintf("%s: %q, want %q", id, g, w))
		}
	}
	sort.Strings(diffs)
	require.Empty(f.t, diffs, "products on shard %d", shard)
	require.Equal(f.t, int64(versions), f.count(ctx, shard, "consumer_versions"))
	require.Equal(f.t, gen, f.count(ctx, shard, "generations"))
	require.Equal(f.t, gen, f.count(ctx, shard, "applied_chunks"))
	var applied, uploads int64
	require.NoError(f.t, f.s.Shards[shard].Pool().QueryRow(ctx, `SELECT applied_generation FROM retailer_state WHERE retailer_id = $1`, f.id).Scan(&applied))
	require.Equal(f.t, gen, applied)
	require.NoError(f.t, f.s.Shards[shard].Pool().QueryRow(ctx, `SELECT uploads FROM usage_daily WHERE retailer_id = $1`, f.id).Scan(&uploads))
	require.Equal(f.t, gen, uploads)
	require.GreaterOrEqual(f.t, f.count(ctx, shard, "outbox"), int64(1), "the applied events not published yet")
	other := 1 - shard
	for _, table := range moveTables {
		require.Zero(f.t, f.count(ctx, other, table), "rows of the retailer in %s on shard %d", table, other)
	}
	r, err := f.s.Control.Retailer(ctx, f.id)
	require.NoError(f.t, err)
	require.Equal(f.t, shard, r.Shard)
}

// A move copies the whole retailer to the other shard while generations
// are written and the storefront reads, with the runner crashed (or not)
// once at each of its steps: it ends done, the new shard holds exactly
// what was written (every generation of the writer, none lost, none twice,
// every row's generation kept), the old one nothing of it; no read of a
// product present throughout found it missing or at an older generation;
// and the writer goes on, on the new shard, after it.
func TestMoveWhileWritesAndReadsGoOn(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			f := newMoveFixture(t)
			var crashed sync.Map
			if crash {
				f.s.Moves.Hook = func(_, step string) error {
					if _, again := crashed.LoadOrStore(step, true); !again {
						return pgstore.ErrMoveAbandoned
					}
					return nil
				}
			}
			stop := make(chan struct{})
			writes, reads := f.writeUntil(ctx, stop), f.readUntil(ctx, stop)
			time.Sleep(200 * time.Millisecond)
			id, err := f.s.StartMove(ctx, f.id, 1)
			require.NoError(t, err)
			f.runMoves(ctx)
			time.Sleep(300 * time.Millisecond) // writes on the new shard
			close(stop)
			require.NoError(t, <-writes)
			require.NoError(t, <-reads)

			m, err := f.s.Move(ctx, id)
			require.NoError(t, err)
			require.Equal(t, catalog.MoveDone, m.State, "move %+v", m)
			require.Equal(t, f.id, m.RetailerID)
			require.Equal(t, 0, m.FromShard)
			require.Equal(t, 1, m.ToShard)
			require.GreaterOrEqual(t, m.RowsTotal, int64(moveProducts*3), "products and consumer versions when it started")
			require.GreaterOrEqual(t, m.RowsCopied, m.RowsTotal)
			f.requireWhole(ctx, 1)
			if crash {
				for _, step := range []string{"start", "copy_products", "copy_versions", "catch_up", "freeze", "drain", "switch", "wait_routes", "unfreeze", "cleanup"} {
					_, ok := crashed.Load(step)
					require.True(t, ok, "no crash at step %s", step)
				}
			}
			t.Logf("generations written: %d, writes refused while frozen: %d", f.gen, f.refused.Load())

			// Moved back: the old shard's forwarding record gives way.
			f.s.Moves.Hook = nil
			_, err = f.s.StartMove(ctx, f.id, 0)
			require.NoError(t, err)
			f.runMoves(ctx)
			f.requireWhole(ctx, 0)
		})
	}
}

// A move that fails before its switch is undone: the retailer stays
// whole on its old shard, the other holds nothing of it, and its writes go
// on there.
func TestMoveThatFailsLeavesTheRetailerOnItsShard(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	f.s.Moves.Hook = func(_, step string) error {
		if step == "drain" {
			return errors.New("the target refuses (test)")
		}
		return nil
	}
	stop := make(chan struct{})
	writes := f.writeUntil(ctx, stop)
	id, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	f.runMoves(ctx)
	time.Sleep(200 * time.Millisecond)
	close(stop)
	require.NoError(t, <-writes)
	m, err := f.s.Move(ctx, id)
	require.NoError(t, err)
	require.Equal(t, catalog.MoveFailed, m.State)
	require.Contains(t, m.Error, "the target refuses (test)")
	f.requireWhole(ctx, 0)
	var records int64
	require.NoError(t, f.s.Shards[0].Pool().QueryRow(ctx, `SELECT count(*) FROM shard_moves`).Scan(&records))
	require.Zero(t, records)
	require.NoError(t, f.s.Shards[1].Pool().QueryRow(ctx, `SELECT count(*) FROM shard_moves`).Scan(&records))
	require.Zero(t, records)
}

// The refusals: an unknown retailer, a shard that does not exist, the
// shard it is on, a second move while one runs.
func TestStartMoveRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: "r", Shard: 0, TokenHash: []byte("r token")}))
	code := func(err error) string {
		var de *catalog.Error
		if errors.As(err, &de) {
			return de.Code
		}
		return fmt.Sprint(err)
	}
	_, err := s.StartMove(ctx, "nobody", 1)
	require.ErrorIs(t, err, catalog.ErrNotFound)
	_, err = s.StartMove(ctx, "r", 2)
	require.ErrorIs(t, err, catalog.ErrInvalid)
	require.Equal(t, "invalid_shard", code(err))
	_, err = s.StartMove(ctx, "r", 0)
	require.ErrorIs(t, err, catalog.ErrConflict)
	require.Equal(t, "already_on_shard", code(err))
	id, err := s.StartMove(ctx, "r", 1)
	require.NoError(t, err)
	_, err = s.StartMove(ctx, "r", 1)
	require.ErrorIs(t, err, catalog.ErrConflict)
	require.Equal(t, "move_running", code(err))
	m, err := s.Move(ctx, id)
	require.NoError(t, err)
	require.Equal(t, catalog.MoveCopying, m.State)
	require.True(t, strings.HasPrefix(m.ID, "mv_"))
	_, err = s.Move(ctx, "mv_nothing")
	require.ErrorIs(t, err, catalog.ErrNotFound)
}

// A write that logged its change before another but commits after it (the
// log's seq is taken at the write, not at the commit) is copied all the
// same: catch-up never skips a change that was not visible when it read
// the log.
func TestMoveCopiesAChangeCommittedOutOfSeqOrder(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	src := f.s.Shards[0].Pool()
	insert := func(tx pgx.Tx, id string) {
		_, err := tx.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
			VALUES ($1, $2, '{"v": 1}', '\x03', 1)`, f.id, id)
		require.NoError(t, err)
	}
	var slow pgx.Tx
	var once, committed sync.Once
	f.s.Moves.Hook = func(_, step string) error {
		switch step {
		case "catch_up":
			once.Do(func() {
				var err error
				slow, err = src.Begin(ctx) // logs seq n, commits later
				require.NoError(t, err)
				insert(slow, "late-1")
				require.NoError(t, pgx.BeginFunc(ctx, src, func(tx pgx.Tx) error { // logs seq n+1, commits now
					insert(tx, "early-1")
					return nil
				}))
			})
		case "freeze":
			committed.Do(func() { require.NoError(t, slow.Commit(ctx)) })
		}
		return nil
	}
	_, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	f.runMoves(ctx)
	f.mu.Lock()
	f.want["late-1"], f.want["early-1"] = `{"v": 1}`, `{"v": 1}`
	f.mu.Unlock()
	f.requireWhole(ctx, 1)

	// The old shard's forwarding record goes with a collection once it is
	// older than the retention, not before.
	n, err := f.s.CollectMoveRecords(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, int64(1), f.count(ctx, 0, "shard_moves"))
	n, err = f.s.CollectMoveRecords(ctx, time.Now().Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Zero(t, f.count(ctx, 0, "shard_moves"))
}

// An offboarding while the retailer is frozen for its switch is refused
// with 429 retailer_moving (not a 500); asked again after the move it
// reserves the offboarding generation on the new shard.
func TestOffboardingDuringAMoveSwitch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	var once sync.Once
	f.s.Moves.Hook = func(_, step string) error {
		if step == "drain" {
			abandon := false
			once.Do(func() { abandon = true })
			if abandon {
				return pgstore.ErrMoveAbandoned // the source stays frozen
			}
		}
		return nil
	}
	_, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	running, err := f.s.RunMoves(ctx, time.Now().Add(time.Minute))
	require.ErrorIs(t, err, pgstore.ErrMoveAbandoned)
	require.Equal(t, 1, running)

	_, err = f.s.Offboard(ctx, f.id, []byte("revoked"), time.Now().Add(time.Hour))
	require.ErrorIs(t, err, catalog.ErrRateLimited)
	var ce *catalog.Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "retailer_moving", ce.Code)

	f.runMoves(ctx)
	gen, err := f.s.Offboard(ctx, f.id, []byte("revoked"), time.Now().Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, f.gen+1, gen)
	var state string
	require.NoError(t, f.s.Shards[1].Pool().QueryRow(ctx, `SELECT state FROM generations WHERE retailer_id = $1 AND generation = $2`, f.id, gen).Scan(&state))
	require.NotEmpty(t, state)
	require.Zero(t, f.count(ctx, 0, "generations"))
}

// Product ids that an SQL or array literal could misread (quotes,
// backslashes, commas, braces, NULL, spaces, non-ASCII) are moved exactly,
// whether copied with the catalog or logged while it copies.
func TestMoveCopiesPoisonIDs(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newMoveFixture(t)
	src := f.s.Shards[0].Pool()
	ids := []string{`a"b`, `c\d`, `e,f`, `{g}`, `NULL`, `h'i`, `ü-ß`, ` space `, `\\"'`, `x\`, `"`}
	insert := func(prefix string) {
		for _, id := range ids {
			_, err := src.Exec(ctx, `INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation)
				VALUES ($1, $2, jsonb_build_object('id', $2::text), '\x04', 1)`, f.id, prefix+id)
			require.NoError(t, err)
			_, err = src.Exec(ctx, `INSERT INTO consumer_versions (consumer, retailer_id, product_id, generation) VALUES ('analytics', $1, $2, 1)`,
				f.id, prefix+id)
			require.NoError(t, err)
			b, err := json.Marshal(map[string]string{"id": prefix + id})
			require.NoError(t, err)
			f.mu.Lock()
			f.want[prefix+id] = strings.ReplaceAll(string(b), `":"`, `": "`)
			f.versions++
			f.mu.Unlock()
		}
	}
	insert("")
	var once sync.Once
	f.s.Moves.Hook = func(_, step string) error {
		if step == "catch_up" {
			once.Do(func() { insert("late ") })
		}
		return nil
	}
	_, err := f.s.StartMove(ctx, f.id, 1)
	require.NoError(t, err)
	f.runMoves(ctx)
	f.requireWhole(ctx, 1)
}
