package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/catalog"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// Stores are the control database and every shard, with the routing of a
// retailer to its shard.
type Stores struct {
	Control *Control
	Shards  []*Shard

	retailers sync.Map // retailer id -> catalog.Retailer (a retailer never moves shard)
}

// PoolOptions size the connection pools of one process.
type PoolOptions struct {
	MaxConns int32 // per database; Lambda wants a handful, the local stack more
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
	return s, nil
}

func openPool(ctx context.Context, dsn string, o PoolOptions) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if o.MaxConns > 0 {
		cfg.MaxConns = o.MaxConns
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
	if s.Control != nil {
		s.Control.pool.Close()
	}
	for _, sh := range s.Shards {
		sh.pool.Close()
	}
}

// ForRetailer returns a registered retailer and its shard; catalog.ErrNotFound when unknown.
func (s *Stores) ForRetailer(ctx context.Context, retailerID string) (catalog.Retailer, *Shard, error) {
	if r, ok := s.retailers.Load(retailerID); ok {
		rr := r.(catalog.Retailer)
		return rr, s.Shards[rr.Shard], nil
	}
	r, err := s.Control.Retailer(ctx, retailerID)
	if err != nil {
		return r, nil, err
	}
	if r.Shard < 0 || r.Shard >= len(s.Shards) {
		return r, nil, fmt.Errorf("retailer %s is on shard %d, but %d shards are configured", retailerID, r.Shard, len(s.Shards))
	}
	s.retailers.Store(retailerID, r)
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
