// Package pgstore holds the PostgreSQL adapters: the control store (retailer
// registry) and the shard store (generations, fenced catalog writes, chunk
// accounting, outbox), plus the migration runner. Queries live in the
// queries*.sql files (one "-- name:" block each).
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
// callers are serialized by an advisory lock. It refuses, before applying
// anything, what would silently never be applied: two files with one
// number, a file whose number is recorded under another name, and a file
// numbered below the newest applied one that was never applied (a
// migration added out of order: renumber it after the newest).
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
	for i := 1; i < len(list); i++ {
		if list[i].version == list[i-1].version {
			return fmt.Errorf("migrations %s and %s have one number, %d: renumber one", list[i-1].name, list[i].name, list[i].version)
		}
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, q("migrate_lock")); err != nil {
		return fmt.Errorf("migrate lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), q("migrate_unlock"))
	if _, err := conn.Exec(ctx, q("migrate_table")); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	applied := map[int]string{}
	newest := 0
	rows, err := conn.Query(ctx, q("migrate_applied"))
	if err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		var name string
		if err := rows.Scan(&v, &name); err != nil {
			rows.Close()
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied[v], newest = name, max(newest, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read schema_migrations: %w", err)
	}
	for _, m := range list {
		if name, ok := applied[m.version]; ok && name != m.name {
			return fmt.Errorf("migration %s: number %d was applied as %s: renumber it", m.name, m.version, name)
		}
		if _, ok := applied[m.version]; !ok && m.version < newest {
			return fmt.Errorf("migration %s was never applied, and %d is older than the newest applied (%d): renumber it after %d",
				m.name, m.version, newest, newest)
		}
	}
	for _, m := range list {
		if _, done := applied[m.version]; done {
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
		if _, err := tx.Exec(ctx, q("migrate_record"), m.version, m.name); err != nil {
			tx.Rollback(ctx)
			return fmt.Errorf("record migration %s: %w", m.name, err)
		}
		if err := tx.Commit(ctx); err != nil {
			return fmt.Errorf("commit migration %s: %w", m.name, err)
		}
	}
	return nil
}
