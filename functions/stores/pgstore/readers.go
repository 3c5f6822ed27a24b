package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// ReaderOptions configure the replica pools of one process. Zero values take
// the defaults in brackets, sized for a Lambda environment that serves one
// request at a time (see docs/ARCHITECTURE.md, "Read path").
type ReaderOptions struct {
	// MaxConns per replica [2]: one for the request in flight, one for the
	// staleness probe. Connections open lazily, on first use.
	MaxConns int32
	// AttemptTimeout bounds one query on one server [2s]; after it the next
	// replica, then the writer, is tried.
	AttemptTimeout time.Duration
	// ConnectTimeout bounds opening a connection [1s]: a replica that does
	// not answer costs at most this once before it is marked down.
	ConnectTimeout time.Duration
	// StatementTimeout is the replicas' server-side statement_timeout [2s].
	StatementTimeout time.Duration
	// ProbeInterval is how often, while reads arrive, the replicas' replay
	// position is compared with the writer's and down replicas are retried [1s].
	ProbeInterval time.Duration
	// MaxLag is the staleness bound [5s]: a replica that has not replayed
	// what the writer had written MaxLag ago is skipped until it catches up.
	MaxLag time.Duration
	// LookupSlots bounds the product-lookup queries in flight on the
	// database at once [1]; lookups arriving while all are busy are answered
	// together by the next query (see lookupBatcher), up to 128 a query.
	// One slot busy for a round trip of 0.1-1 ms carries tens of thousands
	// of lookups a second, with less work for the database than more slots
	// would take. Lambda serves one request at a time and never fills it;
	// a long-running server under load does.
	LookupSlots int
	// Logger receives replica state changes (down, back, lagging). [discard]
	Logger *slog.Logger
}

func (o *ReaderOptions) defaults() {
	if o.MaxConns <= 0 {
		o.MaxConns = 2
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 2 * time.Second
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = time.Second
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 2 * time.Second
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = time.Second
	}
	if o.MaxLag <= 0 {
		o.MaxLag = 5 * time.Second
	}
	if o.LookupSlots <= 0 {
		o.LookupSlots = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// ReaderSet routes the storefront's reads of one database (a shard, or the
// control database) to its read replicas: round robin over the replicas
// that answer and are not lagging, falling back to the writer when none is
// left. A replica that fails a read is marked down and retried by the probe
// with a growing backoff; requests never wait on a replica known to be down.
type ReaderSet struct {
	name     string
	writer   *pgxpool.Pool // the storefront's own read pool on the writer
	replicas []*replica
	o        ReaderOptions

	next      atomic.Uint64
	probing   atomic.Bool
	lastProbe atomic.Int64 // unix nanoseconds of the last probe start
	mu        sync.Mutex   // guards samples
	samples   []lsnSample  // the writer's WAL position at recent probes, oldest first

	fromReplicas, fromWriter atomic.Int64
	fallbacks                atomic.Int64 // reads the replicas could not answer, served by the writer
	lookups                  *lookupBatcher
}

type replica struct {
	addr     string // host:port, for logs (never the password)
	pool     *pgxpool.Pool
	down     atomic.Bool
	retryAt  atomic.Int64 // unix nanoseconds: when the probe tries a down replica again
	failures atomic.Int32
	lagging  atomic.Bool
}

type lsnSample struct {
	at  time.Time
	lsn int64
}

// Source says which server may answer a read.
type Source int

// Sources of a read.
const (
	// AnyReader is a healthy replica within the staleness bound, or the
	// writer when there is none.
	AnyReader Source = iota
	// WriterOnly is the writer: for a client that has seen newer data than a
	// replica returned.
	WriterOnly
)

// openReaderSet opens (lazily: no connection is made before the first read)
// a read pool on writer, used when no replica can answer, and one on each
// reader of writer. A reader is a DSN or URL, or "host" or "host:port",
// which takes everything else (user, password, database, TLS) from the
// writer's configuration. Read pools are the storefront's own: sized by o,
// with its timeouts and generic plans (see readPoolConfig), so they never
// take connections from the writers' other users.
func openReaderSet(name string, writer *pgxpool.Pool, readers []string, o ReaderOptions) (*ReaderSet, error) {
	o.defaults()
	rs := &ReaderSet{name: name, o: o}
	rs.lookups = &lookupBatcher{rs: rs, slots: o.LookupSlots}
	var err error
	if rs.writer, err = pgxpool.NewWithConfig(context.Background(), readPoolConfig(writer.Config(), o)); err != nil {
		return nil, fmt.Errorf("%s read pool: %w", name, err)
	}
	for _, entry := range readers {
		cfg, addr, err := replicaConfig(writer.Config(), entry, o)
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("%s reader %q: %w", name, entry, err)
		}
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("%s reader %s: %w", name, addr, err)
		}
		rs.replicas = append(rs.replicas, &replica{addr: addr, pool: pool})
	}
	return rs, nil
}

func replicaConfig(writer *pgxpool.Config, entry string, o ReaderOptions) (*pgxpool.Config, string, error) {
	var cfg *pgxpool.Config
	if strings.Contains(entry, "://") || strings.Contains(entry, "=") {
		var err error
		if cfg, err = pgxpool.ParseConfig(entry); err != nil {
			return nil, "", err
		}
	} else {
		host, port := entry, writer.ConnConfig.Port
		if h, p, err := net.SplitHostPort(entry); err == nil {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return nil, "", fmt.Errorf("bad port %q", p)
			}
			host, port = h, uint16(n)
		}
		if host == "" {
			return nil, "", errors.New("empty host")
		}
		cfg = writer.Copy()
		cc := cfg.ConnConfig
		cc.Host, cc.Port = host, port
		if cc.TLSConfig != nil {
			cc.TLSConfig.ServerName = host
		}
		for _, fb := range cc.Fallbacks {
			fb.Host, fb.Port = host, port
			if fb.TLSConfig != nil {
				fb.TLSConfig = fb.TLSConfig.Clone()
				fb.TLSConfig.ServerName = host
			}
		}
	}
	cfg = readPoolConfig(cfg, o)
	addr := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	return cfg, addr, nil
}

// readPoolConfig is a copy of cfg set up for the storefront's reads.
func readPoolConfig(cfg *pgxpool.Config, o ReaderOptions) *pgxpool.Config {
	cfg = cfg.Copy()
	cfg.MaxConns, cfg.MinConns = o.MaxConns, 0
	// Connections are recycled at staggered times, never all at once.
	cfg.MaxConnLifetime, cfg.MaxConnLifetimeJitter = 30*time.Minute, 5*time.Minute
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.ConnConfig.ConnectTimeout = o.ConnectTimeout
	params := make(map[string]string, len(cfg.ConnConfig.RuntimeParams)+2)
	for k, v := range cfg.ConnConfig.RuntimeParams {
		params[k] = v
	}
	params["statement_timeout"] = strconv.FormatInt(o.StatementTimeout.Milliseconds(), 10)
	// Every read is a key or keyset lookup whose best plan does not depend
	// on its parameters. Without this, PostgreSQL plans the batched lookup
	// (storefront_product_batch) anew on every execution, because the
	// length of its arrays makes each custom plan look cheaper than the
	// generic one: 0.14 ms of planning for a 0.05 ms query, measured.
	params["plan_cache_mode"] = "force_generic_plan"
	cfg.ConnConfig.RuntimeParams = params
	return cfg
}

// Close closes the read pools.
func (rs *ReaderSet) Close() {
	if rs.writer != nil {
		rs.writer.Close()
	}
	for _, r := range rs.replicas {
		r.pool.Close()
	}
}

// Replicas returns the number of replicas configured.
func (rs *ReaderSet) Replicas() int { return len(rs.replicas) }

// Product returns a live product; catalog.ErrNotFound when absent or
// deleted. Concurrent AnyReader lookups share queries under load (see
// lookupBatcher).
func (rs *ReaderSet) Product(ctx context.Context, src Source, retailerID, productID string) (catalog.Product, error) {
	if src == AnyReader {
		return rs.lookups.product(ctx, retailerID, productID)
	}
	return rs.productFrom(ctx, src, retailerID, productID)
}

// Products returns up to limit live products with product_id > after, in
// byte order, stopping after the product that brings the total size of
// their attributes to maxBytes (<= 0: no bound).
func (rs *ReaderSet) Products(ctx context.Context, src Source, retailerID, after string, limit, maxBytes int) ([]catalog.Product, error) {
	var out []catalog.Product
	err := rs.read(ctx, src, func(ctx context.Context, db *pgxpool.Pool) error {
		var err error
		out, err = listProducts(ctx, db, retailerID, after, limit, maxBytes)
		return err
	})
	return out, err
}

// KnownGenerations returns the retailer's newest generation that took over
// and its newest applied one, as a reader knows them (0, 0 before any
// upload).
func (rs *ReaderSet) KnownGenerations(ctx context.Context, retailerID string) (latest, applied int64, err error) {
	err = rs.read(ctx, AnyReader, func(ctx context.Context, db *pgxpool.Pool) error {
		latest, applied = 0, 0
		err := db.QueryRow(ctx, q("storefront_generations"), retailerID).Scan(&latest, &applied)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("generations of %s: %w", retailerID, err)
	}
	return latest, applied, nil
}

// DirectoryRetailers returns, in order, the retailers (at most limit) whose
// catalog holds a live product with this id (on the control database).
func (rs *ReaderSet) DirectoryRetailers(ctx context.Context, productID string, limit int) ([]string, error) {
	var out []string
	err := rs.read(ctx, AnyReader, func(ctx context.Context, db *pgxpool.Pool) error {
		var err error
		out, err = directoryRetailers(ctx, db, productID, limit)
		return err
	})
	return out, err
}

// retailer reads a registered retailer's id and shard (on the control
// database): all the storefront needs, and all its role may read.
func (rs *ReaderSet) retailer(ctx context.Context, id string) (catalog.Retailer, error) {
	var r catalog.Retailer
	err := rs.read(ctx, AnyReader, func(ctx context.Context, db *pgxpool.Pool) error {
		err := db.QueryRow(ctx, q("retailer_shard"), id).Scan(&r.ID, &r.Shard)
		if errors.Is(err, pgx.ErrNoRows) {
			return catalog.Errorf(catalog.ErrNotFound, "retailer_not_found", "retailer %q not found", id)
		}
		if err != nil {
			return fmt.Errorf("get retailer %s: %w", id, err)
		}
		return nil
	})
	return r, err
}

// read runs fn on a replica that is up and fresh, trying the next one when
// a replica does not answer, and on the writer when none is left (or when
// src asks for it).
func (rs *ReaderSet) read(ctx context.Context, src Source, fn func(context.Context, *pgxpool.Pool) error) error {
	if n := len(rs.replicas); n > 0 && src == AnyReader {
		rs.maybeProbe()
		start := int(rs.next.Add(1) % uint64(n))
		for i := 0; i < n; i++ {
			r := rs.replicas[(start+i)%n]
			if r.down.Load() || r.lagging.Load() {
				continue
			}
			err := rs.attempt(ctx, r.pool, fn)
			if err == nil || !unavailable(ctx, err) {
				rs.fromReplicas.Add(1)
				return err
			}
			rs.markDown(r, err)
		}
		rs.fallbacks.Add(1)
	}
	rs.fromWriter.Add(1)
	return rs.attempt(ctx, rs.writer, fn)
}

func (rs *ReaderSet) attempt(ctx context.Context, db *pgxpool.Pool, fn func(context.Context, *pgxpool.Pool) error) error {
	actx, cancel := context.WithTimeout(ctx, rs.o.AttemptTimeout)
	defer cancel()
	return fn(actx, db)
}

// unavailable reports whether err means the server could not answer (so the
// next one should be asked), as opposed to an answer or the caller giving up.
func unavailable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var de *catalog.Error
	if errors.As(err, &de) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			strings.HasPrefix(pgErr.Code, "53"), // insufficient resources (too many connections)
			strings.HasPrefix(pgErr.Code, "57"), // shutting down, starting up, statement timeout
			pgErr.Code == "40001",               // canceled by a conflict with recovery (hot standby)
			pgErr.Code == "42P01",               // table missing: a replica behind the migrations
			pgErr.Code == "3D000":               // database missing: likewise
			return true
		}
		return false
	}
	// Anything else is the connection (refused, reset, timed out, closed) or
	// a reply that could not be read: the next server is asked.
	return true
}

// notReplayedYet reports whether err names a database or table that a
// replica has not replayed yet: it answers, it is only behind.
func notReplayedYet(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "3D000" || pgErr.Code == "42P01")
}

func (rs *ReaderSet) markDown(r *replica, err error) {
	n := r.failures.Add(1)
	backoff := rs.o.ProbeInterval << min(n-1, 5)
	backoff = min(backoff, 30*time.Second)
	r.retryAt.Store(time.Now().Add(backoff).UnixNano())
	if !r.down.Swap(true) {
		rs.o.Logger.Warn("read replica down; reads go to the next replica or the writer",
			"database", rs.name, "replica", r.addr, "retry_in_ms", backoff.Milliseconds(), "err", err)
	}
}

func (rs *ReaderSet) markUp(r *replica) {
	r.failures.Store(0)
	if r.down.Swap(false) {
		rs.o.Logger.Info("read replica answers again", "database", rs.name, "replica", r.addr)
	}
}

// maybeProbe starts a probe in the background when the last one is older
// than ProbeInterval. Probes ride on reads: an idle process queries nothing.
func (rs *ReaderSet) maybeProbe() {
	now := time.Now().UnixNano()
	if now-rs.lastProbe.Load() < int64(rs.o.ProbeInterval) || !rs.probing.CompareAndSwap(false, true) {
		return
	}
	rs.lastProbe.Store(now)
	go func() {
		defer rs.probing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), rs.o.ProbeInterval+rs.o.AttemptTimeout)
		defer cancel()
		rs.Probe(ctx)
	}()
}

// Probe checks the replicas now: a down replica whose backoff has passed is
// asked again, and every replica's replay position is compared with the
// writer's position of MaxLag ago, so that one further behind is skipped.
// A replica that does not report its replay position (not a streaming
// standby) is taken as fresh.
func (rs *ReaderSet) Probe(ctx context.Context) {
	if len(rs.replicas) == 0 {
		return
	}
	ref, haveRef := rs.sampleWriter(ctx)
	now := time.Now()
	for _, r := range rs.replicas {
		if r.down.Load() && now.UnixNano() < r.retryAt.Load() {
			continue
		}
		var lsn *int64
		err := rs.attempt(ctx, r.pool, func(ctx context.Context, db *pgxpool.Pool) error {
			return db.QueryRow(ctx, q("replica_lsn")).Scan(&lsn)
		})
		if err != nil && unavailable(ctx, err) {
			rs.markDown(r, err)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		rs.markUp(r)
		lagging := err == nil && haveRef && lsn != nil && *lsn < ref
		if r.lagging.Swap(lagging) != lagging {
			if lagging {
				rs.o.Logger.Warn("read replica lags beyond the staleness bound; skipped until it catches up",
					"database", rs.name, "replica", r.addr, "max_lag_ms", rs.o.MaxLag.Milliseconds(), "behind_bytes", ref-*lsn)
			} else {
				rs.o.Logger.Info("read replica caught up", "database", rs.name, "replica", r.addr)
			}
		}
	}
}

// sampleWriter records the writer's WAL position now and returns the newest
// one recorded at least MaxLag ago.
func (rs *ReaderSet) sampleWriter(ctx context.Context) (int64, bool) {
	var lsn int64
	err := rs.attempt(ctx, rs.writer, func(ctx context.Context, db *pgxpool.Pool) error {
		return db.QueryRow(ctx, q("writer_lsn")).Scan(&lsn)
	})
	now := time.Now()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if err == nil {
		rs.samples = append(rs.samples, lsnSample{at: now, lsn: lsn})
	}
	ref, have, keepFrom := int64(0), false, 0
	for i, s := range rs.samples {
		if now.Sub(s.at) >= rs.o.MaxLag {
			ref, have, keepFrom = s.lsn, true, i
		}
	}
	rs.samples = rs.samples[keepFrom:]
	return ref, have
}

// WaitReplicas waits until every replica that answers has replayed what the
// writer has written now (tests and benchmarks read their own writes with
// it); one that does not answer is marked down and not waited for.
func (rs *ReaderSet) WaitReplicas(ctx context.Context) error {
	if len(rs.replicas) == 0 {
		return nil
	}
	var target int64
	if err := rs.writer.QueryRow(ctx, q("writer_lsn")).Scan(&target); err != nil {
		return fmt.Errorf("%s: writer position: %w", rs.name, err)
	}
	for _, r := range rs.replicas {
		for !r.down.Load() {
			var lsn *int64
			err := rs.attempt(ctx, r.pool, func(ctx context.Context, db *pgxpool.Pool) error {
				return db.QueryRow(ctx, q("replica_lsn")).Scan(&lsn)
			})
			if err == nil && (lsn == nil || *lsn >= target) {
				break
			}
			if err != nil && unavailable(ctx, err) && !notReplayedYet(err) {
				rs.markDown(r, err) // a replica that does not answer is not waited for
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("%s: replica %s has not caught up: %w", rs.name, r.addr, errors.Join(ctx.Err(), err))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// ReaderStats say where a ReaderSet's reads went.
type ReaderStats struct {
	FromReplicas, FromWriter int64
	// Fallbacks counts the reads that could have gone to a replica but
	// went to the writer: every replica was down, lagging or failed.
	Fallbacks int64
	// LookupBatches counts the queries that answered several product
	// lookups at once, and BatchedLookups the lookups they answered.
	LookupBatches, BatchedLookups int64
	Replicas                      []ReplicaState
}

// ReplicaState is one replica's health as the ReaderSet sees it.
type ReplicaState struct {
	Addr          string
	Down, Lagging bool
}

// Stats returns counters of reads served by replicas and by the writer.
func (rs *ReaderSet) Stats() ReaderStats {
	st := ReaderStats{FromReplicas: rs.fromReplicas.Load(), FromWriter: rs.fromWriter.Load(), Fallbacks: rs.fallbacks.Load(),
		LookupBatches: rs.lookups.batches.Load(), BatchedLookups: rs.lookups.batched.Load()}
	for _, r := range rs.replicas {
		st.Replicas = append(st.Replicas, ReplicaState{Addr: r.addr, Down: r.down.Load(), Lagging: r.lagging.Load()})
	}
	return st
}

// listProducts is the storefront's page query, on whichever server (writer
// or replica) the caller picked. Rows past maxBytes of attributes are read
// from the connection but not kept, so a page of large products never
// holds more than about maxBytes.
func listProducts(ctx context.Context, db *pgxpool.Pool, retailerID, after string, limit, maxBytes int) ([]catalog.Product, error) {
	out := make([]catalog.Product, 0, min(limit, 1024))
	params := [][]byte{[]byte(retailerID), []byte(after), strconv.AppendInt(nil, int64(limit), 10)}
	size := 0
	err := execLookup(ctx, db, "storefront_page", params, func(vals [][]byte) error {
		if maxBytes > 0 && size >= maxBytes {
			return nil
		}
		if len(vals) != 4 || vals[0] == nil {
			return errors.New("unexpected row")
		}
		p, err := decodeLookupRow(retailerID, string(vals[0]), vals[1:])
		if err != nil {
			return err
		}
		out = append(out, p)
		size += len(p.Attributes)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list products of %s: %w", retailerID, err)
	}
	return out, nil
}

// StorefrontProductSQL is the SQL of the storefront's product lookup ($1
// retailer_id, $2 product_id): the read bench runs it straight to
// PostgreSQL as its reference.
func StorefrontProductSQL() string { return q("storefront_product") }

// StorefrontProductBatchSQL is the SQL of the storefront's lookups of
// concurrent requests in one query ($1, $2: text[] of retailer and product
// ids): the read bench's floor of the request mix runs it straight to
// PostgreSQL.
func StorefrontProductBatchSQL() string { return q("storefront_product_batch") }

// StorefrontPageSQL is the SQL of the storefront's page ($1 retailer_id,
// $2 the product_id to start after, $3 the rows to read): the read bench's
// floor of the request mix runs it straight to PostgreSQL.
func StorefrontPageSQL() string { return q("storefront_page") }

// StorefrontProductsByIDSQL is the SQL of the storefront's batch-get ($1
// retailer_id, $2 a text[] of product ids): the read bench runs it straight
// to PostgreSQL as the batch-get's floor.
func StorefrontProductsByIDSQL() string { return q("storefront_products_by_id") }
