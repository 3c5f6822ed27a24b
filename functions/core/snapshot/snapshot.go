package snapshot

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"unicode/utf8"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// Format names a snapshot file format.
type Format string

// The snapshot formats.
const (
	// FormatAuto sniffs the format: the first non-blank byte (after an
	// optional UTF-8 BOM, after gunzip) '{' means JSON Lines, anything else
	// CSV. An empty file sniffs as CSV.
	FormatAuto  Format = ""
	FormatCSV   Format = "csv"
	FormatJSONL Format = "jsonl"
)

// ParseFormat parses a format name: "" (auto), "csv" or "jsonl".
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case FormatAuto, FormatCSV, FormatJSONL:
		return f, nil
	}
	return "", fmt.Errorf("snapshot: unknown format %q (want \"csv\", \"jsonl\" or empty for auto)", s)
}

// Default limits.
const (
	DefaultMaxRowBytes = 1 << 20
	// DefaultMaxAttributesBytes bounds the canonical attributes of one
	// product (256 KiB).
	DefaultMaxAttributesBytes = 256 << 10
	// MaxProductIDBytes is the longest product_id accepted, in bytes.
	MaxProductIDBytes = 256
	// MaxProblems is the most problems a rejection lists.
	MaxProblems = 100
	// DefaultMaxFileBytes bounds the decompressed bytes of a snapshot
	// (50 GiB): a gzip file that inflates past it is rejected
	// (file_too_large).
	DefaultMaxFileBytes = 50 << 30
	// DefaultMaxProducts bounds the products of a snapshot (50 million).
	DefaultMaxProducts = 50_000_000
	// MaxAttributeNameBytes is the longest attribute name accepted (a CSV
	// column name, a top-level JSON key), in bytes.
	MaxAttributeNameBytes = 1024
	// MaxNesting bounds the nesting of JSON arrays and objects in a row,
	// the row's own object included. PostgreSQL's jsonb input refuses
	// about 13,500 levels with its default max_stack_depth (2 MB); the
	// catalog takes an order of magnitude less, so that every reader of a
	// stored value (jsonb functions, consumers decoding events) has room.
	MaxNesting = 1000
	// MaxMessageBytes bounds a problem's message, in bytes, even once
	// encoded as a JSON string (with HTML escaping, as encoding/json
	// writes it): 100 problems fit a status of 64 KiB.
	MaxMessageBytes = 512
	// DeleteAttribute is the reserved name that marks a product deleted in
	// a delta upload; it is never an attribute, and a full snapshot that
	// uses it is rejected (invalid_attribute_name).
	DeleteAttribute = "_delete"
)

// Limits bound what a reader accepts. Zero fields take the defaults.
type Limits struct {
	// MaxRowBytes bounds a row: a CSV record (including embedded newlines,
	// quotes and separators) or a JSON line, without its line terminator.
	// A longer row is rejected with CodeRowTooLarge. Default (<= 0)
	// DefaultMaxRowBytes.
	MaxRowBytes int
	// MaxAttributesBytes bounds the canonical attributes of one product
	// (Row.Attributes, whether returned or skipped): a product over it is
	// rejected with CodeAttributesTooLarge. Default (<= 0)
	// DefaultMaxAttributesBytes.
	MaxAttributesBytes int
	// MaxFileBytes bounds the decompressed bytes read; more is rejected with
	// CodeFileTooLarge (this guards against gzip bombs) as soon as the
	// limit is passed. Default (0) DefaultMaxFileBytes; < 0 unlimited.
	MaxFileBytes int64
	// MaxProducts bounds the products of the snapshot: the record past it
	// is rejected with CodeTooManyProducts and the reader reads no
	// further. Every non-blank record after a CSV header counts, a row
	// with a problem too. Default (0) DefaultMaxProducts; < 0 unlimited.
	MaxProducts int64
	// Delta reads a delta upload (DESIGN 13): the reserved DeleteAttribute
	// is accepted as a column or key (ParseDelta reads it) instead of
	// rejected (invalid_attribute_name), and the rejections for
	// MaxProducts and MaxFileBytes say to send a full snapshot instead.
	// Every other check is the same.
	Delta bool
}

// WithDefaults is l with every unset limit at its default (and a negative
// MaxFileBytes or MaxProducts unlimited): the limits a Reader applies.
func (l Limits) WithDefaults() Limits {
	if l.MaxRowBytes <= 0 {
		l.MaxRowBytes = DefaultMaxRowBytes
	}
	l.MaxRowBytes = min(l.MaxRowBytes, math.MaxInt32) // room for the buffer arithmetic
	if l.MaxAttributesBytes <= 0 {
		l.MaxAttributesBytes = DefaultMaxAttributesBytes
	}
	switch {
	case l.MaxFileBytes == 0:
		l.MaxFileBytes = DefaultMaxFileBytes
	case l.MaxFileBytes < 0:
		l.MaxFileBytes = math.MaxInt64
	}
	switch {
	case l.MaxProducts == 0:
		l.MaxProducts = DefaultMaxProducts
	case l.MaxProducts < 0:
		l.MaxProducts = math.MaxInt64
	}
	return l
}

// Row is one product of a snapshot.
type Row struct {
	ProductID string
	// Attributes is the canonical JSON object of every attribute except
	// product_id ("{}" when none). Each Row owns its slice: it stays valid
	// after later calls to Next.
	Attributes []byte
	Hash       catalog.Hash // catalog.HashAttributes(Attributes)
	Line       int          // 1-based physical line in the (decompressed) file where the row starts
}

// Error codes: the reason a snapshot is rejected whole.
const (
	CodeMalformedCSV           = "malformed_csv"
	CodeMalformedJSON          = "malformed_json"
	CodeMissingProductIDColumn = "missing_product_id_column"
	CodeDuplicateColumn        = "duplicate_column"
	CodeMissingProductID       = "missing_product_id"
	CodeInvalidProductID       = "invalid_product_id"
	CodeInvalidUTF8            = "invalid_utf8"
	CodeRowTooLarge            = "row_too_large"
	CodeFileTooLarge           = "file_too_large"
	CodeBadGzip                = "bad_gzip"
	CodeDuplicateProductID     = "duplicate_product_id"
	CodeEmptyHeader            = "empty_header"
	CodeAttributesTooLarge     = "attributes_too_large"
	// CodeUnsupportedValue: a value or key the catalog cannot hold (U+0000,
	// a lone UTF-16 surrogate escape, a number out of PostgreSQL numeric's
	// range, nesting deeper than MaxNesting).
	CodeUnsupportedValue = "unsupported_value"
	// CodeInvalidAttributeName: an attribute name over
	// MaxAttributeNameBytes, holding a control character, or reserved
	// (DeleteAttribute).
	CodeInvalidAttributeName = "invalid_attribute_name"
	// CodeTooManyProducts: more products than Limits.MaxProducts.
	CodeTooManyProducts = "too_many_products"
)

// Codes lists every error code, in the order of the constants above.
var Codes = []string{
	CodeMalformedCSV, CodeMalformedJSON, CodeMissingProductIDColumn,
	CodeDuplicateColumn, CodeMissingProductID, CodeInvalidProductID,
	CodeInvalidUTF8, CodeRowTooLarge, CodeFileTooLarge, CodeBadGzip,
	CodeDuplicateProductID, CodeEmptyHeader, CodeAttributesTooLarge,
	CodeUnsupportedValue, CodeInvalidAttributeName, CodeTooManyProducts,
}

// Problem is one reason a snapshot is rejected.
type Problem struct {
	Code    string `json:"code"`    // snake_case, one of the Code* constants
	Line    int    `json:"line"`    // 1-based line, 0 when not about a line
	Message string `json:"message"` // human readable, starts with "line N: " when Line > 0
}

// Error is the rejection of a snapshot: the problems found in it.
//
// Code, Message and Line are those of the first problem. Line is the
// 1-based physical line of the decompressed file the problem is about, 0
// when it is not about a line (file_too_large, bad_gzip); a problem with a
// row names the line where the row starts, even when the row spans lines.
//
// Problems lists up to MaxProblems problems in line order, problems about
// the whole file (Line 0) last; Problems[0] is Code/Line/Message. More is
// set when there are more problems than listed. An Error built by hand may
// leave Problems nil: List returns its problems either way.
type Error struct {
	Code     string // snake_case, one of the Code* constants
	Message  string // human readable, says what and where, e.g. "line 12: column count 3, header has 4"
	Line     int    // 1-based line, 0 when not about a line
	Problems []Problem
	More     bool // problems past the listed ones exist
}

func (e *Error) Error() string {
	s := "snapshot " + e.Code + ": " + e.Message
	switch n := len(e.Problems) - 1; {
	case n > 0 && e.More:
		s += fmt.Sprintf(" (and %d more problems listed, more not listed)", n)
	case n > 0:
		s += fmt.Sprintf(" (and %d more problems)", n)
	case e.More:
		s += " (and more problems not listed)"
	}
	return s
}

// List returns the problems of e: Problems, or the one problem of Code,
// Line and Message when Problems is empty.
//
// A message is at most MaxMessageBytes (also JSON-encoded): Reject bounds
// the problems it is given, and List bounds the one of an Error built by
// hand.
func (e *Error) List() []Problem {
	if len(e.Problems) > 0 {
		return e.Problems
	}
	return []Problem{{Code: e.Code, Line: e.Line, Message: boundMessage(e.Message)}}
}

// NewError returns the Error of one problem.
func NewError(code string, line int, message string) *Error {
	return Reject([]Problem{{Code: code, Line: line, Message: message}}, false)
}

// Reject returns the Error listing problems (in line order, problems of
// line 0 last, cut to the first MaxProblems, each message cut to
// MaxMessageBytes), nil when there are none. more says that problems
// exist past those given.
func Reject(problems []Problem, more bool) *Error {
	if len(problems) == 0 {
		return nil
	}
	p := slices.Clone(problems)
	slices.SortStableFunc(p, func(a, b Problem) int {
		// Line 0 (the whole file) sorts last.
		return cmp.Compare(uint(a.Line-1), uint(b.Line-1))
	})
	if len(p) > MaxProblems {
		p, more = p[:MaxProblems:MaxProblems], true
	}
	for i := range p {
		p[i].Message = boundMessage(p[i].Message)
	}
	return &Error{Code: p[0].Code, Line: p[0].Line, Message: p[0].Message, Problems: p, More: more}
}

// Merge returns the rejection of a snapshot for which the Reader returned
// err (nil when it found no problem) and in which more problems were found
// apart from it: the duplicate product ids that the caller finds by sorting
// the rows (DuplicateProblem). The result lists both in line order, cut to
// the first MaxProblems; it is nil when there is no problem at all.
//
// The list is exactly the snapshot's first problems: a Reader that stops
// early (at problem MaxProblems+1, or at a problem about the whole file)
// has returned every row before the point where it stopped, so every
// duplicate found among those rows is before it too.
func Merge(err *Error, more ...Problem) *Error {
	if err == nil {
		return Reject(more, false)
	}
	return Reject(append(slices.Clone(err.List()), more...), err.More)
}

func lineErr(code string, line int, format string, args ...any) *Error {
	return NewError(code, line, fmt.Sprintf("line %d: ", line)+fmt.Sprintf(format, args...))
}

// DuplicateProblem is the problem of a product_id found twice in one
// snapshot, first on line firstLine, again on secondLine (its Line). The
// Reader does not find duplicates: the caller does, after sorting, and
// merges them into the Reader's rejection with Merge.
func DuplicateProblem(id string, firstLine, secondLine int) Problem {
	e := DuplicateError(id, firstLine, secondLine)
	return e.Problems[0]
}

// DuplicateError is the Error of one duplicate product_id (see
// DuplicateProblem).
func DuplicateError(id string, firstLine, secondLine int) *Error {
	return lineErr(CodeDuplicateProductID, secondLine, "duplicate product_id %s, first on line %d", quoteCutString(id), firstLine)
}

// attributeNameProblem returns "" when name (valid UTF-8) may be the name
// of an attribute (a CSV column name, a top-level JSON key other than
// product_id), else an error code and the reason: a NUL byte
// (CodeUnsupportedValue), over MaxAttributeNameBytes, a control character
// (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) or the reserved
// DeleteAttribute (CodeInvalidAttributeName). Nested object keys are
// values, not names: only what the catalog cannot store (U+0000) is
// refused in them.
func attributeNameProblem(name []byte, delta bool) (code, reason string) {
	if bytes.IndexByte(name, 0) >= 0 {
		return CodeUnsupportedValue, fmt.Sprintf("attribute name %s holds a NUL byte (U+0000), which the catalog cannot store", quoteCut(name))
	}
	if len(name) > MaxAttributeNameBytes {
		return CodeInvalidAttributeName, fmt.Sprintf("attribute name %s is %d bytes, over the limit of %d", quoteCut(name), len(name), MaxAttributeNameBytes)
	}
	if i := controlChar(name); i >= 0 {
		r, _ := utf8.DecodeRune(name[i:])
		return CodeInvalidAttributeName, fmt.Sprintf("attribute name %s holds control character U+%04X at byte %d", quoteCut(name), r, i+1)
	}
	if string(name) == DeleteAttribute && !delta {
		return CodeInvalidAttributeName, `"_delete" is reserved (it marks a product deleted in a delta upload) and cannot be an attribute of a full snapshot: leave the products to delete out of the file`
	}
	return "", ""
}

// controlChar returns the byte offset of the first control character
// (U+0000-U+001F, U+007F-U+009F) in s, valid UTF-8, or -1.
func controlChar(s []byte) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || (c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f) {
			return i
		}
	}
	return -1
}

// ValidProductID reports whether id is acceptable as a product_id: 1 to
// MaxProductIDBytes bytes of valid UTF-8 without control characters
// (U+0000-U+001F, U+007F-U+009F).
func ValidProductID(id string) bool {
	return checkProductID([]byte(id)) == ""
}

// checkProductID returns "" when id is valid, else an error code and reason
// via productIDProblem. The UTF-8 check comes first so that a caller that
// validated UTF-8 already never sees CodeInvalidUTF8 from here.
func checkProductID(id []byte) string {
	code, _ := productIDProblem(id)
	return code
}

func productIDProblem(id []byte) (code, reason string) {
	if len(id) == 0 {
		return CodeMissingProductID, "empty product_id"
	}
	if !utf8.Valid(id) {
		return CodeInvalidUTF8, "invalid UTF-8 in product_id"
	}
	if len(id) > MaxProductIDBytes {
		return CodeInvalidProductID, fmt.Sprintf("product_id is %d bytes, the limit is %d", len(id), MaxProductIDBytes)
	}
	if i := controlChar(id); i >= 0 {
		r, _ := utf8.DecodeRune(id[i:])
		return CodeInvalidProductID, fmt.Sprintf("product_id contains control character U+%04X at byte %d", r, i+1)
	}
	return "", ""
}
