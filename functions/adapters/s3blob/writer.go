package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// PartSize is the size of the parts of a streamed object: an object that
// ends smaller is one PutObject, a larger one a multipart upload (S3 allows
// 10,000 parts: 80 GB). A writer holds two parts in memory, one filling
// while the other uploads.
const PartSize = 8 << 20

// Create starts an object written as a stream (see blob.Writer): it is
// buffered up to PartSize, then sent as a multipart upload, part by part
// while the caller writes the next. The object appears only when Close
// completes the upload; Abort (or a failed Close) aborts it, and the
// bucket's lifecycle rule removes the parts of an upload nobody completed
// or aborted (a crash).
func (s *Store) Create(ctx context.Context, key string) (blob.Writer, error) {
	return &writer{s: s, ctx: ctx, key: key, buf: make([]byte, 0, PartSize)}, nil
}

// writer is a blob.Writer on S3.
type writer struct {
	s        *Store
	ctx      context.Context
	key      string
	buf      []byte // the part being filled
	spare    []byte // the buffer of the part in flight, when done
	uploadID *string
	parts    []types.CompletedPart
	inflight chan error // the part being uploaded, if any
	err      error      // the first failure: every later call returns it
	closed   bool
}

// Write buffers p, uploading each full part.
func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errors.New("s3blob: write after close")
	}
	n := 0
	for len(p) > 0 {
		c := copy(w.buf[len(w.buf):cap(w.buf)], p)
		w.buf = w.buf[:len(w.buf)+c]
		n += c
		p = p[c:]
		if len(w.buf) == cap(w.buf) {
			if err := w.sendPart(); err != nil {
				w.err = err
				return n, err
			}
		}
	}
	return n, nil
}

// sendPart starts the upload of the full buffer as the next part, after
// the part in flight has finished; the caller fills the other buffer.
func (w *writer) sendPart() error {
	if w.uploadID == nil {
		out, err := w.s.client.CreateMultipartUpload(w.ctx, &s3.CreateMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key})
		if err != nil {
			return fmt.Errorf("start upload of s3://%s/%s: %w", w.s.bucket, w.key, classify(err))
		}
		w.uploadID = out.UploadId
	}
	if err := w.wait(); err != nil {
		return err
	}
	num := int32(len(w.parts) + 1)
	w.parts = append(w.parts, types.CompletedPart{PartNumber: aws.Int32(num)})
	body := w.buf
	w.inflight = make(chan error, 1)
	go func(done chan<- error) {
		out, err := w.s.client.UploadPart(w.ctx, &s3.UploadPartInput{Bucket: &w.s.bucket, Key: &w.key,
			UploadId: w.uploadID, PartNumber: aws.Int32(num), Body: bytes.NewReader(body)})
		if err != nil {
			done <- fmt.Errorf("upload part %d of s3://%s/%s: %w", num, w.s.bucket, w.key, classify(err))
			return
		}
		w.parts[num-1].ETag = out.ETag
		done <- nil
	}(w.inflight)
	if w.spare == nil {
		w.spare = make([]byte, 0, PartSize)
	}
	w.buf, w.spare = w.spare[:0], body
	return nil
}

// wait waits for the part in flight.
func (w *writer) wait() error {
	if w.inflight == nil {
		return nil
	}
	err := <-w.inflight
	w.inflight = nil
	return err
}

// Close writes what is buffered and makes the object appear: one
// PutObject when it never filled a part, else the last part and the
// completion of the upload. On failure the upload is aborted.
func (w *writer) Close() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return nil
	}
	w.closed = true
	if w.uploadID == nil {
		if _, err := w.s.client.PutObject(w.ctx, &s3.PutObjectInput{Bucket: &w.s.bucket, Key: &w.key,
			Body: bytes.NewReader(w.buf), ContentLength: aws.Int64(int64(len(w.buf)))}); err != nil {
			w.err = fmt.Errorf("put s3://%s/%s: %w", w.s.bucket, w.key, classify(err))
			return w.err
		}
		w.buf = nil
		return nil
	}
	if len(w.buf) > 0 {
		if err := w.sendPart(); err != nil {
			w.err = err
		}
	}
	if err := w.wait(); err != nil && w.err == nil {
		w.err = err
	}
	if w.err == nil {
		_, err := w.s.client.CompleteMultipartUpload(w.ctx, &s3.CompleteMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key,
			UploadId: w.uploadID, MultipartUpload: &types.CompletedMultipartUpload{Parts: w.parts}})
		if err == nil {
			w.buf, w.spare, w.uploadID = nil, nil, nil
			return nil
		}
		w.err = fmt.Errorf("complete upload of s3://%s/%s: %w", w.s.bucket, w.key, classify(err))
	}
	w.abort()
	return w.err
}

// Abort discards the object: nothing appears at its key. It does nothing
// after a Close that succeeded.
func (w *writer) Abort() error {
	if w.closed && w.err == nil {
		return nil
	}
	w.closed = true
	if w.err == nil {
		w.err = errors.New("s3blob: upload aborted")
	}
	return w.abort()
}

// abort aborts the multipart upload, if one was started, even when the
// writer's context is done.
func (w *writer) abort() error {
	w.wait()
	w.buf, w.spare = nil, nil
	if w.uploadID == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), 30*time.Second)
	defer cancel()
	_, err := w.s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.s.bucket, Key: &w.key, UploadId: w.uploadID})
	w.uploadID = nil
	if err != nil {
		return fmt.Errorf("abort upload of s3://%s/%s: %w", w.s.bucket, w.key, classify(err))
	}
	return nil
}
