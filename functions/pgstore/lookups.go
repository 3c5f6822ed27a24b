package pgstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retailcatalog/catalog/functions/catalog"
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
			n := min(len(b.queue), maxLookupBatch-1)
			batch := append([]*lookup{l}, b.queue[:n]...)
			b.queue = append([]*lookup(nil), b.queue[n:]...)
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
	n := min(len(b.queue), maxLookupBatch)
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
	found := make([]bool, len(batch))
	err := b.rs.read(ctx, AnyReader, func(ctx context.Context, db querier) error {
		clear(found) // a retry on the next server starts over
		rows, err := db.Query(ctx, q("storefront_product_batch"), retailers, products)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				i    int64
				p    catalog.Product
				at   time.Time
				attr []byte
			)
			if err := rows.Scan(&i, &attr, &p.Generation, &at); err != nil {
				return err
			}
			if i < 1 || int(i) > len(batch) {
				return fmt.Errorf("lookup batch: key %d out of range", i)
			}
			l := batch[i-1]
			p.RetailerID, p.ProductID, p.Attributes, p.UpdatedAt = l.retailerID, l.productID, attr, at
			l.p, found[i-1] = p, true
		}
		return rows.Err()
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
	err := rs.read(ctx, src, func(ctx context.Context, db querier) error {
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
func getProduct(ctx context.Context, db querier, retailerID, productID string) (catalog.Product, error) {
	p := catalog.Product{RetailerID: retailerID, ProductID: productID}
	err := db.QueryRow(ctx, q("storefront_product"), retailerID, productID).Scan(&p.Attributes, &p.Generation, &p.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, productNotFound(retailerID, productID)
	}
	if err != nil {
		return p, fmt.Errorf("get product %s/%s: %w", retailerID, productID, err)
	}
	return p, nil
}
