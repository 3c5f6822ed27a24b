package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Ping checks that the set can answer a read, as a storefront read would
// reach it: a replica that is up, else the writer.
func (rs *ReaderSet) Ping(ctx context.Context) error {
	return rs.read(ctx, AnyReader, func(ctx context.Context, db *pgxpool.Pool) error { return db.Ping(ctx) })
}

// ReadPing checks that the storefront can read every database: the control
// database's readers and each shard's (a replica that answers, else the
// writer), all at once. The error names each database that did not answer.
func (s *Stores) ReadPing(ctx context.Context) error {
	sets := append([]*ReaderSet{s.ControlReaders}, s.ShardReaders...)
	errs := make([]error, len(sets))
	var wg sync.WaitGroup
	for i, rs := range sets {
		if rs == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := rs.Ping(ctx); err != nil {
				errs[i] = fmt.Errorf("%s: %w", rs.name, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
