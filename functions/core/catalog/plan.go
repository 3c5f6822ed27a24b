package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Plan operations (DESIGN 13): what a generation does to one product.
const (
	PlanInsert = "insert"
	PlanUpdate = "update"
	PlanDelete = "delete"
)

// FieldChange is one attribute's value before and after (JSON; "null" for
// an absent attribute as for a JSON null).
type FieldChange struct {
	From json.RawMessage `json:"from"`
	To   json.RawMessage `json:"to"`
}

// PlanItem is what a generation does to one product: its op and the
// attributes that differ.
type PlanItem struct {
	ProductID string                 `json:"product_id"`
	Op        string                 `json:"op"`
	Fields    map[string]FieldChange `json:"fields"`
}

// PlanChange returns the plan item that takes a product from attributes
// from to attributes to (JSON objects; nil: the product is absent), and
// false when nothing differs. Values are compared as canonical JSON (the
// reader's canonical form, which is also what jsonb gives back once
// canonicalized by the caller); an absent attribute equals a JSON null.
func PlanChange(productID string, from, to []byte) (PlanItem, bool, error) {
	if from == nil && to == nil {
		return PlanItem{}, false, nil
	}
	before, err := topLevel(from)
	if err != nil {
		return PlanItem{}, false, fmt.Errorf("product %q, before: %w", productID, err)
	}
	after, err := topLevel(to)
	if err != nil {
		return PlanItem{}, false, fmt.Errorf("product %q, after: %w", productID, err)
	}
	item := PlanItem{ProductID: productID, Op: PlanUpdate, Fields: map[string]FieldChange{}}
	switch {
	case from == nil:
		item.Op = PlanInsert
	case to == nil:
		item.Op = PlanDelete
	}
	null := json.RawMessage("null")
	for name, v := range before {
		w, ok := after[name]
		if !ok {
			w = null
		}
		if !bytes.Equal(v, w) {
			item.Fields[name] = FieldChange{From: v, To: w}
		}
	}
	for name, w := range after {
		if _, ok := before[name]; !ok && !bytes.Equal(w, null) {
			item.Fields[name] = FieldChange{From: null, To: w}
		}
	}
	if item.Op == PlanUpdate && len(item.Fields) == 0 {
		return PlanItem{}, false, nil
	}
	return item, true, nil
}

// topLevel splits a JSON object into its attributes' raw values.
func topLevel(object []byte) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if object == nil {
		return out, nil
	}
	if err := json.Unmarshal(object, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// Plan pages: a plan is written as pages of at most PlanPageItems items and
// PlanPageBytes bytes, in product_id order, with an index of each page's
// first product_id, so that a page of the plan route reads the index and
// one or two pages, whatever the plan's size.
const (
	PlanPageItems = 1000
	PlanPageBytes = 4 << 20
)

// PlanPageRef is one page of a plan in its index.
type PlanPageRef struct {
	First string `json:"first"` // its first product_id
	Items int    `json:"items"`
}

// PlanIndexDoc is a plan's page index.
type PlanIndexDoc struct {
	Pages []PlanPageRef `json:"pages"`
}

// BuildPlanPages sorts items by product_id and splits them into pages (one
// JSON object a line) and their index.
func BuildPlanPages(items []PlanItem) (pages [][]byte, index []byte, err error) {
	sort.Slice(items, func(i, j int) bool { return items[i].ProductID < items[j].ProductID })
	var doc PlanIndexDoc
	var cur []byte
	n := 0
	for _, it := range items {
		line, err := json.Marshal(it)
		if err != nil {
			return nil, nil, fmt.Errorf("plan item %q: %w", it.ProductID, err)
		}
		if n > 0 && (n >= PlanPageItems || len(cur)+len(line)+1 > PlanPageBytes) {
			pages = append(pages, cur)
			doc.Pages[len(doc.Pages)-1].Items = n
			cur, n = nil, 0
		}
		if n == 0 {
			doc.Pages = append(doc.Pages, PlanPageRef{First: it.ProductID})
		}
		cur = append(append(cur, line...), '\n')
		n++
	}
	if n > 0 {
		pages = append(pages, cur)
		doc.Pages[len(doc.Pages)-1].Items = n
	}
	if doc.Pages == nil {
		doc.Pages = []PlanPageRef{}
	}
	index, err = json.Marshal(doc)
	return pages, index, err
}

// FirstPlanPage is the page of the index where the items after product
// id after begin: the last page whose first id is <= after (0 when after
// is "" or before every page).
func (d PlanIndexDoc) FirstPlanPage(after string) int {
	i, _ := slices.BinarySearchFunc(d.Pages, after, func(p PlanPageRef, id string) int {
		switch {
		case p.First < id:
			return -1
		case p.First > id:
			return 1
		}
		return 0
	})
	// i: the first page whose first id >= after.
	if i < len(d.Pages) && d.Pages[i].First == after {
		return i
	}
	return max(i-1, 0)
}
