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
//     within one object rejects the snapshot (duplicate_column);
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
// The package has no AWS or database dependencies; it is the domain core used
// by the diff function.
package snapshot
