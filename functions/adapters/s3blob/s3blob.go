// Package s3blob is the blob store adapter over Amazon S3 (or any
// S3-compatible server such as the local gofakes3 stand-in). Its types and
// errors are package blob's; blobtest is the contract it keeps.
package s3blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/retailcatalog/catalog/functions/finance/metering"
	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// NewClient builds an S3 client from an AWS configuration; endpoint, when
// set, is an S3-compatible server (the local stand-in) addressed path-style.
// Checksums are computed only when required, so the client works with
// S3-compatible servers over plain http as with S3.
func NewClient(cfg aws.Config, endpoint string) *s3.Client {
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if endpoint != "" {
			so.BaseEndpoint = aws.String(endpoint)
			so.UsePathStyle = true
		}
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
	})
}

// Store reads and writes objects of one bucket.
type Store struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
}

// New returns a store on bucket.
func New(client *s3.Client, bucket string) *Store {
	return &Store{client: client, presign: s3.NewPresignClient(client), bucket: bucket}
}

// Bucket is the bucket name.
func (s *Store) Bucket() string { return s.bucket }

// Open streams an object. With ifMatch set, blob.ErrChanged when the object's
// ETag differs. blob.ErrNotFound when it does not exist.
func (s *Store) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	in := &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}
	if ifMatch != "" {
		in.IfMatch = aws.String(ifMatch)
	}
	metering.S3Request(ctx, false)
	out, err := s.client.GetObject(ctx, in)
	if err != nil {
		return blob.Object{}, fmt.Errorf("get s3://%s/%s: %w", s.bucket, key, classify(err))
	}
	obj := blob.Object{Body: out.Body, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}
	if ifMatch != "" && obj.ETag != "" && obj.ETag != ifMatch {
		out.Body.Close()
		return blob.Object{}, fmt.Errorf("get s3://%s/%s: %w", s.bucket, key, blob.ErrChanged)
	}
	return obj, nil
}

// Get reads a whole (small) object.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.Open(ctx, key, "")
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		return nil, fmt.Errorf("read s3://%s/%s: %w", s.bucket, key, err)
	}
	return b, nil
}

// Put writes an object from memory.
func (s *Store) Put(ctx context.Context, key string, body []byte) error {
	metering.S3Request(ctx, true)
	metering.Stored(ctx, int64(len(body)))
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// PutNew writes key unless an object is there already (S3 conditional
// write, If-None-Match: *): then nothing changes and it is no error.
func (s *Store) PutNew(ctx context.Context, key string, body []byte) error {
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: &s.bucket, Key: &key, Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))),
		IfNoneMatch: aws.String("*"),
	})
	if err != nil && errors.Is(classify(err), blob.ErrChanged) {
		return nil // taken already
	}
	if err != nil {
		return fmt.Errorf("put new s3://%s/%s: %w", s.bucket, key, err)
	}
	return nil
}

// Size returns an object's size; blob.ErrNotFound when it does not exist.
func (s *Store) Size(ctx context.Context, key string) (int64, error) {
	metering.S3Request(ctx, false)
	out, err := s.client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return 0, fmt.Errorf("head s3://%s/%s: %w", s.bucket, key, classify(err))
	}
	return aws.ToInt64(out.ContentLength), nil
}

// List returns the keys under prefix, in key order.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	pages := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &prefix})
	for pages.HasMorePages() {
		metering.S3Request(ctx, true)
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", s.bucket, prefix, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys, nil
}

// Tag sets an object's tags to the one tag key=value.
func (s *Store) Tag(ctx context.Context, key, tagKey, tagValue string) error {
	metering.S3Request(ctx, true)
	_, err := s.client.PutObjectTagging(ctx, &s3.PutObjectTaggingInput{Bucket: &s.bucket, Key: &key,
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: &tagKey, Value: &tagValue}}}})
	if err != nil {
		return fmt.Errorf("tag s3://%s/%s: %w", s.bucket, key, classify(err))
	}
	return nil
}

// Tags returns an object's tags.
func (s *Store) Tags(ctx context.Context, key string) (map[string]string, error) {
	metering.S3Request(ctx, false)
	out, err := s.client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: &s.bucket, Key: &key})
	if err != nil {
		return nil, fmt.Errorf("tags of s3://%s/%s: %w", s.bucket, key, classify(err))
	}
	tags := map[string]string{}
	for _, t := range out.TagSet {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return tags, nil
}

// PresignGet returns a URL that GETs key, valid for ttl.
func (s *Store) PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error) {
	req, err := s.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &key}, s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign get s3://%s/%s: %w", s.bucket, key, err)
	}
	return req.URL, nil
}

// PresignPut returns a presigned PUT for key valid for ttl. The PUT is
// single-use: "If-None-Match: *" is signed into it (an S3 conditional
// write), so once an object exists at key a second PUT gets 412 and changes
// nothing; the header is among the returned Headers, which the client must
// send (a request without it does not match the signature).
func (s *Store) PresignPut(ctx context.Context, key string, ttl time.Duration) (blob.PresignedRequest, error) {
	req, err := s.presign.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: &key, IfNoneMatch: aws.String("*")},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return blob.PresignedRequest{}, fmt.Errorf("presign put s3://%s/%s: %w", s.bucket, key, err)
	}
	headers := map[string]string{}
	for name, values := range req.SignedHeader {
		if http.CanonicalHeaderKey(name) == "Host" || len(values) == 0 {
			continue
		}
		headers[name] = values[0]
	}
	return blob.PresignedRequest{Method: req.Method, URL: req.URL, Headers: headers, Expires: time.Now().Add(ttl).UTC()}, nil
}

// EnsureBucket creates the bucket when it does not exist (local stack only).
func (s *Store) EnsureBucket(ctx context.Context) error {
	_, err := s.client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &s.bucket})
	var owned *types.BucketAlreadyOwnedByYou
	var exists *types.BucketAlreadyExists
	if err != nil && !errors.As(err, &owned) && !errors.As(err, &exists) {
		var apiErr smithy.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode() == "BucketAlreadyOwnedByYou" || apiErr.ErrorCode() == "BucketAlreadyExists") {
			return nil
		}
		return fmt.Errorf("create bucket %s: %w", s.bucket, err)
	}
	return nil
}

func classify(err error) error {
	var nsk *types.NoSuchKey
	var nf *types.NotFound
	if errors.As(err, &nsk) || errors.As(err, &nf) {
		return fmt.Errorf("%w: %v", blob.ErrNotFound, err)
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode() {
		case "NoSuchKey", "NotFound":
			return fmt.Errorf("%w: %v", blob.ErrNotFound, err)
		case "PreconditionFailed":
			return fmt.Errorf("%w: %v", blob.ErrChanged, err)
		}
	}
	return err
}
