package pgstore

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/scripts/local/pgserver"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// Every named query of queries.sql prepares against the migrated database
// it runs on (control or shard): a wrong name, table or column fails here,
// not at run time.
func TestEveryNamedQueryPrepares(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	prefix := testenv.Name("queries")
	pools := map[string]*pgxpool.Pool{
		"control": migratedDatabase(t, prefix+"control", catalogsql.Control),
		"shard":   migratedDatabase(t, prefix+"shard", catalogsql.Shard),
	}
	if len(queries) < 30 {
		t.Fatalf("only %d named queries parsed from queries.sql", len(queries))
	}
	for name, sql := range queries {
		// Prepared on either database: each query belongs to one of them.
		var errs []string
		ok := false
		for db, pool := range pools {
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if db == "shard" {
				// The apply's statements read the session's staging table.
				if _, err := conn.Exec(ctx, q("create_apply_stage")); err != nil {
					t.Fatal(err)
				}
			}
			_, err = conn.Conn().Prepare(ctx, "", sql)
			conn.Release()
			if err == nil {
				ok = true
				break
			}
			errs = append(errs, db+": "+err.Error())
		}
		if !ok {
			t.Errorf("query %q prepares on no database: %s", name, strings.Join(errs, "; "))
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("q of an unknown name did not panic")
		}
	}()
	q("no such query")
}

// migratedDatabase is a new database of the test server with migrations
// applied, and a pool on it.
func migratedDatabase(t *testing.T, name string, migrations fs.FS) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	dsn, err := pgserver.CreateDatabase(ctx, testenv.Postgres(t), name)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := Migrate(ctx, pool, migrations); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pool, migrations); err != nil {
		t.Fatalf("migrations are idempotent: the second run failed: %v", err)
	}
	return pool
}

// The migration runner refuses, before it applies anything, a migration
// that would silently never be applied: two files with one number, a
// number recorded under another name, a file numbered below the newest
// applied one that was never applied.
func TestMigrateRefusesWhatItWouldSkip(t *testing.T) {
	t.Parallel()
	file := func(body string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(body)} }
	pool := migratedDatabase(t, testenv.Name("mig"), fstest.MapFS{
		"a/0001_one.sql":   file(`CREATE TABLE one (x int)`),
		"a/0003_three.sql": file(`CREATE TABLE three (x int)`),
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"one number twice", fstest.MapFS{
			"a/0001_one.sql": file(`CREATE TABLE one (x int)`), "b/0003_three.sql": file(`CREATE TABLE three (x int)`),
			"b/0004_four.sql": file(`SELECT 1`), "c/0004_other.sql": file(`SELECT 1`)}, "have one number, 4"},
		{"a number applied under another name", fstest.MapFS{
			"a/0001_one.sql": file(`CREATE TABLE one (x int)`), "a/0003_renamed.sql": file(`SELECT 1`)}, "number 3 was applied as a/0003_three.sql"},
		{"added out of order", fstest.MapFS{
			"a/0001_one.sql": file(`CREATE TABLE one (x int)`), "a/0002_two.sql": file(`CREATE TABLE two (x int)`),
			"a/0003_three.sql": file(`CREATE TABLE three (x int)`)}, "older than the newest applied (3)"},
	} {
		err := Migrate(ctx, pool, tc.files)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	var tables int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE tablename IN ('two')`).Scan(&tables); err != nil || tables != 0 {
		t.Errorf("a refused run applied something: %d tables, %v", tables, err)
	}
	// What is new and numbered after the newest goes.
	if err := Migrate(ctx, pool, fstest.MapFS{"a/0001_one.sql": file(`CREATE TABLE one (x int)`),
		"a/0003_three.sql": file(`CREATE TABLE three (x int)`), "a/0004_four.sql": file(`CREATE TABLE four (x int)`)}); err != nil {
		t.Fatal(err)
	}
}
