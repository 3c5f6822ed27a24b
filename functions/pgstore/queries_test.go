package pgstore

import (
	"context"
	"io/fs"
	"strings"
	"testing"

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
