package pgstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Index rebuilds after collection (DESIGN 14; queries_reindex.sql). Random
// deletes and inserts leave the primary keys of products and
// consumer_versions about two thirds full; a rebuild brings them back to
// the fillfactor. REINDEX INDEX CONCURRENTLY takes the table's SHARE UPDATE
// EXCLUSIVE lock only (reads and writes go on; VACUUM, ANALYZE and DDL of
// that table wait), builds the new index beside the old one, waits for the
// transactions that could still use the old one, and swaps them. It cannot
// run in a transaction block, so it runs on a connection of its own, one a
// shard at a time (an advisory lock), and must be run by the tables' owner
// (PostgreSQL 15): a role that is not skips it (ErrRebuildNotOwner).

// DefaultRebuildAbove is the size over a fresh build's past which a churned
// index is rebuilt: a fresh build is ~1.0, a B-tree under random churn
// settles near 1.3.
const DefaultRebuildAbove = 1.2

// minRebuildPages: an index smaller than this (1 MiB) is never rebuilt by
// collection (what it would give back is noise).
const minRebuildPages = 128

// ErrRebuildNotOwner is what RebuildBloatedIndexes returns when the role
// may not REINDEX (PostgreSQL 15: only the owner may).
var ErrRebuildNotOwner = errors.New("index rebuild needs the tables' owner")

// IndexBloat is one churned index's size against a fresh build's.
type IndexBloat struct {
	Index      string  // the index, as regclass text
	Pages      int64   // its pages now
	FreshPages int64   // the estimated pages of a fresh build of its entries
	Ratio      float64 // Pages / FreshPages
}

// IndexBloat estimates the size of the shard's churned indexes (those of
// products and consumer_versions of at least minPages pages) against a
// fresh build of their entries. A read of the catalogs and of a sample of
// each table's pages.
func (s *Shard) IndexBloat(ctx context.Context, minPages int64) ([]IndexBloat, error) {
	rows, err := s.pool.Query(ctx, q("reindex_estimates"), minPages)
	if err != nil {
		return nil, fmt.Errorf("index sizes: %w", err)
	}
	type est struct {
		name, table          string
		cols                 []string
		pages, tuples, heapP int64
		fillfactor           int
	}
	var ests []est
	for rows.Next() {
		var e est
		if err := rows.Scan(&e.name, &e.table, &e.cols, &e.pages, &e.tuples, &e.heapP, &e.fillfactor); err != nil {
			rows.Close()
			return nil, fmt.Errorf("index sizes: %w", err)
		}
		ests = append(ests, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("index sizes: %w", err)
	}
	var out []IndexBloat
	for _, e := range ests {
		if e.tuples == 0 || len(e.cols) == 0 {
			continue
		}
		sizes := make([]string, len(e.cols))
		for i, c := range e.cols {
			sizes[i] = "pg_column_size(" + pgx.Identifier{c}.Sanitize() + ")"
		}
		pct := 100.0
		if e.heapP > 200 {
			pct = max(0.01, 200*100/float64(e.heapP))
		}
		var keyBytes *float64
		sample := fmt.Sprintf("SELECT avg(%s)::float8 FROM %s TABLESAMPLE SYSTEM (%g)", strings.Join(sizes, " + "),
			pgx.Identifier{e.table}.Sanitize(), pct)
		if err := s.pool.QueryRow(ctx, sample).Scan(&keyBytes); err != nil {
			return nil, fmt.Errorf("key sizes of %s: %w", e.name, err)
		}
		if keyBytes == nil {
			continue
		}
		fresh := freshIndexPages(e.tuples, *keyBytes, e.fillfactor)
		out = append(out, IndexBloat{Index: e.name, Pages: e.pages, FreshPages: fresh, Ratio: float64(e.pages) / float64(fresh)})
	}
	return out, nil
}

// freshIndexPages estimates the pages of a B-tree built from tuples entries
// of keyBytes of key data each at fillfactor: an 8-byte index tuple header,
// the keys, rounded up to 8, a 4-byte line pointer; 8,152 usable bytes a
// page (8 KiB less the page header and the B-tree's special space); one
// page in 100 above the leaves, and the metapage.
func freshIndexPages(tuples int64, keyBytes float64, fillfactor int) int64 {
	item := 8*math.Ceil((8+keyBytes)/8) + 4
	perPage := math.Max(1, math.Floor(8152*float64(fillfactor)/100/item))
	leaves := math.Ceil(float64(tuples) / perPage)
	return int64(leaves+math.Ceil(leaves/100)) + 1
}

// RebuildBloatedIndexes rebuilds, with REINDEX INDEX CONCURRENTLY, the
// shard's churned indexes whose size is past above (<= 0: DefaultRebuildAbove)
// times a fresh build's, after dropping what an unfinished rebuild left. It
// returns the indexes rebuilt (none when another rebuild holds the shard).
// A role that does not own the tables gets ErrRebuildNotOwner.
func (s *Shard) RebuildBloatedIndexes(ctx context.Context, above float64) ([]IndexBloat, error) {
	if above <= 0 {
		above = DefaultRebuildAbove
	}
	bloat, err := s.IndexBloat(ctx, minRebuildPages)
	if err != nil {
		return nil, err
	}
	var todo []IndexBloat
	for _, b := range bloat {
		if b.Ratio > above {
			todo = append(todo, b)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("rebuild indexes: %w", err)
	}
	// The session's settings and lock die with it: never back to the pool.
	defer func() { _ = conn.Hijack().Close(context.WithoutCancel(ctx)) }()
	var locked bool
	if err := conn.QueryRow(ctx, q("reindex_lock")).Scan(&locked); err != nil {
		return nil, fmt.Errorf("rebuild indexes: lock: %w", err)
	}
	if !locked {
		return nil, nil
	}
	// A rebuild of a large index outlasts any statement timeout of the pool.
	if _, err := conn.Exec(ctx, "SET statement_timeout = 0"); err != nil {
		return nil, fmt.Errorf("rebuild indexes: %w", err)
	}
	rows, err := conn.Query(ctx, q("reindex_leftovers"))
	if err != nil {
		return nil, fmt.Errorf("rebuild indexes: leftovers: %w", err)
	}
	leftovers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("rebuild indexes: leftovers: %w", err)
	}
	for _, l := range leftovers {
		if _, err := conn.Exec(ctx, "DROP INDEX CONCURRENTLY IF EXISTS "+l); err != nil {
			return nil, rebuildError("drop unfinished index "+l, err)
		}
	}
	var done []IndexBloat
	for _, b := range todo {
		if _, err := conn.Exec(ctx, "REINDEX INDEX CONCURRENTLY "+b.Index); err != nil {
			return done, rebuildError("reindex "+b.Index, err)
		}
		done = append(done, b)
	}
	return done, nil
}

func rebuildError(what string, err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		return fmt.Errorf("%s: %w: %w", what, ErrRebuildNotOwner, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
