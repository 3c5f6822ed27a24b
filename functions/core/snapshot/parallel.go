package snapshot

import (
	"io"
	"sync"
	"sync/atomic"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// The parallel reader (Reader.Workers > 1): one goroutine reads the input
// and splits it into records (this needs the quote state, so it is
// sequential, and cheap: a scan for newlines and quotes), copying them into
// batches; Workers goroutines parse, check, canonicalize and hash the records
// of a batch each; Next hands out the batches' rows in order. Problems are
// those of the serial reader, in the same order: a worker notes the problems
// of its batch's records beside its rows, Next takes them in as it hands
// out the rows that follow them (and stops where the serial reader would),
// and a read error or the end of the input comes after the last record of
// the last batch.

// Batch sizes: a batch is sealed when its records reach batchBytes or
// batchRecords (Reader.batchBytes and batchRecords override them in tests).
const (
	batchBytes   = 256 << 10
	batchRecords = 2048
)

type record struct {
	off, n    int32 // in batch.data
	line      int32
	quotes    bool
	truncated bool
}

type rowOut struct {
	idOff, idLen     int32 // in batch.out
	attrOff, attrLen int32
	hash             catalog.Hash
	line             int32
	probs            int32 // problems of the batch before this row
}

type batch struct {
	data []byte
	recs []record
	term error // after the last record: io.EOF or a read error (nil: more batches follow)

	out   []byte
	rows  []rowOut
	probs []*Error // problems of the batch's records, in order

	done  chan struct{}
	next  int // rows handed out
	taken int // problems taken in by the reader
}

type pipeline struct {
	work  chan *batch
	order chan *batch
	free  chan *batch
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	cur   *batch
	bytes atomic.Int64 // BytesRead as of the last batch sent

	mu    sync.Mutex
	names attrNames // attribute names seen by the workers that are done
	// attribute counts of the workers that are done (CountAttributes)
	counts catalog.AttributeCounts
}

func (p *pipeline) close() {
	p.once.Do(func() { close(p.stop) })
	p.wg.Wait()
}

func (r *Reader) startPipeline() {
	workers := max(r.Workers, 2)
	inflight := 2*workers + 2
	p := &pipeline{
		work:  make(chan *batch, inflight),
		order: make(chan *batch, inflight),
		free:  make(chan *batch, inflight),
		stop:  make(chan struct{}),
	}
	for i := 0; i < inflight; i++ {
		p.free <- &batch{}
	}
	r.par = p
	p.wg.Add(1 + workers)
	go func() {
		defer p.wg.Done()
		defer close(p.work)
		defer close(p.order)
		r.split(p)
	}()
	for i := 0; i < workers; i++ {
		w := r.rowParser // shares the header, not the buffers
		w.fields, w.scratch, w.offs, w.out, w.canon = nil, nil, nil, nil, canonicalizer{}
		w.countAttrs, w.csvRows, w.csvValued = r.CountAttributes, 0, nil
		go func() {
			defer p.wg.Done()
			for b := range p.work {
				w.parseBatch(b, !r.SkipAttributes)
				close(b.done)
			}
			p.mu.Lock()
			for n := range w.canon.names {
				p.names.add([]byte(n))
			}
			if w.countAttrs {
				if p.counts == nil {
					p.counts = catalog.AttributeCounts{}
				}
				w.addCounts(p.counts)
			}
			p.mu.Unlock()
		}()
	}
}

// split reads records into batches until the end of the input or an error.
func (r *Reader) split(p *pipeline) {
	var b *batch
	get := func() bool {
		select {
		case b = <-p.free:
		case <-p.stop:
			return false
		}
		b.data, b.recs, b.term = b.data[:0], b.recs[:0], nil
		b.out, b.rows, b.probs, b.next, b.taken = b.out[:0], b.rows[:0], b.probs[:0], 0, 0
		b.done = make(chan struct{})
		return true
	}
	send := func() bool {
		select {
		case p.order <- b:
		case <-p.stop:
			return false
		}
		select {
		case p.work <- b:
		case <-p.stop:
			return false
		}
		return true
	}
	if !get() {
		return
	}
	if r.empty {
		b.term = io.EOF
		send()
		return
	}
	quoteAware := !r.jsonl
	maxBytes, maxRecs := batchBytes, batchRecords
	if r.batchBytes > 0 {
		maxBytes, maxRecs = r.batchBytes, r.batchRecords
	}
	for {
		if r.Lines != nil && !r.skipToWanted() {
			b.term = io.EOF
			send()
			return
		}
		raw, err := r.record(quoteAware)
		if err != nil {
			b.term = err
			send()
			return
		}
		if r.skipped(&raw) {
			continue
		}
		if r.products++; r.products > r.lim.MaxProducts {
			b.term = r.tooManyProducts(raw.line)
			send()
			return
		}
		b.recs = append(b.recs, record{off: int32(len(b.data)), n: int32(len(raw.rec)), line: int32(raw.line), quotes: raw.quotes, truncated: raw.truncated})
		b.data = append(b.data, raw.rec...)
		if len(b.data) >= maxBytes || len(b.recs) >= maxRecs {
			p.bytes.Store(r.base + int64(r.r))
			if !send() || !get() {
				return
			}
		}
	}
}

// parseBatch parses a batch's records into its rows and problems.
func (w *rowParser) parseBatch(b *batch, attrs bool) {
	for _, rc := range b.recs {
		raw := rawRecord{rec: b.data[rc.off : rc.off+rc.n], line: int(rc.line), quotes: rc.quotes, truncated: rc.truncated}
		id, e := w.parse(raw)
		if e != nil {
			b.probs = append(b.probs, e)
			continue
		}
		o := rowOut{idOff: int32(len(b.out)), idLen: int32(len(id)), attrLen: int32(len(w.out)), hash: catalog.HashAttributes(w.out), line: rc.line, probs: int32(len(b.probs))}
		b.out = append(b.out, id...)
		if attrs {
			o.attrOff = int32(len(b.out))
			b.out = append(b.out, w.out...)
		}
		b.rows = append(b.rows, o)
	}
}

// take takes in the problems of b before its problem upto; false when the
// reader must stop.
func (r *Reader) take(b *batch, upto int) bool {
	for ; b.taken < upto; b.taken++ {
		if r.problem(b.probs[b.taken]) {
			return false
		}
	}
	return true
}

// scanParallel returns the next row of the pipeline.
func (r *Reader) scanParallel() (RowView, error) {
	if r.par == nil {
		r.startPipeline()
	}
	p := r.par
	for {
		b := p.cur
		if b == nil {
			var ok bool
			select {
			case b, ok = <-p.order:
			case <-p.stop:
			}
			if !ok || b == nil {
				r.err = errClosed
				return RowView{}, r.err
			}
			select {
			case <-b.done:
			case <-p.stop:
				r.err = errClosed
				return RowView{}, r.err
			}
			p.cur = b
		}
		if b.next < len(b.rows) {
			o := b.rows[b.next]
			if !r.take(b, int(o.probs)) {
				r.err = r.end(errStop)
				p.close()
				return RowView{}, r.err
			}
			b.next++
			v := RowView{ID: b.out[o.idOff : o.idOff+o.idLen : o.idOff+o.idLen], AttributesLen: int(o.attrLen), Hash: o.hash, Line: int(o.line)}
			if o.attrLen > 0 && !r.SkipAttributes {
				v.Attributes = b.out[o.attrOff : o.attrOff+o.attrLen : o.attrOff+o.attrLen]
			}
			return v, nil
		}
		// The batch is used up: its last problems, its end, or the next one.
		err := b.term
		if !r.take(b, len(b.probs)) {
			err = errStop
		}
		if err != nil {
			r.err = r.end(err)
			p.close()
			return RowView{}, r.err
		}
		p.cur = nil
		p.free <- b // never blocks: batches only come from free
	}
}
