// Package pgstore holds the PostgreSQL adapters: the control store (retailer
// registry) and the shard store (generations, fenced catalog writes, chunk
// accounting, outbox), plus the migration runner. Queries live in queries.sql.
package pgstore

import (
	"context"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Migrate applies, in order and once each, the numbered NNNN_name.sql files of
// migrations to the database, recording them in schema_migrations. Concurrent
// callers are serialized by an advisory lock.
func Migrate(ctx context.Context, pool *pgxpool.Pool, migrations fs.FS) error {
	files, err := fs.Glob(migrations, "*/*.sql")
	if err != nil {
		return fmt.Errorf("list migrations: %w", err)
	}
	type migration struct {
		version int
		name    string
	}
	var list []migration
	for _, f := range files {
		base := f[strings.LastIndex(f, "/")+1:]
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return fmt.Errorf("migration %s: name must start with a number", f)
		}
		list = append(list, migration{v, f})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].version < list[j].version })

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7261001)`); err != nil {
		return fmt.Errorf("migrate lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(7261001)`)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	for _, m := range list {
		var done bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if done {
			continue
		}
		body, err := fs.ReadFile(migrations, m.name)
		if err != nil {
			return fmt.Errorf("read migration %s: %w", m.name, err)
		}
		tx, err := conn.Begin(ctx)
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit migration %s: %w", m.name, err)
		}
	}
	return nil
}
