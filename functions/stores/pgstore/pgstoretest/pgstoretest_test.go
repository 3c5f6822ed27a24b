package pgstoretest_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/events/message"
	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/retailcatalog/catalog/functions/stores/pgstore/pgstoretest"
	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Each call gives migrated databases of its own, as many shards as asked;
// after the test's cleanup they are as new (no row, sequences restarted, a
// connection the test left open ended) and the next test gets them.
//
// Not parallel: no other test may take the databases freed in between.
func TestEachTestGetsDatabasesAsNew(t *testing.T) {
	ctx := context.Background()
	var used []string
	t.Run("writes", func(t *testing.T) {
		control, shards := pgstoretest.Databases(t, pgstoretest.Shards(2))
		require.Len(t, shards, 2)
		used = append([]string{control}, shards...)
		leaked, err := pgx.Connect(ctx, shards[1])
		require.NoError(t, err)
		_, err = leaked.Exec(ctx, "SELECT 1")
		require.NoError(t, err, "left open: ended at cleanup")

		s := pgstoretest.New(t, pgstoretest.Shards(2))
		require.Len(t, s.Shards, 2)
		require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: "r1", Shard: 1, TokenHash: []byte("h")}))
		gen, err := s.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err, "the shard is migrated")
		require.EqualValues(t, 1, gen)
		require.NoError(t, s.Migrate(ctx), "already migrated: nothing left to do")

		other := pgstoretest.New(t)
		require.Len(t, other.Shards, 1)
		_, err = other.Retailer(ctx, "r1")
		require.ErrorIs(t, err, catalog.ErrNotFound, "another call's databases are its own")

		// Rows in most tables and a sequence drawn from, as the pipeline writes them.
		gen, err = s.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		_, err = s.BeginDiff(ctx, "r1", gen, "")
		require.NoError(t, err)
		_, err = s.TakeOver(ctx, "r1", gen)
		require.NoError(t, err)
		require.NoError(t, s.StartApplying(ctx, "r1", gen, catalog.Counts{Inserted: 1, Products: 1}, 1))
		sum := catalog.HashAttributes([]byte(`{"v":"1"}`))
		ops := []message.ChunkOp{{Op: message.OpUpsert, ProductID: "p", Hash: hex.EncodeToString(sum[:]), Attributes: []byte(`{"v":"1"}`)}}
		res, err := s.ApplyChunk(ctx, message.ChunkMessage{RetailerID: "r1", Generation: gen, Seq: 0,
			Key: keys.Chunk("r1", gen, 0), SHA256: strings.Repeat("0", 64)}, ops)
		require.NoError(t, err)
		require.True(t, res.GenerationApplied)
		require.NoError(t, s.UpdateDirectory(ctx, "r1", gen, ops))
	})
	t.Run("reuses", func(t *testing.T) {
		control, shards := pgstoretest.Databases(t, pgstoretest.Shards(2))
		require.ElementsMatch(t, used, append([]string{control}, shards...), "the databases freed are taken again")
		s := pgstoretest.New(t, pgstoretest.Shards(3))
		for _, pool := range []*pgxpool.Pool{s.Control.Pool(), s.Shards[0].Pool(), s.Shards[1].Pool(), s.Shards[2].Pool()} {
			rows, err := pool.Query(ctx, `SELECT format('%I: %s rows', tablename,
				(xpath('/row/n/text()', query_to_xml(format('SELECT count(*) AS n FROM %I', tablename), false, true, '')))[1]::text)
				FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations' ORDER BY 1`)
			require.NoError(t, err)
			counts, err := pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			require.NotEmpty(t, counts)
			for _, c := range counts {
				require.True(t, strings.HasSuffix(c, ": 0 rows"), c)
			}
			var drawn int
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL`).Scan(&drawn))
			require.Zero(t, drawn, "every sequence restarted")
		}
		require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: "r1", Shard: 1, TokenHash: []byte("h")}))
		gen, err := s.ReserveGeneration(ctx, "r1", "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		require.EqualValues(t, 1, gen, "as in a new database")
	})
}

// Outbox lists the events waiting without taking them; AgeOutbox makes
// them as old as the relay's sweeper needs, on every shard.
func TestOutboxAndAgeOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := pgstoretest.New(t, pgstoretest.Shards(2))
	for i, id := range []string{"r0", "r1"} {
		require.NoError(t, s.CreateRetailer(ctx, catalog.Retailer{ID: id, Shard: i, TokenHash: []byte(id)}))
		gen, err := s.ReserveGeneration(ctx, id, "csv", time.Now().Add(time.Hour), 0)
		require.NoError(t, err)
		_, err = s.BeginDiff(ctx, id, gen, "")
		require.NoError(t, err)
		require.NoError(t, errOf(s.Hold(ctx, id, gen, catalog.HoldEmptySnapshot, "empty", catalog.Counts{})))
	}
	for range 2 {
		got := pgstoretest.Outbox(t, s)
		require.Len(t, got, 2, "one held event per shard, left where it was")
		require.Equal(t, []string{"r0", "r1"}, []string{got[0].RetailerID, got[1].RetailerID})
		require.Equal(t, "catalog.snapshot.held", got[0].Type)
	}
	sweep := func() (taken int) {
		for shard := range 2 {
			n, err := s.DrainOutbox(ctx, shard, catalog.OutboxFilter{OlderThan: 30 * time.Second}, 10,
				func(_ context.Context, es []catalog.OutboxEntry) ([]bool, error) {
					done := make([]bool, len(es))
					for i := range done {
						done[i] = true
					}
					return done, nil
				})
			require.NoError(t, err)
			taken += n
		}
		return taken
	}
	require.Zero(t, sweep(), "too young for the sweeper")
	pgstoretest.AgeOutbox(t, s, 31*time.Second)
	require.Equal(t, 2, sweep())
	require.Empty(t, pgstoretest.Outbox(t, s))
}

// cleanups is a testing.TB whose cleanups run when run is called, so that
// a benchmark times them with each iteration.
type cleanups struct {
	testing.TB
	fns []func()
}

func (c *cleanups) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanups) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// BenchmarkNew: one call (databases created from the templates, stores
// opened and one query run on each, closed and dropped), for the figure
// in New's comment.
func BenchmarkNew(b *testing.B) {
	ctx := context.Background()
	pgstoretest.New(b) // the templates, once
	for _, shards := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("shards=%d", shards), func(b *testing.B) {
			tb := &cleanups{TB: b}
			for b.Loop() {
				s := pgstoretest.New(tb, pgstoretest.Shards(shards))
				if _, err := s.Retailer(ctx, "nobody"); err == nil {
					b.Fatal("a retailer in a new database")
				}
				for _, sh := range s.Shards {
					if _, err := sh.Pool().Exec(ctx, "SELECT 1 FROM retailer_state"); err != nil {
						b.Fatal(err)
					}
				}
				tb.run()
			}
		})
	}
}

// errOf is the error of a call that also returns an undo (Reject, Hold).
func errOf(_ catalog.Undo, err error) error { return err }
