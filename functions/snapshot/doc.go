// Package snapshot reads retailer catalog snapshot files (CSV or JSON Lines,
// optionally gzip-compressed) as a stream and yields one Row per product with
// its attributes in canonical form and a content hash.
//
// # Why a canonical form
//
// The diff compares each product of a new snapshot with the one already
// applied by hash alone: equal hashes mean "unchanged, write nothing". The
// file contract says attribute order does not matter, so a snapshot that only
// reorders columns (CSV) or keys (JSON) must produce the same hashes, and so
// must the same product written once as CSV and once as JSON Lines with string
// values. The hash is therefore taken over a canonical encoding, never over
// the bytes as uploaded.
//
// # The canonical form
//
// Attributes are every field of a product except product_id, encoded as one
// JSON object:
//
//   - keys sorted by their UTF-8 bytes, at every nesting level; a key repeated
//     within one object rejects the row (duplicate_column, see below);
//   - no insignificant whitespace;
//   - strings encoded exactly as encoding/json.Marshal does with HTML escaping
//     off: only '"', '\\' and control characters are escaped (as \", \\, \b,
//     \f, \n, \r, \t or \u00xx), plus U+2028 and U+2029; everything else,
//     including '<', '>' and '&', is written as raw UTF-8. Escapes in the input
//     are decoded first, so "\u0041" and "A" are the same string;
//   - numbers kept as their literal text (1.0 stays 1.0, big integers keep all
//     digits), arrays in their order, true, false and null as they are;
//   - CSV cells are always strings (an empty cell is ""), header names are
//     the keys;
//   - a product with no attributes is {}.
//
// The hash (Hash) is the first 16 bytes of SHA-256 over those bytes.
//
// A product whose canonical attributes exceed 256 KiB
// (Limits.MaxAttributesBytes) rejects the snapshot (attributes_too_large),
// in both formats: the canonical form is what the catalog stores and what
// chunks carry, and CSV repeats every header name in it and escaping can
// make a value up to six times longer, so the row limit alone does not
// bound it.
//
// # Duplicate keys
//
// A JSON key repeated within one object (at any nesting level, "a" and
// "\u0061" being the same key) rejects the row as duplicate_column, as does a
// CSV header naming a column twice. RFC 8259 only says that names SHOULD be
// unique and that parsers then disagree (first wins, last wins, error);
// keeping one value would drop data the retailer sent without telling it,
// and a canonical form must have one key once. This is the one point where
// the reader departs from JSONTestSuite's y_ cases (y_object_duplicated_key
// and y_object_duplicated_key_and_value are rejected); corpus_test.go runs
// that suite and csv-spectrum (testdata, with their licences).
//
// # CSV as real exports write it
//
// RFC 4180, with what spreadsheet and shop exports really produce accepted:
// only a field that starts with '"' is a quoted field, and it must end at a
// ',' or the end of the record ("abc"def is malformed); a '"' anywhere else
// is a literal character (p1,Monitor 27" wide,9.99 is three fields). The
// content of a quoted field is kept byte for byte: a CRLF inside it stays
// CRLF (and so hashes apart from LF). Records end at LF or CRLF outside
// quoted fields; blank lines are skipped; a CR elsewhere outside a quoted
// field is malformed.
//
// # Lines and problems
//
// Line numbers are physical lines of the decompressed file, 1-based (a
// file that starts with its header has it on line 1); a problem with a
// record that spans lines names the line where it starts.
//
// A rejection (*Error) lists up to the first MaxProblems (100) problems,
// each with a code, a line and a message, so that a retailer fixes a file in
// one round. The reader goes on after a problem with one row: a malformed
// row (its end is where its quoting says), a missing or invalid product_id,
// invalid UTF-8, duplicate keys, a row over the row limit (skipped to its
// end) or attributes over the limit. It stops at problem MaxProblems+1
// (Error.More) and at a problem with the whole file: a bad header
// (malformed, missing_product_id_column, duplicate_column, empty_header,
// invalid_utf8 or row_too_large on the header's line), file_too_large or
// bad_gzip (these two have line 0 and come last). Duplicate product ids are
// found by the caller after sorting: Merge adds them (DuplicateProblem) to
// the reader's rejection in line order.
//
// The codes: malformed_csv, malformed_json, missing_product_id_column,
// duplicate_column, missing_product_id, invalid_product_id, invalid_utf8,
// row_too_large, attributes_too_large, file_too_large, bad_gzip,
// duplicate_product_id, empty_header (Codes).
//
// # Attribute names
//
// Reader.AttributeNames is the set of attribute names of a snapshot (the
// union over its products, sorted): the header for CSV, the rows' top-level
// keys for JSON Lines, gathered while canonicalizing (also with
// SkipAttributes) at no cost when rows repeat the previous row's keys.
//
// The package has no AWS or database dependencies; it is the domain core used
// by the diff function.
package snapshot
