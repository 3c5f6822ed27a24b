// Package inmem holds the in-memory stand-in of every boundary the handlers
// use: Blobs (the blob store), Queue (the queue) and Store (the control and
// shard databases). The unit tests and the benchmarks share them, and each
// passes the same contract suite as its real adapter (blobtest, queuetest,
// storetest), so a test on the stand-in says something about production.
// Nothing here talks to a network or a database.
package inmem
