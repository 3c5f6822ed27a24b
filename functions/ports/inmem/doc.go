// Package inmem holds the in-memory stand-ins of the boundaries the unit
// tests and the benchmarks fake: Blobs (the blob store), Queue (the queue),
// Topic (the topic) and Visibility (a consumer's retry delays). Each of the
// first three passes the contract suite of its real adapter (blobtest,
// queuetest, topictest), so a test on a stand-in says something about
// production. Nothing here opens a network connection (a test may serve
// Blobs' presigned GETs: Blobs.ServeHTTP). The databases have no
// stand-in: tests run on PostgreSQL (pgstore/pgstoretest).
package inmem
