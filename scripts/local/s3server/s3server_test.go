package s3server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/s3server"
)

const bucket = "catalog"

// sink collects notifications; fail makes the next n calls fail.
type sink struct {
	mu     sync.Mutex
	events []events.S3Event
	fail   int
	calls  int
}

func (s *sink) notify(_ context.Context, ev events.S3Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail > 0 {
		s.fail--
		return errors.New("queue unavailable")
	}
	s.events = append(s.events, ev)
	return nil
}

func (s *sink) all() []events.S3Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.S3Event(nil), s.events...)
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func start(t *testing.T, opts s3server.Options) (*s3server.Server, *s3.Client) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	if opts.Buckets == nil {
		opts.Buckets = []string{bucket}
	}
	opts.Logger = testLogger(t)
	srv, err := s3server.Start(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	client, err := s3server.NewS3Client(context.Background(), srv.Endpoint())
	require.NoError(t, err)
	return srv, client
}

func presignPut(t *testing.T, client *s3.Client, key string) string {
	t.Helper()
	req, err := s3.NewPresignClient(client).PresignPutObject(context.Background(),
		&s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)},
		s3.WithPresignExpires(15*time.Minute))
	require.NoError(t, err)
	require.Equal(t, http.MethodPut, req.Method)
	return req.URL
}

// httpPut PUTs body to a (presigned) URL with plain net/http, as a retailer
// would.
func httpPut(t *testing.T, u string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func getObject(t *testing.T, client *s3.Client, key string) []byte {
	t.Helper()
	out, err := client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.NoError(t, err)
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	require.NoError(t, err)
	return b
}

func requireNoObject(t *testing.T, client *s3.Client, key string) {
	t.Helper()
	_, err := client.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.Error(t, err, "object %q exists", key)
	var nf *types.NotFound
	require.ErrorAs(t, err, &nf)
}

func md5hex(b []byte) string {
	sum := md5.Sum(b)
	return hex.EncodeToString(sum[:])
}

func TestPresignedPutNotifies(t *testing.T) {
	t.Parallel()
	var got sink
	_, client := start(t, s3server.Options{NotifyPrefix: "snapshots/", Notify: got.notify})

	keys := []string{"snapshots/r1/7/upload", "snapshots/r 2/8/my file+v1.csv"}
	for i, key := range keys {
		body := []byte(fmt.Sprintf("product_id,name\np%d,Thing\n", i))
		status, resp := httpPut(t, presignPut(t, client, key), body)
		require.Equal(t, http.StatusOK, status, resp)
		require.Equal(t, body, getObject(t, client, key))

		evs := got.all()
		require.Len(t, evs, i+1)
		require.Len(t, evs[i].Records, 1)
		rec := evs[i].Records[0]
		require.Equal(t, "2.1", rec.EventVersion)
		require.Equal(t, "aws:s3", rec.EventSource)
		require.Equal(t, "us-east-1", rec.AWSRegion)
		require.Equal(t, "ObjectCreated:Put", rec.EventName)
		require.WithinDuration(t, time.Now(), rec.EventTime, 10*time.Second)
		require.Equal(t, bucket, rec.S3.Bucket.Name)
		require.Equal(t, "arn:aws:s3:::"+bucket, rec.S3.Bucket.Arn)
		require.Equal(t, int64(len(body)), rec.S3.Object.Size)
		require.Equal(t, md5hex(body), rec.S3.Object.ETag)
		require.Regexp(t, `^[0-9A-F]+$`, rec.S3.Object.Sequencer)
		decoded, err := url.QueryUnescape(rec.S3.Object.Key)
		require.NoError(t, err)
		require.Equal(t, key, decoded)

		// The JSON shape a Lambda receives, decoded with aws-lambda-go.
		raw, err := json.Marshal(evs[i])
		require.NoError(t, err)
		var back events.S3Event
		require.NoError(t, json.Unmarshal(raw, &back))
		require.Equal(t, key, back.Records[0].S3.Object.URLDecodedKey)
	}
	evs := got.all()
	require.Equal(t, "snapshots/r+2/8/my+file%2Bv1.csv", evs[1].Records[0].S3.Object.Key)
	require.Less(t, evs[0].Records[0].S3.Object.Sequencer, evs[1].Records[0].S3.Object.Sequencer)

	// Outside the prefix: stored, no event.
	status, _ := httpPut(t, presignPut(t, client, "chunks/r1/7/0"), []byte("x"))
	require.Equal(t, http.StatusOK, status)
	require.Len(t, got.all(), 2)
}

func TestSDKPutCopyMultipartNotify(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var got sink
	_, client := start(t, s3server.Options{NotifyPrefix: "snapshots/", Notify: got.notify})

	body := []byte("a,b\n")
	_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/x"), Body: bytes.NewReader(body)})
	require.NoError(t, err)
	require.Empty(t, got.all())

	_, err = client.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(bucket), Key: aws.String("snapshots/r1/1/upload"),
		CopySource: aws.String(bucket + "/staging/x")})
	require.NoError(t, err)
	evs := got.all()
	require.Len(t, evs, 1)
	require.Equal(t, "ObjectCreated:Copy", evs[0].Records[0].EventName)
	require.Equal(t, int64(len(body)), evs[0].Records[0].S3.Object.Size)

	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("snapshots/r1/2/upload")})
	require.NoError(t, err)
	part := bytes.Repeat([]byte("z"), 1000)
	pout, err := client.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String("snapshots/r1/2/upload"),
		UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part)})
	require.NoError(t, err)
	require.Len(t, got.all(), 1, "a part is no object yet")
	_, err = client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String("snapshots/r1/2/upload"),
		UploadId: up.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: pout.ETag, PartNumber: aws.Int32(1)}}}})
	require.NoError(t, err)
	evs = got.all()
	require.Len(t, evs, 2)
	require.Equal(t, "ObjectCreated:CompleteMultipartUpload", evs[1].Records[0].EventName)
	require.Equal(t, int64(len(part)), evs[1].Records[0].S3.Object.Size)
	require.NotEmpty(t, evs[1].Records[0].S3.Object.ETag)
	require.Equal(t, part, getObject(t, client, "snapshots/r1/2/upload"))
}

func TestNotifyFailureAnswers503(t *testing.T) {
	t.Parallel()
	got := &sink{fail: 1}
	_, client := start(t, s3server.Options{NotifyPrefix: "snapshots/", Notify: got.notify})

	// A plain client sees the 503 SlowDown...
	status, resp := httpPut(t, presignPut(t, client, "snapshots/r1/1/upload"), []byte("v1"))
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.Contains(t, resp, "<Code>SlowDown</Code>")
	require.Empty(t, got.all())

	// ...and the SDK retries it by itself.
	got.mu.Lock()
	got.fail = 1
	got.mu.Unlock()
	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket),
		Key: aws.String("snapshots/r1/2/upload"), Body: bytes.NewReader([]byte("v2"))})
	require.NoError(t, err)
	require.Len(t, got.all(), 1)
	require.Equal(t, 3, got.calls)
}

func TestUploadLimit(t *testing.T) {
	t.Parallel()
	var got sink
	srv, client := start(t, s3server.Options{MaxUploadBytes: 1024, NotifyPrefix: "snapshots/", Notify: got.notify})
	key := "snapshots/r1/9/upload"

	// Presigned PUT over the limit.
	status, resp := httpPut(t, presignPut(t, client, key), bytes.Repeat([]byte("x"), 1025))
	require.Equal(t, http.StatusRequestEntityTooLarge, status)
	require.Contains(t, resp, "<Code>EntityTooLarge</Code>")
	requireNoObject(t, client, key)

	// The SDK gets a typed API error.
	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader(bytes.Repeat([]byte("x"), 5000))})
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, "EntityTooLarge", apiErr.ErrorCode())
	requireNoObject(t, client, key)

	// Without Content-Length (chunked transfer encoding): 413 over the
	// limit, 411 (as S3) under it.
	for _, tc := range []struct {
		size   int
		status int
	}{{2048, http.StatusRequestEntityTooLarge}, {100, http.StatusLengthRequired}} {
		req, err := http.NewRequest(http.MethodPut, presignPut(t, client, key), io.NopCloser(bytes.NewReader(make([]byte, tc.size))))
		require.NoError(t, err)
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, tc.status, resp.StatusCode, "chunked body of %d bytes", tc.size)
		requireNoObject(t, client, key)
	}

	// Exactly the limit is fine.
	status, resp = httpPut(t, presignPut(t, client, key), bytes.Repeat([]byte("x"), 1024))
	require.Equal(t, http.StatusOK, status, resp)
	require.Len(t, got.all(), 1, "only the accepted upload notifies")
	_ = srv
}

func TestExpiredPresignedURL(t *testing.T) {
	t.Parallel()
	_, client := start(t, s3server.Options{})
	u, err := url.Parse(presignPut(t, client, "snapshots/r1/1/upload"))
	require.NoError(t, err)

	// Signed two hours ago for one hour (signatures are not checked, so the
	// URL can be edited).
	q := u.Query()
	q.Set("X-Amz-Date", time.Now().UTC().Add(-2*time.Hour).Format("20060102T150405Z"))
	q.Set("X-Amz-Expires", "3600")
	u.RawQuery = q.Encode()
	status, resp := httpPut(t, u.String(), []byte("late"))
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, resp, "<Code>AccessDenied</Code>")
	require.Contains(t, resp, "Request has expired")
	requireNoObject(t, client, "snapshots/r1/1/upload")

	// A real short expiry.
	req, err := s3.NewPresignClient(client).PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("snapshots/r1/1/upload")},
		s3.WithPresignExpires(time.Second))
	require.NoError(t, err)
	time.Sleep(2100 * time.Millisecond)
	resp2, err := http.Get(req.URL)
	require.NoError(t, err)
	resp2.Body.Close()
	require.Equal(t, http.StatusForbidden, resp2.StatusCode)
}

// An upload cut off half way stores nothing and keeps the previous version.
func TestInterruptedUploadIsAtomic(t *testing.T) {
	t.Parallel()
	srv, client := start(t, s3server.Options{})
	key := "snapshots/r1/1/upload"
	status, _ := httpPut(t, presignPut(t, client, key), []byte("complete v1"))
	require.Equal(t, http.StatusOK, status)

	u, err := url.Parse(presignPut(t, client, key))
	require.NoError(t, err)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"))
	require.NoError(t, err)
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n", u.RequestURI(), u.Host)
	_, err = conn.Write(bytes.Repeat([]byte("y"), 400))
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	_, _ = bufio.NewReader(conn).ReadString('\n') // wait for the server to give up
	conn.Close()

	require.Eventually(t, func() bool {
		return string(getObject(t, client, key)) == "complete v1"
	}, 2*time.Second, 20*time.Millisecond)
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	require.NoError(t, err)
	require.Len(t, out.Contents, 1)
}

func TestObjectsSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	srv, client := start(t, s3server.Options{Dir: dir, Buckets: []string{bucket, "other"}})
	key := "snapshots/r 1/1/up load"
	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key),
		Body: bytes.NewReader([]byte("persisted")), Metadata: map[string]string{"generation": "1"}})
	require.NoError(t, err)
	require.NoError(t, srv.Close())
	require.NoError(t, srv.Close())

	_, client2 := start(t, s3server.Options{Dir: dir, Buckets: []string{bucket, "other"}})
	require.Equal(t, []byte("persisted"), getObject(t, client2, key))
	head, err := client2.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.NoError(t, err)
	require.Equal(t, `"`+md5hex([]byte("persisted"))+`"`, aws.ToString(head.ETag))
	require.Equal(t, "1", head.Metadata["generation"])
	buckets, err := client2.ListBuckets(context.Background(), &s3.ListBucketsInput{})
	require.NoError(t, err)
	require.Len(t, buckets.Buckets, 2)
}

// presignSingleUse presigns a PUT with "If-None-Match: *" signed into it, as
// the upload route does.
func presignSingleUse(t *testing.T, client *s3.Client, key string) (string, http.Header) {
	t.Helper()
	req, err := s3.NewPresignClient(client).PresignPutObject(context.Background(),
		&s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), IfNoneMatch: aws.String("*")},
		s3.WithPresignExpires(15*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []string{"*"}, req.SignedHeader["If-None-Match"])
	h := http.Header{}
	for k, v := range req.SignedHeader {
		if k != "Host" {
			h[k] = v
		}
	}
	return req.URL, h
}

func putWith(t *testing.T, u string, h http.Header, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, u, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A presigned PUT with "If-None-Match: *" is single-use: the second PUT
// (even concurrent with the first) gets 412 and changes nothing, sends no
// event; dropping the signed header is refused; a PUT that broke off before
// the object was stored can be retried.
func TestSingleUseUploadURL(t *testing.T) {
	t.Parallel()
	var got sink
	srv, client := start(t, s3server.Options{NotifyPrefix: "snapshots/", Notify: got.notify})
	key := "snapshots/r1/1/upload"
	u, h := presignSingleUse(t, client, key)

	// The signed header cannot be left out.
	status, resp := httpPut(t, u, []byte("no header"))
	require.Equal(t, http.StatusForbidden, status, resp)
	require.Contains(t, resp, "SignatureDoesNotMatch")
	requireNoObject(t, client, key)

	// Broken off half way: nothing stored, so the same URL works again.
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"))
	require.NoError(t, err)
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nIf-None-Match: *\r\nContent-Length: 1000\r\n\r\n", parsed.RequestURI(), parsed.Host)
	_, err = conn.Write(bytes.Repeat([]byte("y"), 400))
	require.NoError(t, err)
	require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	_, _ = bufio.NewReader(conn).ReadString('\n')
	conn.Close()
	requireNoObject(t, client, key)

	// Two PUTs at once: exactly one wins.
	bodies := [][]byte{bytes.Repeat([]byte("a"), 1<<20), bytes.Repeat([]byte("b"), 1<<20)}
	codes := make([]int, 2)
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = putWith(t, u, h, bodies[i])
		}()
	}
	wg.Wait()
	require.ElementsMatch(t, []int{http.StatusOK, http.StatusPreconditionFailed}, codes)
	winner := bodies[0]
	if codes[1] == http.StatusOK {
		winner = bodies[1]
	}
	require.Equal(t, winner, getObject(t, client, key))
	require.Len(t, got.all(), 1)

	// Later PUTs: 412, the object and the events unchanged.
	status, resp = putWith(t, u, h, []byte("other content"))
	require.Equal(t, http.StatusPreconditionFailed, status)
	require.Contains(t, resp, "<Code>PreconditionFailed</Code>")
	require.Equal(t, winner, getObject(t, client, key))
	require.Len(t, got.all(), 1)
	require.Equal(t, md5hex(winner), got.all()[0].Records[0].S3.Object.ETag)
}

// TestListUnderPrefix: a listing by prefix with no delimiter (the one the
// server walks a directory for) returns exactly the keys that start with
// the prefix, in S3's order, with their sizes and ETags, wherever the
// prefix ends (at a "/", in the middle of a name, in a directory that does
// not exist); a delimiter listing still gives the common prefixes.
func TestListUnderPrefix(t *testing.T) {
	t.Parallel()
	_, client := start(t, s3server.Options{Dir: t.TempDir(), Buckets: []string{bucket}})
	keys := []string{
		"analytics/changes/retailer_id=acme/date=2026-12-01/a.parquet",
		"analytics/changes/retailer_id=acme/date=2026-12-02/b.parquet",
		"analytics/changes/retailer_id=acme-2/date=2026-12-01/c.parquet",
		"analytics/changes/retailer_id=acme.x/d.parquet",
		"analytics/changes/retailer_id=globex/date=2026-12-01/e.parquet",
		"indexes/acme/1", "indexes/acme/10", "indexes/acme/2", "indexes/acme-2/1",
		"top-level",
	}
	for i, k := range keys {
		_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k),
			Body: bytes.NewReader(bytes.Repeat([]byte{'x'}, i+1))})
		require.NoError(t, err)
	}
	list := func(prefix string) []string {
		t.Helper()
		out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		require.NoError(t, err)
		var got []string
		for _, o := range out.Contents {
			k := aws.ToString(o.Key)
			i := slices.Index(keys, k)
			require.GreaterOrEqual(t, i, 0, k)
			require.Equal(t, int64(i+1), aws.ToInt64(o.Size), k)
			require.Equal(t, `"`+md5hex(bytes.Repeat([]byte{'x'}, i+1))+`"`, aws.ToString(o.ETag), k)
			got = append(got, k)
		}
		return got
	}
	for _, prefix := range []string{
		"analytics/changes/retailer_id=acme/", "analytics/changes/retailer_id=acme", "analytics/changes/",
		"analytics/", "indexes/acme/", "indexes/acme/1", "indexes/acme", "indexes/none/", "nothing/here/",
		"top", "analytics", "",
	} {
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		require.Equal(t, want, list(prefix), "prefix %q", prefix)
	}
	out, err := client.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String(bucket),
		Prefix: aws.String("indexes/"), Delimiter: aws.String("/")})
	require.NoError(t, err)
	var prefixes []string
	for _, p := range out.CommonPrefixes {
		prefixes = append(prefixes, aws.ToString(p.Prefix))
	}
	require.ElementsMatch(t, []string{"indexes/acme/", "indexes/acme-2/"}, prefixes)
}
