// Package catalog is the domain core of catalog ingestion: generation states,
// domain errors, the compact per-generation index, the three-way merge-walk
// that decides what a new snapshot changes (including the repair of rows a
// stopped generation may have written, invariant I5), and the hold rules (I8).
// It imports no AWS or database package.
package catalog
