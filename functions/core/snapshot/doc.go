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
//   - numbers written as the catalog stores and prints them, PostgreSQL
//     numeric's form (numeric_out of numeric_in): the exact value in
//     positional notation with as many digits after the point as the text
//     implies (its fraction digits less its exponent), no exponent, no sign
//     on a zero. 1.0 stays 1.0, 1.50 stays 1.50, big integers keep all
//     their digits; 1E2 is 100, 1.0e1 is 10, 100e-2 is 1.00, 2.5e-3 is
//     0.0025, -0 is 0 and -0.0 is 0.0. So the hash of a product's canonical
//     form is the hash of what the database prints once canonicalized
//     (the reconciliation hashes that), and the attributes limit applies
//     to the numbers written out;
//   - arrays in their order, true, false and null as they are;
//   - CSV cells are always strings (an empty cell is ""), header names are
//     the keys;
//   - a product with no attributes is {}.
//
// The hash (catalog.Hash) is the first 16 bytes of SHA-256 over those bytes.
//
// A product whose canonical attributes exceed 256 KiB
// (Limits.MaxAttributesBytes) rejects the snapshot (attributes_too_large),
// in both formats: the canonical form is what the catalog stores and what
// chunks carry, and CSV repeats every header name in it and escaping can
// make a value up to six times longer, so the row limit alone does not
// bound it.
//
// # One definition of valid (I11)
//
// What the reader accepts, the catalog (PostgreSQL jsonb) stores and reads
// back equal; what it cannot hold is refused here, with a line, before the
// diff writes any chunk:
//
//   - unsupported_value: U+0000 in a value or a key (a NUL byte in a CSV
//     cell or column name, \u0000 in a JSON string or key: jsonb refuses
//     it), a lone UTF-16 surrogate escape ("\ud800": jsonb refuses it), a
//     number numeric cannot hold (more than 131,072 digits before the
//     decimal point, more than 16,383 after it counting the zeros the text
//     implies, an exponent of 2^30-1 or more either way even on a zero:
//     jsonb refuses them; numeric holds every other number exactly), and
//     arrays and objects nested deeper than MaxNesting (1,000) levels
//     (jsonb refuses about 13,500 with PostgreSQL's default stack; the
//     catalog keeps a wide margin);
//   - invalid_attribute_name: an attribute name (a CSV column name other
//     than product_id, a top-level JSON key other than product_id) over
//     MaxAttributeNameBytes (1,024) bytes, holding a control character
//     (Unicode category Cc), or the reserved name _delete, which marks
//     deletes in a delta upload and is never an attribute of a full
//     snapshot. Keys of nested objects are values, not names: only U+0000
//     is refused in them;
//   - too_many_products: more products than Limits.MaxProducts (default 50
//     million), reported at the first product past the limit; the reader
//     reads no further (a gzip file that inflates past the decompressed
//     limit, Limits.MaxFileBytes, 50 GiB by default, is file_too_large the
//     same way).
//
// A product_id holding U+0000 stays invalid_product_id (its own rule
// refuses every control character). The differential test
// (store_test.go, package snapshot_test) writes what the fuzzers' corpora,
// JSONTestSuite and csv-spectrum make the reader accept to jsonb in a real
// PostgreSQL and reads it back.
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
// and y_object_duplicated_key_and_value are rejected); the other is U+0000
// (y_object_escaped_null_in_key and y_string_null_escape are rejected,
// above). corpus_test.go runs that suite and csv-spectrum (testdata, with
// their licences).
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
// end), attributes over the limit, a value it cannot hold or a bad
// attribute name. It stops at problem MaxProblems+1 (Error.More), or, when
// the caller keeps every problem (Reader.AllProblems, the problems file of
// DESIGN 13), at problem MaxListedProblems+1 (100,001), and at a
// problem with the whole file: a bad header (malformed,
// missing_product_id_column, duplicate_column, empty_header, invalid_utf8,
// row_too_large, unsupported_value or invalid_attribute_name on the
// header's line), file_too_large or
// bad_gzip (these two have line 0 and come last). Duplicate product ids are
// found by the caller after sorting: Merge adds them (DuplicateProblem) to
// the reader's rejection in line order.
//
// Too many products (too_many_products) stops the reader too, at the line
// of the first product past the limit.
//
// Every problem's message is at most MaxMessageBytes (512) bytes, also
// once encoded as a JSON string: a column name, key, product_id or number
// quoted from the file is cut, with "…". 100 problems then fit a status of
// 64 KiB however bad the file (I12).
//
// The codes: malformed_csv, malformed_json, missing_product_id_column,
// duplicate_column, missing_product_id, invalid_product_id, invalid_utf8,
// row_too_large, attributes_too_large, file_too_large, bad_gzip,
// duplicate_product_id, empty_header, unsupported_value,
// invalid_attribute_name, too_many_products (Codes).
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
