// Package catalog is the domain core of catalog ingestion: generation states,
// domain errors, the content hash of a product (Hash), the compact
// per-generation index, the three-way merge-walk that decides what a new
// snapshot changes (including the repair of rows a stopped generation may
// have written, invariant I5), and the hold rules (I8).
//
// It imports only the standard library: no AWS or database package, no
// parser (snapshot imports it for Hash), no finance code, no file system (the
// diff's external sort is package diff/extsort).
package catalog
