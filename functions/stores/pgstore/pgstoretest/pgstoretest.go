// Package pgstoretest gives each test migrated PostgreSQL databases of its
// own (a control database and its shards) on the test server of testenv, so
// that the handlers' tests run on the one store implementation, pgstore, as
// the functions do in production.
//
// The migrations run once per server, into template databases named after
// a hash of the migration files (a changed migration makes new templates);
// processes sharing a server (go run ./scripts/local test) share them, the
// first building them under an advisory lock. A test's databases are copies
// of the templates (CREATE DATABASE ... TEMPLATE), emptied at the test's
// cleanup (every row deleted, every sequence restarted: as new) and handed
// to the next test of the process; when its tests are over (testenv.Main)
// the process leaves them, renamed, to the next process on the server.
// Copying a template costs ~90 ms a database here (its 8 MB go through the
// WAL) and dropping one up to ~0.8 s (a checkpoint), emptying one ~2 ms: a
// run copies only as many databases as its tests use at once.
//
// A package whose tests use it must run them through testenv.Main.
package pgstoretest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// Option changes what New and Databases make.
type Option func(*options)

type options struct {
	shards int
}

// Shards makes n shard databases [1].
func Shards(n int) Option { return func(o *options) { o.shards = n } }

// New returns stores on a control database and shard databases (1 unless
// Shards says otherwise) of the test's own, migrated and empty: no
// retailer. At the test's cleanup the databases are emptied (through the
// stores' pools) and the stores closed.
//
// A call costs ~19 ms with one shard and ~11-14 ms more per further shard
// on the 2-core test machine at a load average of 3 (~29 ms and ~10-16 ms
// at 5-7; BenchmarkNew: the stores opened, a first query on each
// database, the databases emptied, the stores closed). The first calls of
// a process copy the templates (~90 ms a database) or take the databases
// an earlier process left; the first call on a new server builds the
// templates (~1.5 s).
func New(t testing.TB, opts ...Option) *pgstore.Stores {
	t.Helper()
	l := reserve(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, l.urls[0], l.urls[1:], pgstore.PoolOptions{MaxConns: 8})
	if err != nil {
		t.Fatalf("pgstoretest: open stores: %v", err)
	}
	t.Cleanup(func() { // before the lease's: cleanups run last in, first out
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		pools := []*pgxpool.Pool{s.Control.Pool()}
		for _, sh := range s.Shards {
			pools = append(pools, sh.Pool())
		}
		for i, pool := range pools {
			l.emptied[i] = l.srv.emptyThrough(ctx, l.kinds[i], pool) == nil // else the lease empties it
		}
		s.Close()
	})
	return s
}

// Databases returns the URLs of a migrated, empty control database and of
// shard databases (1 unless Shards says otherwise) of the test's own, for a
// test that connects itself (the superuser "postgres"). They are emptied at
// the test's cleanup, after what the test registered later (its pools'
// Close); a connection still open to them then is ended.
func Databases(t testing.TB, opts ...Option) (control string, shards []string) {
	t.Helper()
	l := reserve(t, opts)
	return l.urls[0], l.urls[1:]
}

// lease is the databases of one call, given back at the test's cleanup.
type lease struct {
	srv     *server
	kinds   []kind
	names   []string
	urls    []string
	emptied []bool // by the stores of New, before the lease ends
}

func reserve(t testing.TB, opts []Option) *lease {
	t.Helper()
	o := options{shards: 1}
	for _, opt := range opts {
		opt(&o)
	}
	if o.shards < 1 {
		t.Fatalf("pgstoretest: %d shards", o.shards)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := serverOf(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatalf("pgstoretest: %v", err)
	}
	l := &lease{srv: srv, kinds: []kind{controlDB}}
	for range o.shards {
		l.kinds = append(l.kinds, shardDB)
	}
	l.emptied = make([]bool, len(l.kinds))
	t.Cleanup(func() {
		for i, name := range l.names {
			srv.give(l.kinds[i], name, l.emptied[i])
		}
	})
	for _, k := range l.kinds {
		name, err := srv.take(ctx, k)
		if err != nil {
			t.Fatalf("pgstoretest: %v", err)
		}
		l.names = append(l.names, name)
		l.urls = append(l.urls, srv.url(name))
	}
	return l
}

// kind is what a database is: a control database or a shard.
type kind int

const (
	controlDB kind = iota
	shardDB
)

// server is a test server with its templates built, and the databases this
// process copied from them that no test uses now.
type server struct {
	base      *url.URL      // a URL of the server (its "postgres" database)
	admin     *pgxpool.Pool // on the "postgres" database: creates and drops databases
	templates [2]string     // by kind
	log       func(format string, args ...any)

	mu        sync.Mutex
	emptySQLs [2]string   // by kind: emptySQL
	free      [2][]string // by kind
	mine      []string    // every database the process took
}

func (s *server) url(database string) string {
	u := *s.base
	u.Path = "/" + database
	return u.String()
}

// take returns a free database of kind k: one this process freed, else one
// another process left free on the server, else a new copy of the template.
func (s *server) take(ctx context.Context, k kind) (string, error) {
	s.mu.Lock()
	if n := len(s.free[k]); n > 0 {
		name := s.free[k][n-1]
		s.free[k] = s.free[k][:n-1]
		s.mu.Unlock()
		return name, nil
	}
	s.mu.Unlock()
	name := testenv.Name("t") + kindNames[k]
	claimed, err := s.claim(ctx, k, name)
	if err != nil {
		return "", err
	}
	if !claimed {
		if err := s.copyTemplate(ctx, k, name); err != nil {
			return "", fmt.Errorf("create database %s: %w", name, err)
		}
	}
	s.mu.Lock()
	s.mine = append(s.mine, name)
	s.mu.Unlock()
	return name, nil
}

var kindNames = [2]string{"control", "shard"}

// copyTemplate creates database name as a copy of the template of kind k,
// with what a copy does not take of the template: its privileges on the
// database itself (the migrations grant CONNECT and TEMPORARY to the
// function roles and revoke PUBLIC's). Its commits do not wait for the
// disk (synchronous_commit off): a test server that crashes loses its
// tests anyway, and what a commit makes visible is the same.
func (s *server) copyTemplate(ctx context.Context, k kind, name string) error {
	db := pgx.Identifier{name}.Sanitize()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+db+" TEMPLATE "+pgx.Identifier{s.templates[k]}.Sanitize()); err != nil {
		return err
	}
	rows, err := s.admin.Query(ctx, `SELECT d.datacl IS NOT NULL, coalesce(a.privilege_type, ''),
		    coalesce(CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE quote_ident(a.grantee::regrole::text) END, '')
		FROM pg_database d LEFT JOIN LATERAL aclexplode(d.datacl) a ON a.grantee <> d.datdba
		WHERE d.datname = $1`, s.templates[k])
	if err != nil {
		return fmt.Errorf("privileges of template %s: %w", s.templates[k], err)
	}
	stmts := []string{"ALTER DATABASE " + db + " SET synchronous_commit = off"}
	for rows.Next() {
		var set bool
		var privilege, grantee string
		if err := rows.Scan(&set, &privilege, &grantee); err != nil {
			return err
		}
		if set && len(stmts) == 1 {
			stmts = append(stmts, "REVOKE ALL ON DATABASE "+db+" FROM PUBLIC")
		}
		if privilege != "" {
			stmts = append(stmts, "GRANT "+privilege+" ON DATABASE "+db+" TO "+grantee)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("privileges of template %s: %w", s.templates[k], err)
	}
	_, err = s.admin.Exec(ctx, strings.Join(stmts, ";\n"))
	return err
}

// leftPrefix begins the names of the databases of kind k that processes
// left on the server, empty, when their tests were over.
func (s *server) leftPrefix(k kind) string {
	return strings.TrimSuffix(s.templates[k], kindNames[k]) + "free_" + kindNames[k] + "_"
}

// claim renames one of the databases of kind k that other processes left
// to name, and reports whether there was one: of two processes renaming
// the same database, one finds it gone and tries the next.
func (s *server) claim(ctx context.Context, k kind, name string) (bool, error) {
	rows, err := s.admin.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", s.leftPrefix(k))
	if err != nil {
		return false, fmt.Errorf("list free databases: %w", err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("list free databases: %w", err)
	}
	for _, db := range left {
		_, err := s.admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{db}.Sanitize()+" RENAME TO "+pgx.Identifier{name}.Sanitize())
		if err == nil {
			return true, nil
		}
	}
	return false, nil
}

// give makes a database a test is done with free, emptying it unless it
// was; one that cannot be emptied is dropped.
func (s *server) give(k kind, name string, emptied bool) {
	if emptied {
		s.mu.Lock()
		s.free[k] = append(s.free[k], name)
		s.mu.Unlock()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := func() error {
		conn, err := pgx.Connect(ctx, s.url(name))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		return s.empty(ctx, k, conn)
	}()
	if err != nil {
		s.log("pgstoretest: empty database %s: %v; dropping it", name, err)
		s.drop(ctx, name)
		return
	}
	s.give(k, name, true)
}

// emptyThrough empties a database of kind k on a connection of pool.
func (s *server) emptyThrough(ctx context.Context, k kind, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return s.empty(ctx, k, conn.Conn())
}

// empty makes the database of conn, of kind k, as new.
func (s *server) empty(ctx context.Context, k kind, conn *pgx.Conn) error {
	sql, err := s.emptySQL(ctx, k, conn)
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, sql)
	return err
}

// emptySQL returns the statements that make a database of kind k as new,
// reading its tables and sequences (the template's) through conn the first
// time: the connections still open to it end, every row of every table but
// schema_migrations goes (triggers and foreign keys off, so in any order),
// every sequence restarts; one round trip, one transaction.
func (s *server) emptySQL(ctx context.Context, k kind, conn *pgx.Conn) (string, error) {
	s.mu.Lock()
	empty := s.emptySQLs[k]
	s.mu.Unlock()
	if empty != "" {
		return empty, nil
	}
	rows, err := conn.Query(ctx, `SELECT format('DELETE FROM %I.%I;', schemaname, tablename) FROM pg_tables
		WHERE schemaname = 'public' AND tablename <> 'schema_migrations'
		UNION ALL
		SELECT format('ALTER SEQUENCE %I.%I RESTART;', schemaname, sequencename) FROM pg_sequences WHERE schemaname = 'public'`)
	if err != nil {
		return "", fmt.Errorf("list tables: %w", err)
	}
	stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", fmt.Errorf("list tables: %w", err)
	}
	// Not durable (synchronous_commit off): a server that crashes loses
	// its tests' databases anyway.
	empty = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid();\n" +
		"BEGIN; SET LOCAL session_replication_role = replica; SET LOCAL synchronous_commit = off;\n" + strings.Join(stmts, "\n") + "\nCOMMIT;"
	s.mu.Lock()
	s.emptySQLs[k] = empty
	s.mu.Unlock()
	return empty, nil
}

func (s *server) drop(ctx context.Context, name string) {
	if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		s.log("pgstoretest: drop database %s: %v", name, err)
	}
}

// close leaves the databases of the process, empty, for the next process
// on the server (dropping one is slow: ~0.8 s here), and drops those a
// test still had.
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.mu.Lock()
	mine, free := s.mine, s.free
	s.mine, s.free = nil, [2][]string{}
	s.mu.Unlock()
	left := map[string]bool{}
	for k, names := range free {
		for _, name := range names {
			left[name] = true
			to := s.leftPrefix(kind(k)) + strings.TrimSuffix(testenv.Name(""), "_")
			if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" RENAME TO "+pgx.Identifier{to}.Sanitize()); err != nil {
				s.drop(ctx, name)
			}
		}
	}
	for _, name := range mine {
		if !left[name] {
			s.drop(ctx, name)
		}
	}
	s.admin.Close()
}

var (
	serversMu sync.Mutex
	servers   = map[string]*server{}
)

// serverOf returns the server of serverURL, building its templates on first use.
func serverOf(ctx context.Context, serverURL string) (*server, error) {
	serversMu.Lock()
	defer serversMu.Unlock()
	if s := servers[serverURL]; s != nil {
		return s, nil
	}
	base, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("server url: %w", err)
	}
	admin, err := pgxpool.New(ctx, serverURL)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", base.Redacted(), err)
	}
	sum := migrationsHash()
	s := &server{base: base, admin: admin, log: logf,
		templates: [2]string{"catalog_template_" + sum + "_control", "catalog_template_" + sum + "_shard"}}
	if err := s.buildTemplates(ctx); err != nil {
		admin.Close()
		return nil, err
	}
	servers[serverURL] = s
	testenv.AtExit(s.close)
	return s, nil
}

// logf reports what cleanup could not do, which fails no test.
func logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// templateLock is the advisory lock (in the "postgres" database) under
// which a process builds the templates.
const templateLock = 7261002

// buildTemplates makes the control and shard templates unless they exist:
// each is migrated under another name and renamed once complete, so that a
// process that dies half way leaves no template behind.
func (s *server) buildTemplates(ctx context.Context) error {
	conn, err := s.admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("build templates: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return fmt.Errorf("build templates: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLock)
	for k, migrations := range [2]fs.FS{catalogsql.Control, catalogsql.Shard} {
		name := s.templates[k]
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
			return fmt.Errorf("look up template %s: %w", name, err)
		}
		if exists {
			continue
		}
		if err := s.buildTemplate(ctx, conn.Conn(), name, migrations); err != nil {
			return fmt.Errorf("build template %s: %w", name, err)
		}
	}
	return nil
}

func (s *server) buildTemplate(ctx context.Context, conn *pgx.Conn, name string, migrations fs.FS) error {
	building := pgx.Identifier{name + "_building"}.Sanitize()
	for _, stmt := range []string{"DROP DATABASE IF EXISTS " + building + " WITH (FORCE)", "CREATE DATABASE " + building} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	pool, err := pgxpool.New(ctx, s.url(name+"_building"))
	if err != nil {
		return err
	}
	err = pgstore.Migrate(ctx, pool, migrations)
	pool.Close() // a template is copied only while nobody is connected to it
	if err != nil {
		return err
	}
	// ALLOW_CONNECTIONS false: a stray connection would make every copy fail.
	final := pgx.Identifier{name}.Sanitize()
	for _, stmt := range []string{"ALTER DATABASE " + building + " RENAME TO " + final,
		"ALTER DATABASE " + final + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// layout is the version of what copyTemplate makes of a copy (the
// templates' names change with it, so that no process takes the databases
// an older layout left).
const layout = "1"

// migrationsHash is a short hash of layout and of every migration file,
// names and contents.
func migrationsHash() string {
	h := sha256.New()
	fmt.Fprintf(h, "pgstoretest layout %s\x00", layout)
	for _, migrations := range []fs.FS{catalogsql.Control, catalogsql.Shard} {
		files, err := fs.Glob(migrations, "*/*.sql")
		if err != nil {
			panic(err) // only a malformed pattern fails
		}
		sort.Strings(files)
		for _, f := range files {
			body, err := fs.ReadFile(migrations, f)
			if err != nil {
				panic(fmt.Sprintf("pgstoretest: read embedded migration %s: %v", f, err))
			}
			fmt.Fprintf(h, "%s\x00%d\x00", f, len(body))
			h.Write(body)
		}
		h.Write([]byte{0xff})
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Outbox returns the events in every shard's outbox (shard by shard,
// oldest first), read as the relay takes them, leaving them all: leased
// ones (a publish that failed, waiting out its backoff) and parked ones
// included, so that an empty answer means an empty outbox.
func Outbox(t testing.TB, s *pgstore.Stores) []catalog.OutboxEntry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []catalog.OutboxEntry
	for shard, sh := range s.Shards {
		entries, err := sh.PeekOutbox(ctx)
		if err != nil {
			t.Fatalf("pgstoretest: read the outbox of shard %d: %v", shard, err)
		}
		out = append(out, entries...)
	}
	return out
}

// AgeOutbox makes every event waiting in the outboxes d older, as if d had
// passed since they were written (the relay's sweeper takes events by
// age; their event times stay) and since their leases were taken (a
// failed event's backoff runs out as the clock would move).
func AgeOutbox(t testing.TB, s *pgstore.Stores, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, sh := range s.Shards {
		if _, err := sh.Pool().Exec(ctx, `UPDATE outbox SET created_at = created_at - make_interval(secs => $1),
			claimed_until = claimed_until - make_interval(secs => $1)`, d.Seconds()); err != nil {
			t.Fatalf("pgstoretest: age the outbox of shard %d: %v", i, err)
		}
	}
}

// OpenTransactions lists the sessions on pool's database, other than the
// one it opens to ask, that are in a transaction: running one, or idle in
// one (what a call out made with a transaction open leaves). Each is
// named by its state and the start of its query.
func OpenTransactions(t testing.TB, pool *pgxpool.Pool) []string {
	t.Helper()
	ctx := context.Background()
	cfg := pool.Config().ConnConfig
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		t.Fatalf("connect to %s: %v", cfg.Database, err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT state || ': ' || left(query, 80) FROM pg_stat_activity
		WHERE datname = $1 AND pid <> pg_backend_pid() AND (xact_start IS NOT NULL OR state LIKE 'idle in transaction%')`, cfg.Database)
	if err != nil {
		t.Fatalf("sessions of %s: %v", cfg.Database, err)
	}
	open, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("sessions of %s: %v", cfg.Database, err)
	}
	return open
}
