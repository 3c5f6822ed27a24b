package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// Stores are the control database and every shard, with the routing of a
// retailer to its shard.
type Stores struct {
	Control *Control
	Shards  []*Shard
	// ControlReaders and ShardReaders (shard i at i) route the storefront's
	// reads to replicas; without AttachReaders they read from the writers.
	ControlReaders *ReaderSet
	ShardReaders   []*ReaderSet

	// The routes of retailers to shards, each kept for RouteTTL (a move
	// changes a retailer's shard, and waits RouteTTL before the new shard
	// takes writes: move.go):
	retailers sync.Map // retailer id -> route (whole record)
	// shardOfRetailer: retailer id -> route (shard only), for the roles
	// that may read nothing else of the registry (RetailerShard)
	shardOfRetailer sync.Map
	readShard       sync.Map // retailer id -> route (shard only), for the storefront (ReadersFor)

	// Moves are the settings of the moves this process runs (RunMoves).
	Moves MoveOptions
}

// RouteTTL is how long a process keeps a retailer's route to its shard
// before it reads the registry again. A move waits longer than that
// between changing the route and letting the new shard take writes, so
// that no process reads the old shard while the new one moves on.
const RouteTTL = 2 * time.Second

// route is a cached answer of the registry.
type route struct {
	r  catalog.Retailer
	at time.Time
}

func storeRoute(m *sync.Map, r catalog.Retailer) { m.Store(r.ID, &route{r: r, at: time.Now()}) }

func loadRoute(m *sync.Map, retailerID string) (catalog.Retailer, bool) {
	v, ok := m.Load(retailerID)
	if !ok {
		return catalog.Retailer{}, false
	}
	rt := v.(*route)
	if time.Since(rt.at) >= RouteTTL {
		m.CompareAndDelete(retailerID, v)
		return catalog.Retailer{}, false
	}
	return rt.r, true
}

// forgetRoute drops every cached route of a retailer (its shard changed).
func (s *Stores) forgetRoute(retailerID string) {
	s.retailers.Delete(retailerID)
	s.shardOfRetailer.Delete(retailerID)
	s.readShard.Delete(retailerID)
}

// PoolOptions size the connection pools of one process.
type PoolOptions struct {
	MaxConns int32 // per database; Lambda wants a handful, the local stack more
	// Password, when set, is asked for the current password before every new
	// connection of the pool opened on dsn (and of its readers), so that a
	// rotated secret is picked up without a restart; "" keeps the DSN's.
	Password func(ctx context.Context, dsn string) (string, error)
	// AuthToken, when set, is asked for the password of every new
	// connection of the pools (readers included), given the host, port and
	// user that connection uses: an IAM database authentication token is
	// signed for exactly those. It takes precedence over Password.
	AuthToken func(ctx context.Context, host string, port uint16, user string) (string, error)
}

// Open connects to the control database and the shards (shard i is dsns[i]).
func Open(ctx context.Context, controlDSN string, shardDSNs []string, o PoolOptions) (*Stores, error) {
	if len(shardDSNs) == 0 {
		return nil, errors.New("open stores: no shard databases configured")
	}
	control, err := openPool(ctx, controlDSN, o)
	if err != nil {
		return nil, fmt.Errorf("open control database: %w", err)
	}
	s := &Stores{Control: NewControl(control)}
	for i, dsn := range shardDSNs {
		pool, err := openPool(ctx, dsn, o)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("open shard %d: %w", i, err)
		}
		s.Shards = append(s.Shards, NewShard(pool))
	}
	if err := s.AttachReaders(nil, nil, ReaderOptions{}); err != nil {
		s.Close()
		return nil, fmt.Errorf("open stores: %w", err)
	}
	return s, nil
}

// AttachReaders opens pools on the read replicas of the control database
// (controlReaders) and of every shard (shardReaders[i] for shard i; a
// missing or empty entry leaves that shard's reads on its writer). Each
// reader is a DSN or URL, or "host[:port]" taking everything else from the
// writer's DSN. No connection is made before the first read.
func (s *Stores) AttachReaders(controlReaders []string, shardReaders [][]string, o ReaderOptions) error {
	if len(shardReaders) > len(s.Shards) {
		return fmt.Errorf("attach readers: readers for %d shards, but %d shards are configured", len(shardReaders), len(s.Shards))
	}
	control, err := openReaderSet("control", s.Control.pool, controlReaders, o)
	if err != nil {
		return fmt.Errorf("attach readers: %w", err)
	}
	sets := make([]*ReaderSet, len(s.Shards))
	for i, sh := range s.Shards {
		var readers []string
		if i < len(shardReaders) {
			readers = shardReaders[i]
		}
		if sets[i], err = openReaderSet(fmt.Sprintf("shard %d", i), sh.pool, readers, o); err != nil {
			control.Close()
			for _, rs := range sets[:i] {
				rs.Close()
			}
			return fmt.Errorf("attach readers: %w", err)
		}
	}
	old := append([]*ReaderSet{s.ControlReaders}, s.ShardReaders...)
	s.ControlReaders, s.ShardReaders = control, sets
	for _, rs := range old {
		if rs != nil {
			rs.Close()
		}
	}
	return nil
}

// ReadersFor returns the reader set of a retailer's shard, looking the
// retailer up (again after RouteTTL) through the control database's readers;
// catalog.ErrNotFound when unknown.
func (s *Stores) ReadersFor(ctx context.Context, retailerID string) (*ReaderSet, error) {
	if r, ok := loadRoute(&s.readShard, retailerID); ok {
		return s.ShardReaders[r.Shard], nil
	}
	// Only the id and shard are read (the read role may see no more), so
	// this cache is not the one ForRetailer fills with whole records.
	r, err := s.ControlReaders.retailer(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	if r.Shard < 0 || r.Shard >= len(s.Shards) {
		return nil, fmt.Errorf("retailer %s is on shard %d, but %d shards are configured", retailerID, r.Shard, len(s.Shards))
	}
	storeRoute(&s.readShard, catalog.Retailer{ID: retailerID, Shard: r.Shard})
	return s.ShardReaders[r.Shard], nil
}

// WaitReplicas waits until every replica that is up has replayed what its
// writer has written now.
func (s *Stores) WaitReplicas(ctx context.Context) error {
	for _, rs := range append([]*ReaderSet{s.ControlReaders}, s.ShardReaders...) {
		if err := rs.WaitReplicas(ctx); err != nil {
			return err
		}
	}
	return nil
}

func openPool(ctx context.Context, dsn string, o PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
	}
	switch {
	case o.AuthToken != nil:
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			token, err := o.AuthToken(ctx, cc.Host, cc.Port, cc.User)
			if err != nil {
				return fmt.Errorf("database auth token: %w", err)
			}
			cc.Password = token
			return nil
		}
	case o.Password != nil:
		cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			pw, err := o.Password(ctx, dsn)
			if err != nil {
				return fmt.Errorf("current database password: %w", err)
			}
			if pw != "" {
				cc.Password = pw
			}
			return nil
		}
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["statement_timeout"]; !ok {
		cfg.ConnConfig.RuntimeParams["statement_timeout"] = "60000"
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// Migrate applies the control and shard migrations.
func (s *Stores) Migrate(ctx context.Context) error {
	if err := Migrate(ctx, s.Control.pool, catalogsql.Control); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	for i, sh := range s.Shards {
		if err := Migrate(ctx, sh.pool, catalogsql.Shard); err != nil {
			return fmt.Errorf("shard %d: %w", i, err)
		}
	}
	return nil
}

// Close closes every pool.
func (s *Stores) Close() {
	if s.ControlReaders != nil {
		s.ControlReaders.Close()
	}
	for _, rs := range s.ShardReaders {
		rs.Close()
	}
	if s.Control != nil {
		s.Control.pool.Close()
	}
	for _, sh := range s.Shards {
		sh.pool.Close()
	}
}

// ForRetailer returns a registered retailer and its shard; catalog.ErrNotFound when unknown.
func (s *Stores) ForRetailer(ctx context.Context, retailerID string) (catalog.Retailer, *Shard, error) {
	if r, ok := loadRoute(&s.retailers, retailerID); ok {
		return r, s.Shards[r.Shard], nil
	}
	r, err := s.Control.Retailer(ctx, retailerID)
	if err != nil {
		return r, nil, err
	}
	if r.Shard < 0 || r.Shard >= len(s.Shards) {
		return r, nil, fmt.Errorf("retailer %s is on shard %d, but %d shards are configured", retailerID, r.Shard, len(s.Shards))
	}
	storeRoute(&s.retailers, r)
	return r, s.Shards[r.Shard], nil
}

// RetailerByTokenHash returns the retailer whose token has this hash, or "" when none.
func (c *Control) RetailerByTokenHash(ctx context.Context, hash []byte) (string, error) {
	var id string
	err := c.pool.QueryRow(ctx, q("retailer_by_token"), hash).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("look up token: %w", err)
	}
	return id, nil
}
