package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
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
		&r.ID, &r.Shard, &r.TokenHash, &r.Hold.DeleteFraction, &r.Hold.UpdateFraction, &r.Hold.MinProducts,
		&r.CreatedAt, &r.OffboardedAt, &r.Hold.DropFraction)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, catalog.Errorf(catalog.ErrNotFound, "retailer_not_found", "retailer %q not found", id)
	}
	if err != nil {
		return r, fmt.Errorf("get retailer %s: %w", id, err)
	}
	return r, nil
}

// retailerGone is the error of a change to a retailer that is unknown or
// offboarded; otherwise, of a token that was replaced meanwhile.
func (c *Control) retailerGone(ctx context.Context, id string) error {
	r, err := c.Retailer(ctx, id)
	if err != nil {
		return err
	}
	if r.OffboardedAt != nil {
		return catalog.Offboarded(id)
	}
	return catalog.Errorf(catalog.ErrConflict, "token_rotated",
		"the token of retailer %q was replaced by another rotation meanwhile; this one changed nothing: use the newest token", id)
}

// SetHoldPolicy sets a retailer's hold thresholds (I8); catalog.ErrNotFound
// when unknown, catalog.ErrConflict when offboarded.
func (c *Control) SetHoldPolicy(ctx context.Context, id string, p catalog.HoldPolicy) error {
	tag, err := c.pool.Exec(ctx, q("set_hold_policy"), id, p.DeleteFraction, p.UpdateFraction, p.DropFraction)
	if err != nil {
		return fmt.Errorf("set hold policy of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return c.retailerGone(ctx, id)
	}
	return nil
}

// SetToken replaces a retailer's token hash old by hash, if old is still
// the stored one: a compare and swap in one statement, so that of
// concurrent rotations of the same token exactly one succeeds (its token
// works, the old one stops working at once) and the others are
// catalog.ErrConflict token_rotated, changing nothing. catalog.ErrNotFound
// when unknown, catalog.ErrConflict retailer_offboarded when offboarded.
func (c *Control) SetToken(ctx context.Context, id string, old, hash []byte) error {
	tag, err := c.pool.Exec(ctx, q("set_token"), id, old, hash)
	if err != nil {
		return fmt.Errorf("set token of %s: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return c.retailerGone(ctx, id)
	}
	return nil
}

// Offboard revokes a retailer's token (revokedHash is the hash of a token
// nobody holds) and marks it offboarded; offboarding again changes nothing
// (the first time and the first revoked hash stay). catalog.ErrNotFound
// when unknown.
func (c *Control) Offboard(ctx context.Context, id string, revokedHash []byte) error {
	var at time.Time
	err := c.pool.QueryRow(ctx, q("offboard_retailer"), id, revokedHash).Scan(&at)
	if errors.Is(err, pgx.ErrNoRows) {
		return catalog.Errorf(catalog.ErrNotFound, "retailer_not_found", "retailer %q not found", id)
	}
	if err != nil {
		return fmt.Errorf("offboard %s: %w", id, err)
	}
	return nil
}
