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
	// The members of a product's attributes fit these on the stack (a
	// plan has a line for every changed row); more grow on the heap.
	var beforeMem, afterMem [32]member
	before, err := splitObject(beforeMem[:0], from)
	if err != nil {
		return dst, false, fmt.Errorf("product %q, before: %w", productID, err)
	}
	after, err := splitObject(afterMem[:0], to)
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

// splitObject splits a compact JSON object (canonical form: no white
// space, keys sorted) into its members, in order, appended to out.
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
			i = stringEnd(b, i+1)
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

// stringEnd returns the index of the '"' that closes the JSON string whose
// content starts at i (a '"' after an even number of backslashes), or
// len(b) when none does.
func stringEnd(b []byte, i int) int {
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		q := i + j
		k := q
		for k > i && b[k-1] == '\\' {
			k--
		}
		if (q-k)%2 == 0 {
			return q
		}
		i = q + 1
	}
}

// appendJSONString appends s as a JSON string (s is valid UTF-8: a
// product_id the reader took), as json.Marshal writes it: a string of
// printable ASCII without anything it escapes is copied as it is.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// The bounds of an applied generation's plan (DESIGN 13): it is held in
// memory until sorted, so a generation changing more products, or with
// more bytes of plan lines, keeps none (409 plan_unavailable).
const (
	MaxAppliedPlanOps   = 100_000
	MaxAppliedPlanBytes = 128 << 20
)

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
	var doc PlanIndexDoc
	var cur []byte
	n := 0
	for i, e := range entries {
		if n > 0 && (n >= PlanPageItems || len(cur)+len(e.Line)+1 > PlanPageBytes) {
			pages = append(pages, cur)
			doc.Pages[len(doc.Pages)-1].Items = n
			cur, n = nil, 0
		}
		if n == 0 {
			doc.Pages = append(doc.Pages, PlanPageRef{First: e.ProductID})
			cur = make([]byte, 0, pageSize(entries[i:]))
		}
		cur = append(append(cur, e.Line...), '\n')
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

// pageSize is the size of the page of BuildPlanPages that starts with
// entries[0].
func pageSize(entries []PlanEntry) int {
	size := 0
	for i, e := range entries {
		if i > 0 && (i >= PlanPageItems || size+len(e.Line)+1 > PlanPageBytes) {
			break
		}
		size += len(e.Line) + 1
	}
	return size
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
