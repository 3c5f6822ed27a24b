package pgstore

import (
	"context"
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
	server := testenv.Postgres(t)
	prefix := testenv.Name("queries")
	pools := map[string]*pgxpool.Pool{}
	for _, db := range []string{"control", "shard"} {
		dsn, err := pgserver.CreateDatabase(ctx, server, prefix+db)
		if err != nil {
			t.Fatal(err)
		}
		pool, err := pgxpool.New(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		pools[db] = pool
	}
	if err := Migrate(ctx, pools["control"], catalogsql.Control); err != nil {
		t.Fatal(err)
	}
	if err := Migrate(ctx, pools["shard"], catalogsql.Shard); err != nil {
		t.Fatal(err)
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
