// Package extsort is the diff's external merge sort: it collects a new
// snapshot's (product_id, hash, line) entries in file order and yields them
// sorted by product_id in bounded memory, spilling sorted runs to a
// temporary file (os, syscall) when they outgrow the budget. It writes the
// index format of package catalog and yields catalog.Ref entries, so the
// domain core's merge-walk consumes it without depending on it.
package extsort
