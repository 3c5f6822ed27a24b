package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Plan operations (DESIGN 13): what a generation does to one product.
const (
	PlanInsert = "insert"
	PlanUpdate = "update"
	PlanDelete = "delete"
)

// PlanLine appends to dst the plan item (one JSON object, the plan
// route's item) that takes a product from attributes from to attributes
// to, both canonical JSON objects (the reader's canonical form; nil: the
// product is absent), and reports false when nothing differs (dst is then
// returned as it was). Only the attributes whose canonical values differ
// are listed; an absent attribute equals a JSON null. Written by hand, not
// through encoding/json: a plan has a line for every changed row.
func PlanLine(dst []byte, productID string, from, to []byte) ([]byte, bool, error) {
	if from == nil && to == nil {
		return dst, false, nil
	}
	// The members of a typical product fit on the stack.
	var beforeBuf, afterBuf [24]member
	before, err := splitObject(beforeBuf[:0], from)
	if err != nil {
		return dst, false, fmt.Errorf("product %q, before: %w", productID, err)
	}
	after, err := splitObject(afterBuf[:0], to)
	if err != nil {
		return dst, false, fmt.Errorf("product %q, after: %w", productID, err)
	}
	op := PlanUpdate
	switch {
	case from == nil:
		op = PlanInsert
	case to == nil:
		op = PlanDelete
	}
	mark := len(dst)
	dst = append(dst, `{"product_id":`...)
	dst = appendJSONString(dst, productID)
	dst = append(dst, `,"op":"`...)
	dst = append(dst, op...)
	dst = append(dst, `","fields":{`...)
	null := []byte("null")
	n := 0
	field := func(name, f, t []byte) {
		if n > 0 {
			dst = append(dst, ',')
		}
		n++
		dst = append(dst, name...)
		dst = append(dst, `:{"from":`...)
		dst = append(dst, f...)
		dst = append(dst, `,"to":`...)
		dst = append(dst, t...)
		dst = append(dst, '}')
	}
	// Both lists are in key order (canonical form): one merge walk.
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		switch {
		case j == len(after) || (i < len(before) && bytes.Compare(before[i].name, after[j].name) < 0):
			if !bytes.Equal(before[i].value, null) {
				field(before[i].name, before[i].value, null)
			}
			i++
		case i == len(before) || bytes.Compare(after[j].name, before[i].name) < 0:
			if !bytes.Equal(after[j].value, null) {
				field(after[j].name, null, after[j].value)
			}
			j++
		default:
			if !bytes.Equal(before[i].value, after[j].value) {
				field(before[i].name, before[i].value, after[j].value)
			}
			i, j = i+1, j+1
		}
	}
	if op == PlanUpdate && n == 0 {
		return dst[:mark], false, nil
	}
	return append(dst, "}}"...), true, nil
}

// member is one attribute of a JSON object: its key as written (a JSON
// string, quotes included) and its value's bytes.
type member struct{ name, value []byte }

// splitObject appends to out the members of a compact JSON object
// (canonical form: no white space, keys sorted), in order.
func splitObject(out []member, object []byte) ([]member, error) {
	if object == nil {
		return out, nil
	}
	if len(object) < 2 || object[0] != '{' || object[len(object)-1] != '}' {
		return nil, fmt.Errorf("not a JSON object")
	}
	p := 1
	for p < len(object)-1 {
		if object[p] == ',' {
			p++
		}
		k, err := skipValue(object, p)
		if err != nil || object[p] != '"' || k >= len(object) || object[k] != ':' {
			return nil, fmt.Errorf("bad key at byte %d", p)
		}
		v, err := skipValue(object, k+1)
		if err != nil {
			return nil, err
		}
		out = append(out, member{name: object[p:k], value: object[k+1 : v]})
		p = v
	}
	sorted := slices.IsSortedFunc(out, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	if !sorted {
		slices.SortFunc(out, func(a, b member) int { return bytes.Compare(a.name, b.name) })
	}
	return out, nil
}

// skipValue returns the end of the compact JSON value that starts at p.
func skipValue(b []byte, p int) (int, error) {
	depth := 0
	for i := p; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; i < len(b) && b[i] != '"'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
			if depth == 0 {
				return i + 1, nil
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return i, nil // the end of the enclosing object
			}
			if depth == 0 {
				return i + 1, nil
			}
		case ',', ':':
			if depth == 0 {
				return i, nil
			}
		}
	}
	if depth != 0 {
		return 0, fmt.Errorf("unterminated value at byte %d", p)
	}
	return len(b), nil
}

// appendJSONString appends s as a JSON string (s is valid UTF-8: a
// product_id the reader took), as json.Marshal writes it: directly when
// no byte of it needs escaping (printable ASCII but ", \, <, > and &).
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// MaxKeptPlanBytes bounds a generation's plan (DESIGN 13): its entries
// (ids and plan lines) are sorted by product_id through sorted runs
// spilled to the diff's temporary storage (on Lambda its 10 GiB ephemeral
// storage, which the snapshot's own sorted runs share: ~5.5 GiB at 20M
// products with 256-byte ids), so a generation whose plan takes more, or
// finds no space left, keeps none (409 plan_unavailable). Its number of
// operations is not bounded.
const MaxKeptPlanBytes = 4 << 30

// PlanEntry is one item of a plan as written: its product_id and its JSON line.
type PlanEntry struct {
	ProductID string
	Line      []byte
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

// BuildPlanPages sorts entries by product_id and splits them into pages
// (one JSON object a line) and their index.
func BuildPlanPages(entries []PlanEntry) (pages [][]byte, index []byte, err error) {
	slices.SortFunc(entries, func(a, b PlanEntry) int { return strings.Compare(a.ProductID, b.ProductID) })
	var p PlanPager
	for _, e := range entries {
		if page := p.Add(e.ProductID, e.Line); page != nil {
			pages = append(pages, page)
		}
	}
	last, index, err := p.Finish()
	if last != nil {
		pages = append(pages, last)
	}
	return pages, index, err
}

// PlanPager splits a plan's entries, given in product_id order, into
// pages as BuildPlanPages does, one page at a time: a plan of any size is
// written holding one page and its index.
type PlanPager struct {
	doc PlanIndexDoc
	cur []byte
	n   int
}

// Add adds the next entry (line is copied) and returns the page it closes
// (the one before it), or nil.
func (p *PlanPager) Add(productID string, line []byte) (page []byte) {
	if p.n > 0 && (p.n >= PlanPageItems || len(p.cur)+len(line)+1 > PlanPageBytes) {
		page = p.cur
		p.doc.Pages[len(p.doc.Pages)-1].Items = p.n
		p.cur, p.n = nil, 0
	}
	if p.n == 0 {
		p.doc.Pages = append(p.doc.Pages, PlanPageRef{First: productID})
	}
	p.cur = append(append(p.cur, line...), '\n')
	p.n++
	return page
}

// Finish returns the last page (nil when there is none) and the index.
func (p *PlanPager) Finish() (last []byte, index []byte, err error) {
	if p.n > 0 {
		last = p.cur
		p.doc.Pages[len(p.doc.Pages)-1].Items = p.n
		p.cur, p.n = nil, 0
	}
	if p.doc.Pages == nil {
		p.doc.Pages = []PlanPageRef{}
	}
	index, err = json.Marshal(p.doc)
	return last, index, err
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
