package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/finance/usage"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	catalogsql "github.com/retailcatalog/catalog/sql"
)

// roleMatrix is every privilege any role holds on the tables of each
// database after the migrations: "table PRIVILEGE" or "table(column)
// PRIVILEGE". A migration that adds a table or a grant adds it here; a
// table missing from knownTables fails TestRolePrivilegesAreExactly.
var roleMatrix = map[string]map[string][]string{
	"control": {
		catalogsql.RoleUpload: {"retailers SELECT", "retailers INSERT", "retailers UPDATE", "usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE",
			"webhooks SELECT", "webhooks INSERT", "webhooks UPDATE", "webhooks DELETE"},
		catalogsql.RoleDiff: {"retailers SELECT", "usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE"},
		catalogsql.RoleApply: {"retailers SELECT", "directory_floors SELECT", // the directory's fence (0110)
			"product_directory SELECT", "product_directory INSERT", "product_directory UPDATE", "usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE"},
		catalogsql.RoleRead: {"retailers(retailer_id) SELECT", "retailers(shard) SELECT",
			"product_directory SELECT", "usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE"},
		catalogsql.RoleRelay:     {"usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE"},
		catalogsql.RoleConsumers: {"retailers(retailer_id) SELECT", "retailers(shard) SELECT", "webhooks SELECT", "usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE"},
		catalogsql.RoleOps: {"retailers SELECT", "directory_floors SELECT", // collection writes it through gc_collect_directory (0110)
			"product_directory SELECT", "product_directory INSERT", "product_directory UPDATE", "usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE", "usage_functions SELECT", "usage_functions INSERT", "usage_functions UPDATE",
			"reconcile_runs SELECT", "reconcile_runs INSERT", "reconcile_runs UPDATE", "reconcile_runs DELETE",
			"reconcile_results SELECT", "reconcile_results INSERT", "reconcile_results UPDATE", "reconcile_results DELETE",
			// moves between shards (0120): the moves, and the switch
			"retailer_moves SELECT", "retailer_moves INSERT", "retailer_moves UPDATE", "retailers(shard) UPDATE"},
	},
	"shard": {
		catalogsql.RoleUpload: {"retailer_state SELECT", "retailer_state INSERT", "retailer_state(reserved_generation) UPDATE",
			"retailer_state(offboarding_generation) UPDATE", // the offboarding, which raises the fence by trigger (0082)
			"generations SELECT", "generations INSERT", "generations UPDATE",
			"outbox INSERT", "outbox_id_seq USAGE", "usage_daily SELECT",
			moveGuard[0], moveGuard[1], moveGuard[2]},
		catalogsql.RoleDiff: {"retailer_state SELECT", "retailer_state(latest_generation) UPDATE",
			"retailer_state(applied_generation) UPDATE", "retailer_state(applied_products) UPDATE",
			"retailer_state(reserved_generation) UPDATE", "generations INSERT", // an undo (I10)
			"generations SELECT", "generations UPDATE",
			// a plan's "from" (DESIGN 13, 0090) and attribute_dropped's blank rule (0101):
			// the live values of updated and deleted products, not the fence columns
			"products(retailer_id) SELECT", "products(product_id) SELECT", "products(attributes) SELECT", "products(deleted) SELECT",
			"outbox INSERT", "outbox SELECT", "outbox UPDATE", "outbox DELETE", "outbox_id_seq USAGE",
			"usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE",
			"products SELECT", // a delta's diff reads the products it names (0095)
			moveGuard[0], moveGuard[1], moveGuard[2]},
		catalogsql.RoleApply: {"retailer_state SELECT",
			"retailer_state(applied_generation) UPDATE", "retailer_state(applied_products) UPDATE",
			"retailer_state(reserved_generation) UPDATE", "generations INSERT", // an undo (I10)
			"generations SELECT", "generations UPDATE",
			"products SELECT", "products INSERT", "products UPDATE",
			"applied_chunks SELECT", "applied_chunks INSERT",
			"outbox INSERT", "outbox SELECT", "outbox UPDATE", "outbox DELETE", "outbox_id_seq USAGE",
			"usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE",
			moveGuard[0], moveGuard[1], moveGuard[2]},
		catalogsql.RoleRead: {"products SELECT", "retailer_state(retailer_id) SELECT",
			"retailer_state(latest_generation) SELECT", "retailer_state(applied_generation) SELECT"},
		catalogsql.RoleConsumers: {"consumer_versions SELECT", "consumer_versions INSERT", "consumer_versions UPDATE",
			moveGuard[0], moveGuard[1], moveGuard[2]},
		catalogsql.RoleRelay: {"outbox SELECT", "outbox UPDATE", "outbox DELETE",
			"products SELECT", "generations SELECT", moveGuard[0], moveGuard[1], moveGuard[2]},
		catalogsql.RoleOps: {"retailer_state SELECT",
			"retailer_state(applied_generation) UPDATE", "retailer_state(applied_products) UPDATE",
			"retailer_state(reserved_generation) UPDATE", "generations INSERT", // an undo (I10)
			"generations SELECT", "generations UPDATE",
			"products SELECT", "products INSERT", "products UPDATE",
			"applied_chunks SELECT", "outbox SELECT", "outbox INSERT", "outbox_id_seq USAGE",
			// dlq redrive outbox: unparks events (0081), changes no event
			"outbox(attempts) UPDATE", "outbox(claimed_until) UPDATE", "outbox(claim) UPDATE", "outbox(parked_at) UPDATE",
			"usage_daily SELECT", "usage_daily INSERT", "usage_daily UPDATE",
			"generation_redrives SELECT", "generation_redrives INSERT", "generation_redrives UPDATE",
			"generation_repairs SELECT", "generation_repairs INSERT", "generation_repairs UPDATE",
			// moves between shards (0120): the retailer's rows copied in and
			// removed, the move's records
			"retailer_state INSERT", "retailer_state DELETE", "generations DELETE", "products DELETE",
			"applied_chunks INSERT", "applied_chunks DELETE", "outbox DELETE",
			"consumer_versions SELECT", "consumer_versions INSERT", "consumer_versions DELETE",
			"generation_redrives DELETE", "generation_repairs DELETE", "usage_daily DELETE",
			"shard_moves SELECT", "shard_moves INSERT", "shard_moves UPDATE", "shard_moves DELETE",
			"move_changes SELECT", "move_changes INSERT", "move_changes DELETE", "move_changes_seq_seq USAGE"},
	},
}

// moveGuard is what every writer of a retailer's tables needs for the move
// guard (sql/shard/0120), which runs as the writer: read the moves' records,
// log its write.
var moveGuard = []string{"shard_moves SELECT", "move_changes INSERT", "move_changes_seq_seq USAGE"}

// knownTables are the tables and sequences of each database whose grants
// roleMatrix decides (schema_migrations: the migrate function's alone).
var knownTables = map[string][]string{
	"control": {"directory_floors", "product_directory", "reconcile_results", "reconcile_runs", "retailer_moves", "retailers", "schema_migrations", "usage_daily", "usage_functions", "webhooks"},
	"shard": {"applied_chunks", "consumer_versions", "generation_redrives", "generation_repairs", "generations", "move_changes", "move_changes_seq_seq",
		"outbox", "outbox_id_seq", "products", "retailer_state", "schema_migrations", "shard_moves", "usage_daily"},
}

// asRole is dsn (a URL of the local server, trust authentication on
// loopback) logging in as role.
func asRole(t *testing.T, dsn, role string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	require.NoError(t, err)
	u.User = url.User(role)
	return u.String()
}

// dsnsOf returns the control and shard DSNs of stores opened by newStores.
func dsnsOf(s *pgstore.Stores) (control, shard string) {
	return s.Control.Pool().Config().ConnString(), s.Shards[0].Pool().Config().ConnString()
}

// openAs opens the stores of admin's databases logged in as role.
func openAs(t *testing.T, admin *pgstore.Stores, role string) *pgstore.Stores {
	t.Helper()
	control, shard := dsnsOf(admin)
	s, err := pgstore.Open(context.Background(), asRole(t, control, role), []string{asRole(t, shard, role)}, pgstore.PoolOptions{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// TestRolePrivilegesAreExactly: after the migrations, the function roles
// hold exactly the privileges of roleMatrix, PUBLIC holds none on any
// table and may neither connect nor create, and every table is known.
func TestRolePrivilegesAreExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := newStores(t)
	control, shard := dsnsOf(admin)
	for db, dsn := range map[string]string{"control": control, "shard": shard} {
		conn, err := pgx.Connect(ctx, dsn)
		require.NoError(t, err)
		defer conn.Close(ctx)

		var tables []string
		rows, err := conn.Query(ctx, `SELECT relname FROM pg_class
			WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'p', 'S', 'v', 'm') ORDER BY relname`)
		require.NoError(t, err)
		tables, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, knownTables[db], tables,
			"%s database: a table was added or removed: decide which function roles need it, grant that in the migration "+
				"that creates it (numbered after 0051), and list it in knownTables and roleMatrix", db)

		got := map[string][]string{}
		rows, err = conn.Query(ctx, `
			SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END, c.relname, a.privilege_type
			FROM pg_class c CROSS JOIN LATERAL aclexplode(c.relacl) a
			WHERE c.relnamespace = 'public'::regnamespace AND a.grantee <> c.relowner
			UNION ALL
			SELECT CASE a.grantee WHEN 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END,
			       c.relname || '(' || att.attname || ')', a.privilege_type
			FROM pg_attribute att JOIN pg_class c ON c.oid = att.attrelid
			CROSS JOIN LATERAL aclexplode(att.attacl) a
			WHERE c.relnamespace = 'public'::regnamespace AND a.grantee <> c.relowner`)
		require.NoError(t, err)
		for rows.Next() {
			var role, table, priv string
			require.NoError(t, rows.Scan(&role, &table, &priv))
			got[role] = append(got[role], table+" "+priv)
		}
		require.NoError(t, rows.Err())
		want := map[string][]string{}
		for role, privs := range roleMatrix[db] {
			want[role] = append([]string(nil), privs...)
		}
		for _, m := range []map[string][]string{got, want} {
			for _, privs := range m {
				sort.Strings(privs)
			}
		}
		require.Equal(t, want, got, "%s database: privileges of the function roles", db)

		for _, role := range catalogsql.FunctionRoles {
			var connect, create, temp bool
			require.NoError(t, conn.QueryRow(ctx, `SELECT has_database_privilege($1, current_database(), 'CONNECT'),
				has_schema_privilege($1, 'public', 'CREATE'), has_database_privilege($1, current_database(), 'TEMPORARY')`,
				role).Scan(&connect, &create, &temp))
			require.True(t, connect, "%s may connect to the %s database", role, db)
			require.False(t, create, "%s may create objects in the %s database", role, db)
			// Only the apply stages its chunks in a temporary table (0061).
			require.Equal(t, db == "shard" && role == catalogsql.RoleApply, temp, "%s may create temporary tables in the %s database", role, db)
		}
		var publicACL []string
		rows, err = conn.Query(ctx, `SELECT a.privilege_type FROM pg_database d CROSS JOIN LATERAL aclexplode(d.datacl) a
			WHERE d.datname = current_database() AND a.grantee = 0`)
		require.NoError(t, err)
		publicACL, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Empty(t, publicACL, "%s database: PUBLIC keeps no privilege on the database", db)
	}

	conn, err := pgx.Connect(ctx, control)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT rolname, rolcanlogin, rolsuper OR rolcreaterole OR rolcreatedb OR rolreplication OR rolbypassrls
		FROM pg_roles WHERE rolname LIKE 'catalog\_%' ORDER BY rolname`)
	require.NoError(t, err)
	var roles []string
	for rows.Next() {
		var name string
		var login, powers bool
		require.NoError(t, rows.Scan(&name, &login, &powers))
		require.True(t, login, "%s logs in", name)
		require.False(t, powers, "%s has no superuser, createrole, createdb, replication or bypassrls", name)
		roles = append(roles, name)
	}
	require.NoError(t, rows.Err())
	want := append([]string(nil), catalogsql.FunctionRoles...)
	sort.Strings(want)
	require.Equal(t, want, roles, "the roles of the migrations are those of sql.FunctionRoles")
}

// TestEachFunctionRoleDoesItsWork runs every store method of each function
// logged in as that function's role, through a retailer's whole life:
// onboarding, a held upload confirmed and applied in two chunks (new rows
// by COPY), an update and a delete (fenced upsert, tombstone), a rejected
// upload, an upload that changes nothing, and the storefront's reads.
func TestEachFunctionRoleDoesItsWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := newStores(t)
	up := openAs(t, admin, catalogsql.RoleUpload)
	df := openAs(t, admin, catalogsql.RoleDiff)
	ap := openAs(t, admin, catalogsql.RoleApply)
	rd := openAs(t, admin, catalogsql.RoleRead)
	const r = "roles"
	expires := time.Now().Add(time.Hour)

	// upload: onboard, authenticate, reserve, report.
	require.NoError(t, up.Control.CreateRetailer(ctx, catalog.Retailer{ID: r, Shard: 0, TokenHash: []byte("roles-token")}))
	owner, err := up.Control.RetailerByTokenHash(ctx, []byte("roles-token"))
	require.NoError(t, err)
	require.Equal(t, r, owner)
	_, upShard, err := up.ForRetailer(ctx, r)
	require.NoError(t, err)
	_, dfShard, err := df.ForRetailer(ctx, r)
	require.NoError(t, err)
	_, apShard, err := ap.ForRetailer(ctx, r)
	require.NoError(t, err)
	reserve := func() int64 {
		t.Helper()
		gen, err := upShard.ReserveGeneration(ctx, r, "csv", expires, 30)
		require.NoError(t, err)
		_, err = upShard.Generation(ctx, r, gen)
		require.NoError(t, err)
		_, err = upShard.Generations(ctx, r, 10)
		require.NoError(t, err)
		return gen
	}
	// diff (and arrival, under the diff's role): receive and take over a generation.
	takeOver := func(gen int64) {
		t.Helper()
		_, err := dfShard.MarkArrived(ctx, r, gen, time.Now(), time.Hour)
		require.NoError(t, err)
		newer, err := dfShard.NewerArrival(ctx, r, gen)
		require.NoError(t, err)
		require.Zero(t, newer)
		d, err := dfShard.BeginDiff(ctx, r, gen, fmt.Sprintf(`"etag-%d"`, gen))
		require.NoError(t, err)
		require.True(t, d.Proceed, d.Reason)
		_, err = dfShard.TakeOver(ctx, r, gen)
		require.NoError(t, err)
		latest, err := dfShard.IsLatest(ctx, r, gen)
		require.NoError(t, err)
		require.True(t, latest)
	}
	// apply: one chunk, and the directory after it.
	apply := func(gen int64, seq int, ops ...message.ChunkOp) catalog.ApplyResult {
		t.Helper()
		latest, err := apShard.IsLatest(ctx, r, gen)
		require.NoError(t, err)
		require.True(t, latest)
		res, err := apShard.ApplyChunk(ctx, chunkOf(r, gen, seq), ops)
		require.NoError(t, err)
		require.Equal(t, catalog.ChunkApplied, res.Outcome)
		counted, err := apShard.ChunkCounted(ctx, r, gen, seq)
		require.NoError(t, err)
		require.True(t, counted)
		require.NoError(t, ap.Control.UpdateDirectory(ctx, r, gen, ops))
		return res
	}
	state := func(gen int64) catalog.State {
		t.Helper()
		g, err := upShard.Generation(ctx, r, gen)
		require.NoError(t, err)
		return g.State
	}

	g1 := reserve()
	takeOver(g1)
	_, err = dfShard.Hold(ctx, r, g1, "empty_snapshot", "held for the test", catalog.Counts{})
	require.NoError(t, err)
	require.NoError(t, upShard.Confirm(ctx, r, g1))
	takeOver(g1)
	require.NoError(t, dfShard.StartApplying(ctx, r, g1, catalog.Counts{Inserted: 3, Products: 3}, 2))
	apply(g1, 0, upsert("p1", `{"price":"1"}`), upsert("p2", `{"price":"2"}`))
	require.True(t, apply(g1, 1, upsert("p3", `{"price":"3"}`)).GenerationApplied)
	require.Equal(t, catalog.StateApplied, state(g1))

	g2 := reserve()
	takeOver(g2)
	require.NoError(t, dfShard.StartApplying(ctx, r, g2, catalog.Counts{Updated: 1, Deleted: 1, Products: 2}, 1))
	res := apply(g2, 0, upsert("p1", `{"price":"1.5"}`), del("p2"))
	require.Equal(t, int64(2), res.Written)
	require.Equal(t, catalog.StateApplied, state(g2))

	g3 := reserve()
	takeOver(g3)
	undo, err := dfShard.Reject(ctx, r, g3, catalog.Rejection{Code: "malformed_csv", Message: "rejected for the test", Line: 2})
	require.NoError(t, err)
	require.Zero(t, undo.Generation, "g3 wrote nothing: no undo")
	require.Equal(t, catalog.StateRejected, state(g3))

	g4 := reserve()
	takeOver(g4)
	require.NoError(t, dfShard.StartApplying(ctx, r, g4, catalog.Counts{Unchanged: 2, Products: 2}, 0))
	require.Equal(t, catalog.StateApplied, state(g4))

	// read: routing, product, page and the directory, in read-only sessions.
	rs, err := rd.ReadersFor(ctx, r)
	require.NoError(t, err)
	p, err := rs.Product(ctx, pgstore.AnyReader, r, "p1")
	require.NoError(t, err)
	require.JSONEq(t, `{"price":"1.5"}`, string(p.Attributes))
	_, err = rs.Product(ctx, pgstore.AnyReader, r, "p2")
	require.ErrorIs(t, err, catalog.ErrNotFound)
	page, err := rs.Products(ctx, pgstore.AnyReader, r, "", 10, 0)
	require.NoError(t, err)
	require.Len(t, page, 2)
	latest, applied, err := rs.KnownGenerations(ctx, r)
	require.NoError(t, err)
	require.Equal(t, [2]int64{g4, g4}, [2]int64{latest, applied})
	owners, err := rd.ControlReaders.DirectoryRetailers(ctx, "p3", 10)
	require.NoError(t, err)
	require.Equal(t, []string{r}, owners)
	var readOnly string
	require.NoError(t, rd.Shards[0].Pool().QueryRow(ctx, `SHOW default_transaction_read_only`).Scan(&readOnly))
	require.Equal(t, "on", readOnly, "the read role's sessions are read-only by default")

	// The events written above (changes, applied, rejected): the apply's
	// fast path takes one retailer's, the relay's sweeper the rest.
	drain := func(s *pgstore.Shard, f catalog.OutboxFilter) int {
		t.Helper()
		n, err := s.DrainOutbox(ctx, f, 2, func(_ context.Context, entries []catalog.OutboxEntry) ([]bool, error) {
			done := make([]bool, len(entries))
			for i := range done {
				done[i] = true
			}
			return done, nil
		})
		require.NoError(t, err)
		return n
	}
	require.Equal(t, 2, drain(apShard, catalog.OutboxFilter{RetailerID: r}), "the apply's fast path")
	require.Equal(t, 2, drain(dfShard, catalog.OutboxFilter{RetailerID: r}), "the diff's fast path")
	relay := openAs(t, admin, catalogsql.RoleRelay)
	for drain(relay.Shards[0], catalog.OutboxFilter{}) > 0 {
	}
	pending, _, err := admin.Shards[0].OutboxStats(ctx)
	require.NoError(t, err)
	require.Zero(t, pending)

	// ops: a replay writes the events again.
	ops := openAs(t, admin, catalogsql.RoleOps)
	changes, lifecycle, err := ops.Shards[0].Replay(ctx, r, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 3, changes)
	require.Equal(t, 4, lifecycle)
	// relay: a claim, a publish that fails one event for good (parked) and
	// another for now (leased away); ops lists the parked one and unparks it.
	claim, err := relay.Shards[0].ClaimOutbox(ctx, catalog.OutboxFilter{RetailerID: r}, 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, claim.Entries, 2)
	_, settled, err := relay.Shards[0].SettleOutbox(ctx, claim.Token, catalog.OutboxSettlement{Failed: []catalog.OutboxFailure{
		{ID: claim.Entries[0].ID, Error: "refused", Counted: true, Park: true},
		{ID: claim.Entries[1].ID, Error: "throttled", Counted: true, RetryAfter: time.Minute}}})
	require.NoError(t, err)
	require.Equal(t, 2, settled)
	parked, n, err := ops.ParkedOutbox(ctx, r, 10)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, "refused", parked[0].LastError)
	unparked, left, err := ops.UnparkOutbox(ctx, r, 10)
	require.NoError(t, err)
	require.Equal(t, [2]int64{1, 0}, [2]int64{unparked, left})
	// ops: why reads the counters, a generation's progress and a row.
	fence, err := ops.Fence(ctx, r)
	require.NoError(t, err)
	require.Equal(t, g4, fence.Applied)
	progress, err := ops.Progress(ctx, r, g1)
	require.NoError(t, err)
	require.Equal(t, []int{0, 1}, progress.AppliedSeqs)
	_, err = ops.CatalogRow(ctx, r, "p2")
	require.NoError(t, err)
	// ops: reconciliation walks the catalog, records its run and repairs
	// with fenced writes, a change event and the directory.
	require.NoError(t, ops.CreateReconcileRun(ctx, catalog.ReconcileRun{ID: "rc-roles", RetailerID: r, Total: 1}))
	rows := 0
	require.NoError(t, ops.ScanCatalog(ctx, r, fence, "", "", func(id, attrs []byte) error { rows++; return nil }))
	require.Positive(t, rows)
	_, err = ops.NormalizeAttributes(ctx, r, []string{`{"a":1e3}`})
	require.NoError(t, err)
	repaired, err := ops.RepairRows(ctx, r, g4, []message.ChunkOp{upsert("p2", `{"price":"2"}`)}, "chunks/roles/repair", strings.Repeat("0", 64))
	require.NoError(t, err)
	require.EqualValues(t, 1, repaired.Written)
	require.NoError(t, ops.RepairDirectory(ctx, r, g4, []message.ChunkOp{upsert("p2", `{"price":"2"}`)}))
	require.NoError(t, ops.RecordReconcileResult(ctx, catalog.ReconcileResult{RunID: "rc-roles", RetailerID: r, Generation: g4, CheckedAt: time.Now()}))
	report, err := ops.ReconcileReport(ctx, "rc-roles", 10)
	require.NoError(t, err)
	require.NotNil(t, report.Run.FinishedAt)
	_, err = ops.PruneReconcileRuns(ctx, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	_, err = ops.RetailerIDs(ctx, "", 10)
	require.NoError(t, err)

	// upload: a webhook saved, shown, replaced; consumers: it is read, the
	// retailer's shard found, their version state kept there.
	require.NoError(t, up.SetWebhook(ctx, catalog.Webhook{RetailerID: r, URL: "https://hooks.example/1", SecretSealed: []byte{1}}))
	require.NoError(t, up.SetWebhook(ctx, catalog.Webhook{RetailerID: r, URL: "https://hooks.example/2", SecretSealed: []byte{2}}))
	cons := openAs(t, admin, catalogsql.RoleConsumers)
	hook, err := cons.Webhook(ctx, r)
	require.NoError(t, err)
	require.Equal(t, "https://hooks.example/2", hook.URL)
	newer, err := cons.NewerVersions(ctx, "analytics", r, []string{"p1", "p2"}, []int64{g2, g2})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, newer)
	require.NoError(t, cons.RecordVersions(ctx, "analytics", r, []string{"p1", "p2"}, []int64{g2, g2}))
	newer, err = cons.NewerVersions(ctx, "analytics", r, []string{"p1", "p2"}, []int64{g2, g2 + 1})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true}, newer)
	require.NoError(t, cons.RecordVersions(ctx, "analytics", r, []string{"p2"}, []int64{g2 + 1}), "a record raises (UPDATE)")

	control, shard := dsnsOf(admin)

	// usage (DESIGN 10): every function's meter adds to the control
	// database (the storefront too, its one write); upload reads control
	// and shards for the cost report, which shows what the diff's state
	// changes and the chunks counted above.
	today := time.Now().UTC()
	for _, s := range []*pgstore.Stores{up, df, ap, rd} {
		require.NoError(t, s.AddUsage(ctx, []usage.DayUsage{{Date: today.Format(usage.DateLayout), RetailerID: r,
			Usage: usage.Usage{Reads: 1, Functions: map[string]usage.FunctionUsage{"f": {Invocations: 1, MBms: 1024}}}}}))
	}
	usage, err := up.Usage(ctx, today, today)
	require.NoError(t, err)
	require.Len(t, usage, 1)
	require.Equal(t, int64(4), usage[0].Reads)
	require.Equal(t, int64(4), usage[0].Uploads, "g1..g4 arrived")
	require.Equal(t, int64(3+1+1), usage[0].RowsChanged(), "g1 and g2's changes, counted when they started applying")
	require.Equal(t, int64(3), usage[0].Chunks)
	runAs(t, asRole(t, control, catalogsql.RoleRelay), `INSERT INTO usage_daily (day, retailer_id, sns_requests) VALUES (current_date, 'roles', 1)
		ON CONFLICT (day, retailer_id) DO UPDATE SET sns_requests = usage_daily.sns_requests + 1`)

	runAs(t, asRole(t, shard, catalogsql.RoleOps),
		`SELECT latest_generation, applied_generation FROM retailer_state WHERE retailer_id = 'roles' FOR KEY SHARE`,
		`SELECT product_id, content_hash FROM products WHERE retailer_id = 'roles' ORDER BY product_id`,
		`SELECT count(*) FROM applied_chunks WHERE retailer_id = 'roles'`,
		`INSERT INTO products (retailer_id, product_id, attributes, content_hash, generation) VALUES ('roles', 'p9', '{}', '\x00', 4)
		 ON CONFLICT (retailer_id, product_id) DO UPDATE SET attributes = EXCLUDED.attributes WHERE products.generation <= EXCLUDED.generation`,
		`UPDATE generations SET received_at = received_at WHERE retailer_id = 'roles' AND generation = 4`)
	runAs(t, asRole(t, control, catalogsql.RoleOps),
		`SELECT shard, hold_delete_fraction FROM retailers WHERE retailer_id = 'roles'`,
		`INSERT INTO product_directory (product_id, retailer_id, generation) VALUES ('p9', 'roles', 4)
		 ON CONFLICT (product_id, retailer_id) DO UPDATE SET generation = EXCLUDED.generation WHERE product_directory.generation < EXCLUDED.generation`)

	// I10: the apply, the diff and the sweeper (ops) each end a generation
	// that cannot finish, half applied, and reserve its undo.
	// An undo's content is the applied generation's upload, at its pinned
	// version; an undo of an undo reads the same.
	srcKey, srcETag := keys.Upload(r, g4), fmt.Sprintf(`"etag-%d"`, g4)
	for _, rejecter := range []*pgstore.Stores{ap, df, ops} {
		g := reserve()
		takeOver(g)
		require.NoError(t, dfShard.StartApplying(ctx, r, g, catalog.Counts{Updated: 2, Products: 2}, 2))
		apply(g, 0, upsert("p1", fmt.Sprintf(`{"price":"%d"}`, g)))
		undo, err := rejecter.Reject(ctx, r, g, catalog.Rejection{Code: catalog.CodeApplyFailed, Message: "refused for the test"})
		require.NoError(t, err)
		require.True(t, undo.Rejected)
		require.Equal(t, g+1, undo.Generation, "the undo is the next generation")
		require.Equal(t, g4, undo.Source, "back to the last applied generation")
		d, err := dfShard.BeginDiff(ctx, r, undo.Generation, "")
		require.NoError(t, err)
		require.True(t, d.Proceed, d.Reason)
		require.True(t, d.Confirmed, "an undo is confirmed in advance")
		require.Equal(t, undo.Generation-1, d.Undoes)
		require.Equal(t, srcKey, d.ObjectKey)
		require.Equal(t, srcETag, d.ETag)
		_, err = dfShard.TakeOver(ctx, r, undo.Generation)
		require.NoError(t, err)
		require.NoError(t, dfShard.StartApplying(ctx, r, undo.Generation, catalog.Counts{Updated: 1, Products: 2}, 1))
		require.True(t, apply(undo.Generation, 0, upsert("p1", `{"price":"1.5"}`)).GenerationApplied)
		g4 = undo.Generation
	}

	// upload offboards: the registry's record and the shard's, which
	// raises the fence (by trigger: the role may not set
	// latest_generation) and supersedes what was pending; then the shard
	// refuses the retailer's reservations and confirmations, and the
	// diff's role takes the offboarding through.
	slot := reserve()
	off, err := up.Offboard(ctx, r, []byte("roles-revoked"), expires)
	require.NoError(t, err)
	require.Equal(t, slot+1, off)
	require.Equal(t, catalog.StateSuperseded, state(slot))
	require.NoError(t, up.Control.Offboard(ctx, r, []byte("roles-revoked")), "again")
	_, err = upShard.ReserveGeneration(ctx, r, "csv", expires, 30)
	require.ErrorIs(t, err, catalog.ErrConflict)
	require.ErrorIs(t, upShard.Confirm(ctx, r, slot), catalog.ErrConflict)
	isLatest, err := dfShard.IsLatest(ctx, r, off)
	require.NoError(t, err)
	require.True(t, isLatest)
	takeOver(off)
	require.NoError(t, dfShard.StartApplying(ctx, r, off, catalog.Counts{Deleted: 4, Products: 0}, 1))
	require.True(t, apply(off, 0, del("p1"), del("p2"), del("p3"), del("p9")).GenerationApplied)
	require.Equal(t, catalog.StateApplied, state(off))
}

// runAs runs each statement in a transaction of its own, as the user of dsn.
func runAs(t *testing.T, dsn string, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, s := range stmts {
		_, err := conn.Exec(ctx, s)
		require.NoError(t, err, "%s: %s", conn.Config().User, s)
	}
}

// TestEachFunctionRoleIsRefusedTheRest: what a role must not do fails with
// insufficient_privilege. Each statement runs in a transaction that is
// rolled back, on databases with a retailer and products in them.
func TestEachFunctionRoleIsRefusedTheRest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := newStores(t)
	gen := startGeneration(t, admin.Shards[0], 1)
	_, err := admin.Shards[0].ApplyChunk(ctx, chunkOf("r1", gen, 0), []message.ChunkOp{upsert("p1", `{"a":"1"}`)})
	require.NoError(t, err)
	control, shard := dsnsOf(admin)

	// Nothing a function may do changes the schema, the roles or the migrations.
	ddlShard := []string{
		`CREATE TABLE products_copy (id int)`,
		`ALTER TABLE products ADD COLUMN note text`,
		`DROP TABLE products`,
		`TRUNCATE products`,
		`CREATE INDEX products_attrs ON products (updated_at)`,
		`SELECT * FROM schema_migrations`,
		`CREATE ROLE intruder`,
		`CREATE TEMP TABLE scratch (id int)`,
	}
	ddlControl := []string{
		`ALTER TABLE retailers ADD COLUMN note text`,
		`DROP TABLE product_directory`,
		`TRUNCATE retailers`,
		`DELETE FROM schema_migrations`,
	}
	refused := map[string]struct{ shard, control []string }{
		catalogsql.RoleRead: {
			shard: []string{
				`UPDATE products SET deleted = true`,
				`INSERT INTO products (retailer_id, product_id, generation) VALUES ('r1', 'x', 99)`,
				`DELETE FROM products`,
				`SELECT * FROM generations`,
				`SELECT * FROM retailer_state`,
				`SELECT * FROM outbox`,
				`SELECT * FROM applied_chunks`,
			},
			control: []string{
				`SELECT token_hash FROM retailers`,
				`SELECT hold_delete_fraction FROM retailers`,
				`UPDATE retailers SET shard = 1`,
				`UPDATE product_directory SET deleted = true`,
			},
		},
		catalogsql.RoleApply: {
			shard: []string{
				`DELETE FROM products`,
				`UPDATE retailer_state SET latest_generation = 0`,
				// It may reserve an undo (I10): reserved_generation and a
				// generations row, nothing else of retailer_state.
				`INSERT INTO retailer_state (retailer_id) VALUES ('x')`,
				`DELETE FROM generations`,
				`DELETE FROM applied_chunks`,
			},
			control: []string{
				`UPDATE retailers SET shard = 1`,
				`INSERT INTO retailers (retailer_id, shard, token_hash) VALUES ('x', 0, '\x00')`,
				`DELETE FROM product_directory`,
			},
		},
		catalogsql.RoleDiff: {
			shard: []string{
				`UPDATE products SET deleted = true`,
				`INSERT INTO products (retailer_id, product_id, generation) VALUES ('r1', 'x', 99)`,
				`INSERT INTO retailer_state (retailer_id) VALUES ('x')`,
				`DELETE FROM generations`,
				`INSERT INTO applied_chunks (retailer_id, generation, seq) VALUES ('r1', 1, 9)`,
			},
			control: []string{
				`UPDATE retailers SET shard = 1`,
				`SELECT * FROM product_directory`,
			},
		},
		catalogsql.RoleUpload: {
			shard: []string{
				`SELECT * FROM products`,
				`UPDATE products SET deleted = true`,
				`UPDATE retailer_state SET latest_generation = 99`,
				`UPDATE retailer_state SET applied_generation = 99`,
				`DELETE FROM generations`,
				`SELECT * FROM applied_chunks`,
				`SELECT * FROM outbox`,
			},
			control: []string{
				`DELETE FROM retailers`,
				`UPDATE product_directory SET deleted = true`,
				`SELECT * FROM product_directory`,
			},
		},
		catalogsql.RoleRelay: {
			shard: []string{
				`INSERT INTO outbox (event_type, retailer_id, generation, seq) VALUES ('catalog.changes', 'r1', 1, 9)`,
				`UPDATE products SET deleted = true`,
				`UPDATE generations SET state = 'applied'`,
				`SELECT * FROM retailer_state`,
			},
			control: []string{
				`SELECT * FROM retailers`,
				`SELECT * FROM product_directory`,
			},
		},
		catalogsql.RoleConsumers: {
			shard: []string{
				`SELECT * FROM products`,
				`SELECT * FROM outbox`,
				`SELECT * FROM generations`,
			},
			control: []string{
				`SELECT * FROM retailers`,
				`SELECT * FROM product_directory`,
			},
		},
		catalogsql.RoleOps: {
			shard: []string{
				// a move deletes a retailer's rows (0120), it never rewrites them
				`TRUNCATE products`,
				`UPDATE retailer_state SET latest_generation = 0`,
				`UPDATE outbox SET retailer_id = ''`,
				`TRUNCATE generations`,
				`UPDATE consumer_versions SET generation = 0`,
				`UPDATE move_changes SET seq = 0`,
			},
			control: []string{
				`UPDATE retailers SET token_hash = '\x00'`,
				`DELETE FROM retailers`,
				`DELETE FROM product_directory`,
			},
		},
	}
	for _, role := range catalogsql.FunctionRoles {
		t.Run(role, func(t *testing.T) {
			want, ok := refused[role]
			require.True(t, ok, "no refusals listed for %s", role)
			ddl := ddlShard
			if role == catalogsql.RoleApply {
				ddl = slices.DeleteFunc(slices.Clone(ddl), func(s string) bool { return strings.HasPrefix(s, "CREATE TEMP") })
			}
			expectRefused(t, asRole(t, shard, role), append(ddl, want.shard...))
			expectRefused(t, asRole(t, control, role), append(ddlControl, want.control...))
		})
	}
}

// expectRefused runs each statement in a transaction that is rolled back
// and requires insufficient_privilege (42501). Sessions are made writable
// first, so the read role is refused by its grants, not only by its
// read-only default.
func expectRefused(t *testing.T, dsn string, stmts []string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SET default_transaction_read_only = off`)
	require.NoError(t, err)
	for _, s := range stmts {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, s)
			if err == nil {
				return errRolledBack
			}
			return err
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s: %s: want insufficient_privilege (42501), got %v", conn.Config().User, strings.Join(strings.Fields(s), " "), describe(err))
		}
	}
}

var errRolledBack = errors.New("statement succeeded (rolled back)")

func describe(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s (%s)", pgErr.Message, pgErr.Code)
	}
	return fmt.Sprint(err)
}

// TestAuthTokenForEveryConnection: with PoolOptions.AuthToken (IAM
// authentication on AWS) every new connection, a reader's included, asks
// for a token signed for the host, port and user it connects with.
func TestAuthTokenForEveryConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := newStores(t)
	control, shard := dsnsOf(admin)
	u, err := url.Parse(control)
	require.NoError(t, err)
	port := u.Port()

	var mu sync.Mutex
	asked := map[string]bool{}
	token := func(ctx context.Context, host string, port uint16, user string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		asked[fmt.Sprintf("%s:%d %s", host, port, user)] = true
		return "token-for-" + host, nil // trust authentication on loopback ignores it
	}
	s, err := pgstore.Open(ctx, asRole(t, control, catalogsql.RoleRead), []string{asRole(t, shard, catalogsql.RoleRead)},
		pgstore.PoolOptions{MaxConns: 2, AuthToken: token})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	require.NoError(t, s.AttachReaders([]string{"localhost:" + port}, nil, pgstore.ReaderOptions{}))
	_, err = s.ControlReaders.DirectoryRetailers(ctx, "p1", 1)
	require.NoError(t, err)
	require.NoError(t, s.Shards[0].Pool().Ping(ctx))

	mu.Lock()
	defer mu.Unlock()
	require.True(t, asked[u.Hostname()+":"+port+" catalog_read"], "writer connections ask for a token: %v", asked)
	require.True(t, asked["localhost:"+port+" catalog_read"], "reader connections ask for their own host's token: %v", asked)
}
