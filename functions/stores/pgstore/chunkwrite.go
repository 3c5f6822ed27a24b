package pgstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retailcatalog/catalog/events/message"
)

// A chunk's rows are written set-based (docs/PERFORMANCE.md, "Apply"): the
// chunk is COPYed (binary, in id order) into a temporary staging table of
// the session, then one statement (stage_write in queries.sql) makes one
// fenced UPDATE of the products that exist, one INSERT ... SELECT ... ON
// CONFLICT of the new ones and one tombstone UPDATE for the deletes, each
// for the whole chunk, the fences (I2, I3, I6) in their WHERE clauses and
// every row found by its primary key (stage_plans). A generation that only
// inserts (a first load, a day that only adds products) COPYs its rows
// straight into products instead, at the speed of COPY: an insert of an id
// that does not exist cannot change or remove any row, and an id that
// exists makes the COPY fail on the primary key, after which the chunk
// takes the staged path.

// stagedChunk is a chunk's ops as the staging table's rows.
type stagedChunk struct {
	ids     []string
	attrs   [][]byte // nil for a delete
	hashes  [][]byte // nil for a delete
	upserts int
	deletes int
}

// Len, Less and Swap sort the ops by product id (sort.Interface).
func (c *stagedChunk) Len() int           { return len(c.ids) }
func (c *stagedChunk) Less(i, j int) bool { return c.ids[i] < c.ids[j] }
func (c *stagedChunk) Swap(i, j int) {
	c.ids[i], c.ids[j] = c.ids[j], c.ids[i]
	c.attrs[i], c.attrs[j] = c.attrs[j], c.attrs[i]
	c.hashes[i], c.hashes[j] = c.hashes[j], c.hashes[i]
}

// dedupe drops the repeats of a delete from ops sorted by id (the staging
// table is keyed by product id); any other op twice on one product is an
// error, as it was for the fenced upsert (a row is written once a
// statement).
func (c *stagedChunk) dedupe() error {
	n := 0
	for i := range c.ids {
		if n > 0 && c.ids[i] == c.ids[n-1] {
			if c.attrs[i] == nil && c.attrs[n-1] == nil {
				c.deletes--
				continue
			}
			return fmt.Errorf("product %q: more than one op in the chunk", c.ids[i])
		}
		c.ids[n], c.attrs[n], c.hashes[n] = c.ids[i], c.attrs[i], c.hashes[i]
		n++
	}
	c.ids, c.attrs, c.hashes = c.ids[:n], c.attrs[:n], c.hashes[:n]
	return nil
}

// stageOps checks a chunk's ops (their hashes must be hex) and lays them out
// for COPY; the attributes are not copied.
func stageOps(ops []message.ChunkOp) (*stagedChunk, error) {
	c := &stagedChunk{ids: make([]string, len(ops)), attrs: make([][]byte, len(ops)), hashes: make([][]byte, len(ops))}
	hashes := make([]byte, 0, 16*len(ops))
	for i, op := range ops {
		c.ids[i] = op.ProductID
		switch op.Op {
		case message.OpUpsert:
			start := len(hashes)
			var err error
			if hashes, err = hex.AppendDecode(hashes, []byte(op.Hash)); err != nil {
				return nil, fmt.Errorf("product %q: content hash %q is not hex", op.ProductID, op.Hash)
			}
			c.attrs[i], c.hashes[i] = op.Attributes, hashes[start:len(hashes):len(hashes)]
			c.upserts++
		case message.OpDelete:
			c.deletes++
		default:
			return nil, fmt.Errorf("product %q: unknown op %q", op.ProductID, op.Op)
		}
	}
	return c, nil
}

// writeChunk writes a staged chunk of gen in tx and returns how many
// product rows it changed and the ids of the ops that changed nothing (their
// content was equal, a newer generation owns the row, or a delete found no
// live row). insertsOnly says the generation's diff found nothing to update
// or delete: its upserts are tried as a plain COPY first.
func writeChunk(ctx context.Context, tx pgx.Tx, retailerID string, gen int64, c *stagedChunk, insertsOnly bool) (int64, []string, error) {
	if insertsOnly && c.deletes == 0 && c.upserts > 0 {
		now := time.Now()
		n, exists, err := copyNewRows(ctx, tx, "products",
			[]string{"retailer_id", "product_id", "attributes", "content_hash", "generation", "deleted", "updated_at"},
			c.Len(), func(i int) ([]any, error) {
				return []any{retailerID, c.ids[i], c.attrs[i], c.hashes[i], gen, false, now}, nil
			})
		if err != nil {
			return 0, nil, fmt.Errorf("copy new products: %w", err)
		}
		if !exists {
			return n, []string{}, nil
		}
		// Some ids exist after all: the staged path decides for every row.
	}
	// Staged in id order: the statements then walk the primary key in
	// order, page after page, whatever the file's order.
	sort.Stable(c)
	if err := c.dedupe(); err != nil {
		return 0, nil, err
	}
	if _, err := tx.Exec(ctx, q("create_apply_stage")); err != nil {
		return 0, nil, fmt.Errorf("staging table: %w", err)
	}
	if _, err := tx.Exec(ctx, q("stage_plans")); err != nil {
		return 0, nil, fmt.Errorf("staging plans: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"apply_stage"}, []string{"product_id", "attributes", "content_hash", "del"},
		pgx.CopyFromSlice(c.Len(), func(i int) ([]any, error) {
			return []any{c.ids[i], c.attrs[i], c.hashes[i], c.attrs[i] == nil}, nil
		})); err != nil {
		return 0, nil, fmt.Errorf("stage the chunk: %w", err)
	}
	var written int64
	unchanged := []string{}
	if err := tx.QueryRow(ctx, q("stage_write"), retailerID, gen, c.Len()).Scan(&written, &unchanged); err != nil {
		return 0, nil, fmt.Errorf("write products: %w", err)
	}
	return written, unchanged, nil
}

// copyNewRows COPYs n rows into table inside a savepoint of tx. When one of
// them exists already (a unique violation) the savepoint is rolled back,
// the transaction stays usable and exists is true: the caller then takes
// its fenced path for every row.
func copyNewRows(ctx context.Context, tx pgx.Tx, table string, columns []string, n int, row func(i int) ([]any, error)) (copied int64, exists bool, err error) {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	copied, err = sp.CopyFrom(ctx, pgx.Identifier{table}, columns, pgx.CopyFromSlice(n, row))
	if err != nil {
		rollbackErr := sp.Rollback(ctx)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return 0, true, rollbackErr
		}
		return 0, false, err
	}
	return copied, false, sp.Commit(ctx)
}
