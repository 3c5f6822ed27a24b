package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/catalog"
)

// Control is the control database: the retailer registry.
type Control struct {
	pool *pgxpool.Pool
}

// NewControl wraps a pool on the control database.
func NewControl(pool *pgxpool.Pool) *Control { return &Control{pool: pool} }

// Pool is the underlying pool.
func (c *Control) Pool() *pgxpool.Pool { return c.pool }

// CreateRetailer registers a retailer; catalog.ErrConflict when it exists.
func (c *Control) CreateRetailer(ctx context.Context, r catalog.Retailer) error {
	tag, err := c.pool.Exec(ctx, q("create_retailer"), r.ID, r.Shard, r.TokenHash)
	if err != nil {
		return fmt.Errorf("create retailer %s: %w", r.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return catalog.Errorf(catalog.ErrConflict, "retailer_exists", "retailer %q already exists", r.ID)
	}
	return nil
}

// Retailer returns a registered retailer; catalog.ErrNotFound when unknown.
func (c *Control) Retailer(ctx context.Context, id string) (catalog.Retailer, error) {
	var r catalog.Retailer
	err := c.pool.QueryRow(ctx, q("get_retailer"), id).Scan(
		&r.ID, &r.Shard, &r.TokenHash, &r.Hold.DeleteFraction, &r.Hold.MinProducts, &r.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, catalog.Errorf(catalog.ErrNotFound, "retailer_not_found", "retailer %q not found", id)
	}
	if err != nil {
		return r, fmt.Errorf("get retailer %s: %w", id, err)
	}
	return r, nil
}
