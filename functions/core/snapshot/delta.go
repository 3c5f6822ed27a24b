package snapshot

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// DeltaOp is what one row of a delta upload (DESIGN 13) does to its
// product, or what several rows of successive deltas do together
// (ComposeDelta).
type DeltaOp struct {
	ProductID string
	Line      int // the row's line (of the last delta, for a composition)
	// Delete removes the product (JSON Lines `"_delete": true`, a CSV
	// `_delete` cell `true`); Set is then ignored.
	Delete bool
	// Set holds the attributes the row gives, as canonical JSON values: each
	// replaces the product's value of that attribute, and a JSON null
	// removes it. Attributes not in Set keep their value.
	Set map[string]json.RawMessage
	// Replace makes the product's attributes exactly Set (its nulls left
	// out), whatever they were: a delete followed by a later row.
	Replace bool
}

var jsonTrue, jsonNull, csvTrue = []byte("true"), []byte("null"), []byte(`"true"`)

// DeleteProblem is the problem of a delta row (as ParseDelta reads it)
// whose DeleteAttribute is neither a delete nor a keep: JSON Lines takes
// true, false or null, CSV the cells "true", "false" or empty
// (case-sensitive, no spaces). Anything else ("True", "1", "true ", a
// JSON "true" string) is refused (unsupported_value) rather than read as
// a keep: a row meant as a delete would otherwise update the product
// (in CSV, blank its attributes). nil when the row is fine.
func DeleteProblem(row Row, format Format) *Error {
	var attrs map[string]json.RawMessage
	if json.Unmarshal(row.Attributes, &attrs) != nil {
		return nil // ParseDelta reports it
	}
	v, ok := attrs[DeleteAttribute]
	if !ok {
		return nil
	}
	allowed, say := []string{"true", "false", "null"}, "true (delete), false or null (keep)"
	if format == FormatCSV {
		allowed, say = []string{`"true"`, `"false"`, `""`}, "the cell true (delete), false or an empty cell (keep), lower case without spaces"
	}
	if slices.Contains(allowed, string(v)) {
		return nil
	}
	return lineErr(CodeUnsupportedValue, row.Line, "product %s: _delete is %s; it takes %s", quoteCutString(row.ProductID), quoteCut(v), say)
}

// ParseDelta reads a delta row (a Row of a Reader with Limits.Delta set)
// of format (FormatCSV or FormatJSONL, the reader's Format): its
// DeleteAttribute marks a delete when it is JSON true (JSON Lines) or the
// cell "true" (CSV, case-sensitive), and is never an attribute.
func ParseDelta(row Row, format Format) (DeltaOp, error) {
	op := DeltaOp{ProductID: row.ProductID, Line: row.Line}
	if err := json.Unmarshal(row.Attributes, &op.Set); err != nil {
		return op, fmt.Errorf("delta row on line %d: %w", row.Line, err)
	}
	if v, ok := op.Set[DeleteAttribute]; ok {
		del := jsonTrue
		if format == FormatCSV {
			del = csvTrue
		}
		op.Delete = bytes.Equal(v, del)
		delete(op.Set, DeleteAttribute)
	}
	if op.Delete {
		op.Set = nil
	}
	return op, nil
}

// ComposeDelta is the op of prev then next on the same product: a delete
// wins whatever came before; a row after a delete replaces; two rows
// merge, next's values (and removals) over prev's.
func ComposeDelta(prev, next DeltaOp) DeltaOp {
	if next.Delete || next.Replace {
		return next
	}
	if prev.Delete {
		next.Replace = true
		return next
	}
	set := maps.Clone(prev.Set)
	if set == nil {
		set = map[string]json.RawMessage{}
	}
	maps.Copy(set, next.Set)
	return DeltaOp{ProductID: next.ProductID, Line: next.Line, Set: set, Replace: prev.Replace}
}

// Apply returns the product's canonical attributes after op, given its
// canonical attributes before (nil: not in the catalog), and whether the
// product exists after. A product not in the catalog is inserted with the
// attributes Set gives (an attribute set to null is absent); deleting it
// leaves it absent. Attributes over maxBytes canonical bytes (<= 0:
// DefaultMaxAttributesBytes) are refused (attributes_too_large, on op's
// line), as the reader refuses them in a full snapshot (I11).
func (op DeltaOp) Apply(before []byte, maxBytes int) (after []byte, exists bool, err error) {
	if op.Delete {
		return nil, false, nil
	}
	attrs := map[string]json.RawMessage{}
	if before != nil && !op.Replace {
		if err := json.Unmarshal(before, &attrs); err != nil {
			return nil, false, fmt.Errorf("product %q: stored attributes: %w", op.ProductID, err)
		}
	}
	for k, v := range op.Set {
		if bytes.Equal(v, jsonNull) {
			delete(attrs, k)
		} else {
			attrs[k] = v
		}
	}
	obj := []byte{'{'}
	for i, k := range slices.Sorted(maps.Keys(attrs)) {
		if i > 0 {
			obj = append(obj, ',')
		}
		obj = AppendJSONString(obj, k)
		obj = append(obj, ':')
		obj = append(obj, attrs[k]...)
	}
	obj = append(obj, '}')
	after, err = Canonicalize(obj)
	if err != nil {
		return nil, false, fmt.Errorf("product %q: merged attributes: %w", op.ProductID, err)
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxAttributesBytes
	}
	if len(after) > maxBytes {
		return nil, false, lineErr(CodeAttributesTooLarge, op.Line,
			"product %s: its attributes with this delta take %d bytes as canonical JSON, over the limit of %d", quoteCutString(op.ProductID), len(after), maxBytes)
	}
	return after, true, nil
}

// AppendJSONLine appends the JSON Lines row of a product (canonical
// attributes attrs) and a newline: what a full snapshot holding it reads
// back as the same row.
func AppendJSONLine(dst []byte, productID string, attrs []byte) []byte {
	dst = append(dst, `{"product_id":`...)
	dst = AppendJSONString(dst, productID)
	if len(attrs) > 2 {
		dst = append(dst, ',')
		dst = append(dst, attrs[1:]...)
	} else {
		dst = append(dst, '}')
	}
	return append(dst, '\n')
}
