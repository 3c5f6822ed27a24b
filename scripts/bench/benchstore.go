package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/stores/pgstore"
	"github.com/retailcatalog/catalog/scripts/local/pgserver"
)

var benchRetailer = catalog.Retailer{ID: "bench", Hold: catalog.DefaultHoldPolicy}

// diffDatabases is a private PostgreSQL server with a migrated control and
// shard database kept as templates: every diff child gets copies of its
// own, so that each diff meets the store in the state benchStore makes.
type diffDatabases struct {
	srv    *pgserver.Server
	copies int
}

const (
	diffControlTemplate = "bench_diff_control"
	diffShardTemplate   = "bench_diff_shard"
)

// startDiffDatabases starts the server in a new temporary directory and
// migrates the templates; cleanup stops and removes everything.
func startDiffDatabases(ctx context.Context) (d *diffDatabases, cleanup func(), err error) {
	work, removeWork, err := workDir("", "catalog-bench-diff-pg-")
	if err != nil {
		return nil, nil, err
	}
	srv, err := startPostgres(ctx, work)
	if err != nil {
		removeWork()
		return nil, nil, err
	}
	cleanup = func() { srv.Stop(); removeWork() }
	controlDSN, err := pgserver.CreateDatabase(ctx, srv.URL("postgres"), diffControlTemplate)
	if err == nil {
		var shardDSN string
		if shardDSN, err = pgserver.CreateDatabase(ctx, srv.URL("postgres"), diffShardTemplate); err == nil {
			var s *pgstore.Stores
			if s, err = pgstore.Open(ctx, controlDSN, []string{shardDSN}, pgstore.PoolOptions{MaxConns: 2}); err == nil {
				err = s.Migrate(ctx)
				s.Close() // a template is copied only while nobody is connected to it
			}
		}
	}
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("diff bench databases: %w", err)
	}
	return &diffDatabases{srv: srv}, cleanup, nil
}

// fresh returns the URLs of new copies of the templates.
func (d *diffDatabases) fresh(ctx context.Context) (control, shard string, err error) {
	conn, err := pgx.Connect(ctx, d.srv.URL("postgres"))
	if err != nil {
		return "", "", err
	}
	defer conn.Close(ctx)
	d.copies++
	var urls []string
	for _, tpl := range []string{diffControlTemplate, diffShardTemplate} {
		name := fmt.Sprintf("%s_%d", tpl, d.copies)
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{tpl}.Sanitize()); err != nil {
			return "", "", fmt.Errorf("copy %s: %w", tpl, err)
		}
		urls = append(urls, d.srv.URL(name))
	}
	return urls[0], urls[1], nil
}

// benchStore opens stores on a migrated, empty control and shard database
// and puts the bench retailer at generation gen, awaiting its upload, whose
// applied baseline is baseline (0: none) of baselineProducts products: the
// state a diff of gen meets.
// With dryRun, generation gen is reserved as a dry run (DESIGN 13).
func benchStore(ctx context.Context, controlDSN, shardDSN string, gen, baseline, baselineProducts int64, dryRun bool) (*pgstore.Stores, error) {
	s, err := pgstore.Open(ctx, controlDSN, []string{shardDSN}, pgstore.PoolOptions{MaxConns: 4})
	if err != nil {
		return nil, err
	}
	err = func() error {
		// The registry's default hold policy is benchRetailer's.
		if err := s.CreateRetailer(ctx, catalog.Retailer{ID: benchRetailer.ID, TokenHash: []byte("bench")}); err != nil {
			return err
		}
		for g := int64(1); g <= gen; g++ {
			reserve := s.ReserveGeneration
			if dryRun && g == gen {
				reserve = s.ReserveDryRun
			}
			if _, err := reserve(ctx, benchRetailer.ID, "csv", time.Now().Add(time.Hour), 0); err != nil {
				return err
			}
			if g != baseline {
				continue
			}
			if _, err := s.BeginDiff(ctx, benchRetailer.ID, g, ""); err != nil {
				return err
			}
			if _, err := s.TakeOver(ctx, benchRetailer.ID, g); err != nil {
				return err
			}
			if err := s.StartApplying(ctx, benchRetailer.ID, g, catalog.Counts{Products: baselineProducts}, 0); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("bench store: %w", err)
	}
	return s, nil
}

// diffOutcome is what the diff of gen decided: its counts and chunks, or
// why it did not apply.
func diffOutcome(ctx context.Context, s *pgstore.Stores, gen int64) (catalog.GenerationStatus, error) {
	st, err := s.Generation(ctx, benchRetailer.ID, gen)
	if err != nil {
		return st, err
	}
	switch st.State {
	case catalog.StateApplying, catalog.StateApplied, catalog.StatePreviewed:
		return st, nil
	case catalog.StateRejected, catalog.StateHeld:
		return st, fmt.Errorf("snapshot %s: %s line %d: %s", st.State, st.ErrorCode, st.ErrorLine, st.ErrorMessage)
	}
	return st, fmt.Errorf("diff of generation %d ended %s", gen, st.State)
}
