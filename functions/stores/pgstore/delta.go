package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// ReserveDelta reserves the retailer's next generation as a delta upload
// (DESIGN 13: mode delta, its file laid over the catalog the generations
// before it leave), as ReserveGeneration reserves a full one: same limit,
// same offboarding check, and older slots awaiting their upload are
// superseded by it.
func (s *Shard) ReserveDelta(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	return s.reserve(ctx, retailerID, format, expires, perHour, "insert_delta_generation")
}

// generationSource reads where gen's content comes from: its mode and a
// rollback's source generation.
func generationSource(ctx context.Context, tx pgx.Tx, retailerID string, gen int64) (mode string, source int64, err error) {
	err = tx.QueryRow(ctx, q("generation_mode"), retailerID, gen).Scan(&mode, &source)
	return mode, source, err
}

// deltaWaitsFor returns the newest older generation that is not final
// when gen is a delta (0: none, or gen is no delta): a delta applies on
// top of the catalog the generations before it leave, so it waits for
// each of them (DESIGN 13), a held one included.
func deltaWaitsFor(ctx context.Context, tx pgx.Tx, retailerID string, gen int64, mode string) (int64, error) {
	if mode != catalog.ModeDelta {
		return 0, nil
	}
	var older int64
	err := tx.QueryRow(ctx, q("older_unfinished"), retailerID, gen).Scan(&older)
	return older, err
}

// WaitingDelta returns the oldest delta of the retailer that was received
// and waits while every older generation is final now (0: none): its diff
// job is the caller's to send, so that a waiting delta never stays
// received once the generation it waited for ends (I10).
func (s *Shard) WaitingDelta(ctx context.Context, retailerID string) (int64, error) {
	var gen int64
	if err := s.pool.QueryRow(ctx, q("waiting_delta"), retailerID).Scan(&gen); err != nil {
		return 0, fmt.Errorf("waiting delta of %s: %w", retailerID, err)
	}
	return gen, nil
}

// maxChainLinks bounds a chain: a catalog laid from more deltas than this
// since its last full snapshot is refused rather than read for ever.
const maxChainLinks = 10000

// Chain returns the objects whose merge is generation gen's catalog,
// oldest first (DESIGN 13): the newest full snapshot at or before it (a
// rollback stands for its source's catalog; none: the empty catalog), then
// every delta applied on top of it up to gen. gen 0 is the empty catalog
// (no link).
func (s *Shard) Chain(ctx context.Context, retailerID string, gen int64) ([]catalog.ChainLink, error) {
	var links []catalog.ChainLink
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		links, err = chainTx(ctx, tx, retailerID, gen)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("chain of %s/%d: %w", retailerID, gen, err)
	}
	return links, nil
}

func chainTx(ctx context.Context, tx pgx.Tx, retailerID string, gen int64) ([]catalog.ChainLink, error) {
	var links []catalog.ChainLink
	for steps := 0; gen > 0; steps++ {
		if steps > maxChainLinks {
			return nil, fmt.Errorf("over %d generations since the last full snapshot", maxChainLinks)
		}
		l := catalog.ChainLink{Generation: gen}
		var source int64
		var offboarding bool
		err := tx.QueryRow(ctx, q("chain_link"), retailerID, gen).Scan(&l.Mode, &l.Format, &l.ObjectKey, &l.ETag, &source, &offboarding)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("generation %d: %w", gen, catalog.ErrNotFound)
		}
		if err != nil {
			return nil, err
		}
		switch {
		case offboarding:
			l.Mode, l.ObjectKey = catalog.ModeFull, ""
			links = append(links, l)
			gen = 0
		case l.Mode == catalog.ModeRollback:
			gen = source // its catalog is its source's
		case l.Mode == catalog.ModeDelta:
			links = append(links, l)
			if err := tx.QueryRow(ctx, q("applied_before"), retailerID, gen).Scan(&gen); err != nil {
				return nil, err
			}
		default:
			links = append(links, l)
			gen = 0
		}
	}
	slices.Reverse(links)
	return links, nil
}

// chainKeys are the objects of a chain.
func chainKeys(links []catalog.ChainLink) []string {
	var out []string
	for _, l := range links {
		if l.ObjectKey != "" {
			out = append(out, l.ObjectKey)
		}
	}
	return out
}

// CurrentProducts returns the live products among ids (absent and deleted
// ones are left out): what a delta's diff merges its rows into.
func (s *Shard) CurrentProducts(ctx context.Context, retailerID string, ids []string) ([]catalog.StoredProduct, error) {
	rows, err := s.pool.Query(ctx, q("current_products"), retailerID, ids)
	if err != nil {
		return nil, fmt.Errorf("current products of %s: %w", retailerID, err)
	}
	defer rows.Close()
	var out []catalog.StoredProduct
	for rows.Next() {
		var p catalog.StoredProduct
		var attrs string
		var hash []byte
		if err := rows.Scan(&p.ProductID, &attrs, &hash); err != nil {
			return nil, fmt.Errorf("current products of %s: %w", retailerID, err)
		}
		p.Attributes = []byte(attrs)
		copy(p.Hash[:], hash)
		out = append(out, p)
	}
	return out, rows.Err()
}

// ReserveDelta is Shard.ReserveDelta on the retailer's shard.
func (s *Stores) ReserveDelta(ctx context.Context, retailerID, format string, expires time.Time, perHour int) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	gen, err := sh.ReserveDelta(ctx, retailerID, format, expires, perHour)
	return gen, movingError(err) // 429 retailer_moving while it switches shards, as any reservation
}

// WaitingDelta is Shard.WaitingDelta on the retailer's shard.
func (s *Stores) WaitingDelta(ctx context.Context, retailerID string) (int64, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return 0, err
	}
	return sh.WaitingDelta(ctx, retailerID)
}

// Chain is Shard.Chain on the retailer's shard.
func (s *Stores) Chain(ctx context.Context, retailerID string, gen int64) ([]catalog.ChainLink, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.Chain(ctx, retailerID, gen)
}

// CurrentProducts is Shard.CurrentProducts on the retailer's shard.
func (s *Stores) CurrentProducts(ctx context.Context, retailerID string, ids []string) ([]catalog.StoredProduct, error) {
	sh, err := s.shardOf(ctx, retailerID)
	if err != nil {
		return nil, err
	}
	return sh.CurrentProducts(ctx, retailerID, ids)
}
