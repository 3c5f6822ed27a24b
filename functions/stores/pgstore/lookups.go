package pgstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// maxLookupBatch bounds the lookups sent in one query.
const maxLookupBatch = 128

// lookupBatcher coalesces the storefront's product lookups of one database
// that arrive while all its query slots are busy: they wait in a queue, and
// when a query ends, everything queued goes out as one query
// (storefront_product_batch) instead of one round trip and one statement
// each. Nothing ever waits for a batch to fill, so a lone request (always
// the case in a Lambda environment, which serves one request at a time)
// runs the single-row query at once, exactly as without the batcher; under
// load a database sees a few queries of many keys instead of many of one.
type lookupBatcher struct {
	rs    *ReaderSet
	slots int // lookup queries in flight at most

	mu       sync.Mutex
	inflight int       // guarded by mu
	queue    []*lookup // guarded by mu; only ever non-empty while inflight == slots

	batches, batched atomic.Int64 // queries of more than one key, and the keys they carried
}

// lookup is one queued product lookup and, once done is closed, its answer.
type lookup struct {
	retailerID, productID string
	p                     catalog.Product
	err                   error
	done                  chan struct{}
}

// product answers one AnyReader lookup: straight away when a slot is free,
// else in the next batch (or ctx's error if the caller gives up first).
func (b *lookupBatcher) product(ctx context.Context, retailerID, productID string) (catalog.Product, error) {
	b.mu.Lock()
	if b.inflight < b.slots {
		b.inflight++
		b.mu.Unlock()
		// Let the goroutines already runnable (requests read in the same
		// network poll) queue their lookups behind this one first: they go
		// out with it. A lone request loses nothing: nobody else runs.
		runtime.Gosched()
		b.mu.Lock()
		if len(b.queue) > 0 {
			l := &lookup{retailerID: retailerID, productID: productID, done: make(chan struct{})}
			batch := append([]*lookup{l}, b.popLocked(maxLookupBatch-1)...)
			b.mu.Unlock()
			b.answer(batch)
			b.next()
			return l.p, l.err
		}
		b.mu.Unlock()
		p, err := b.rs.productFrom(ctx, AnyReader, retailerID, productID)
		b.next()
		return p, err
	}
	l := &lookup{retailerID: retailerID, productID: productID, done: make(chan struct{})}
	b.queue = append(b.queue, l)
	b.mu.Unlock()
	select {
	case <-l.done:
		return l.p, l.err
	case <-ctx.Done():
		// The batch still runs (bounded by its timeout); nobody reads this answer.
		return catalog.Product{}, fmt.Errorf("get product %s/%s: %w", retailerID, productID, ctx.Err())
	}
}

// next is called when a query ends: it frees the slot, or hands it to the
// queued lookups.
func (b *lookupBatcher) next() {
	if batch := b.take(); batch != nil {
		go b.run(batch)
	}
}

// take returns the next batch from the queue, keeping the caller's slot; nil
// (the slot freed) when nothing waits.
func (b *lookupBatcher) take() []*lookup {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.queue) == 0 {
		b.inflight--
		return nil
	}
	return b.popLocked(maxLookupBatch)
}

// popLocked removes up to n lookups from the head of the queue and returns
// them; b.mu is held.
func (b *lookupBatcher) popLocked(n int) []*lookup {
	n = min(len(b.queue), n)
	batch := b.queue[:n:n]
	b.queue = append([]*lookup(nil), b.queue[n:]...)
	return batch
}

// run answers batch after batch on one slot until the queue is empty.
func (b *lookupBatcher) run(batch []*lookup) {
	for ; batch != nil; batch = b.take() {
		b.answer(batch)
	}
}

// answer runs one batch and hands every lookup its product or error. The
// query belongs to no single request, so only the read timeouts bound it.
func (b *lookupBatcher) answer(batch []*lookup) {
	ctx := context.Background()
	if len(batch) == 1 {
		l := batch[0]
		l.p, l.err = b.rs.productFrom(ctx, AnyReader, l.retailerID, l.productID)
		close(l.done)
		return
	}
	b.batches.Add(1)
	b.batched.Add(int64(len(batch)))
	retailers, products := make([]string, len(batch)), make([]string, len(batch))
	for i, l := range batch {
		retailers[i], products[i] = l.retailerID, l.productID
	}
	params := [][]byte{appendTextArray(nil, retailers), appendTextArray(nil, products)}
	found := make([]bool, len(batch))
	err := b.rs.read(ctx, AnyReader, func(ctx context.Context, db *pgxpool.Pool) error {
		clear(found) // a retry on the next server starts over
		return execLookup(ctx, db, "storefront_product_batch", params, func(vals [][]byte) error {
			if len(vals) != 4 || len(vals[0]) != 8 {
				return errors.New("lookup batch: unexpected row")
			}
			i := int64(binary.BigEndian.Uint64(vals[0]))
			if i < 1 || int(i) > len(batch) {
				return fmt.Errorf("lookup batch: key %d out of range", i)
			}
			l := batch[i-1]
			p, err := decodeLookupRow(l.retailerID, l.productID, vals[1:])
			if err != nil {
				return err
			}
			l.p, found[i-1] = p, true
			return nil
		})
	})
	for i, l := range batch {
		switch {
		case err != nil:
			l.err = fmt.Errorf("get product %s/%s (in a batch of %d): %w", l.retailerID, l.productID, len(batch), err)
		case !found[i]:
			l.err = productNotFound(l.retailerID, l.productID)
		}
		close(l.done)
	}
}

// productFrom is one lookup with the single-row query.
func (rs *ReaderSet) productFrom(ctx context.Context, src Source, retailerID, productID string) (catalog.Product, error) {
	var p catalog.Product
	err := rs.read(ctx, src, func(ctx context.Context, db *pgxpool.Pool) error {
		var err error
		p, err = getProduct(ctx, db, retailerID, productID)
		return err
	})
	return p, err
}

func productNotFound(retailerID, productID string) error {
	return catalog.Errorf(catalog.ErrNotFound, "product_not_found", "retailer %q has no product %q", retailerID, productID)
}

// getProduct is the storefront's single-row lookup, on whichever server
// (writer or replica) the caller picked.
func getProduct(ctx context.Context, db *pgxpool.Pool, retailerID, productID string) (catalog.Product, error) {
	var p catalog.Product
	found := false
	err := execLookup(ctx, db, "storefront_product", [][]byte{[]byte(retailerID), []byte(productID)}, func(vals [][]byte) error {
		var err error
		p, err = decodeLookupRow(retailerID, productID, vals)
		found = err == nil
		return err
	})
	if err != nil {
		return p, fmt.Errorf("get product %s/%s: %w", retailerID, productID, err)
	}
	if !found {
		return catalog.Product{RetailerID: retailerID, ProductID: productID}, productNotFound(retailerID, productID)
	}
	return p, nil
}

// The storefront's queries are the hottest of the system, so they skip
// pgx's type mapping: text parameters, and results read from the wire as
// they come (ids and attributes as text, the rest binary).
var lookupResultFormats = map[string][]int16{
	"storefront_product":        {pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode},
	"storefront_product_batch":  {pgx.BinaryFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode},
	"storefront_page":           {pgx.TextFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode},
	"storefront_products_by_id": {pgx.BinaryFormatCode, pgx.TextFormatCode, pgx.BinaryFormatCode, pgx.BinaryFormatCode},
}

// execLookup runs the named storefront query (prepared once per connection;
// one of lookupResultFormats)
// with text parameters on a connection of db, calling row for each row; the
// values passed to row are only valid during the call.
func execLookup(ctx context.Context, db *pgxpool.Pool, name string, params [][]byte, row func(vals [][]byte) error) error {
	c, err := db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	sd, err := c.Conn().Prepare(ctx, name, q(name))
	if err != nil {
		return err
	}
	rr := c.Conn().PgConn().ExecPrepared(ctx, sd.Name, params, nil, lookupResultFormats[name])
	var rowErr error
	for rowErr == nil && rr.NextRow() {
		rowErr = row(rr.Values())
	}
	_, err = rr.Close()
	if rowErr != nil {
		return rowErr
	}
	return err
}

// postgresEpoch is where PostgreSQL's binary timestamps count from.
var postgresEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// decodeLookupRow decodes attributes (text), generation (int8) and
// updated_at (timestamptz), both binary.
func decodeLookupRow(retailerID, productID string, vals [][]byte) (catalog.Product, error) {
	if len(vals) != 3 || vals[0] == nil || len(vals[1]) != 8 || len(vals[2]) != 8 {
		return catalog.Product{}, errors.New("lookup: unexpected row")
	}
	return catalog.Product{
		RetailerID: retailerID,
		ProductID:  productID,
		Attributes: bytes.Clone(vals[0]),
		Generation: int64(binary.BigEndian.Uint64(vals[1])),
		UpdatedAt:  postgresEpoch.Add(time.Duration(int64(binary.BigEndian.Uint64(vals[2]))) * time.Microsecond),
	}, nil
}

// appendTextArray appends the text form of a PostgreSQL text[] of ss:
// every element quoted, with backslash and double quote escaped.
func appendTextArray(b []byte, ss []string) []byte {
	b = append(b, '{')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		for j := 0; j < len(s); j++ {
			if s[j] == '"' || s[j] == '\\' {
				b = append(b, '\\')
			}
			b = append(b, s[j])
		}
		b = append(b, '"')
	}
	return append(b, '}')
}
