// Package blob holds the blob store boundary's own types and errors: what
// the handlers read and write through it, whatever store is behind (the S3
// adapter s3blob, or the in-memory one of package inmem). It imports no AWS
// package. The contract every store keeps is the suite in blobtest.
package blob

import (
	"errors"
	"io"
	"time"
)

// ErrNotFound reports a missing object.
var ErrNotFound = errors.New("object not found")

// ErrChanged reports that an object is not the version asked for (its ETag differs).
var ErrChanged = errors.New("object changed")

// Object is an open object: its body, size and version tag.
type Object struct {
	Body io.ReadCloser
	Size int64
	ETag string
}

// PresignedRequest is a request a client can make without credentials.
type PresignedRequest struct {
	Method  string
	URL     string
	Headers map[string]string
	Expires time.Time
}

// Writer is an object written as a stream, for objects too large to hold
// in memory: nothing is visible at its key until Close returns nil, which
// makes the whole object appear at once. Abort discards what was written
// (and does nothing after a successful Close); a failed Write or Close
// leaves no object either, and every later call returns the same error.
type Writer interface {
	io.Writer
	// Close writes the rest and makes the object appear.
	Close() error
	// Abort discards the object.
	Abort() error
}
