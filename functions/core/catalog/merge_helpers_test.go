package catalog

// Test helpers: a merge over entries in memory, as the tests write them.

// IndexIterator yields index entries in increasing product_id order; Next
// returns io.EOF after the last one.
type IndexIterator interface {
	Next() (IndexEntry, error)
}

// Merge is MergeRefs over entries in memory (sorted by product_id; the
// plan's Upserts are their Line fields).
func Merge(newEntries []IndexEntry, baseline IndexIterator, stopped []IndexIterator) (Plan, error) {
	var base RefIterator
	if baseline != nil {
		base = asRef(baseline)
	}
	stops := make([]RefIterator, len(stopped))
	for i, s := range stopped {
		stops[i] = asRef(s)
	}
	return MergeRefs(&SliceIterator{Entries: newEntries}, base, stops, nil)
}

func asRef(it IndexIterator) RefIterator {
	if r, ok := it.(RefIterator); ok {
		return r
	}
	return &refAdapter{it: it}
}

type refAdapter struct {
	it  IndexIterator
	buf []byte
}

func (a *refAdapter) NextRef() (Ref, error) {
	e, err := a.it.Next()
	if err != nil {
		return Ref{}, err
	}
	a.buf = append(a.buf[:0], e.ProductID...)
	return Ref{ID: a.buf, Hash: e.Hash, Line: e.Line}, nil
}
