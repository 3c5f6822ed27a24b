package s3server_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
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
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
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

	// Signed two hours ago for one hour: the expiry is checked before the
	// signature (which the edit breaks), as S3 does.
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

func requireS3Error(t *testing.T, status int, code string, gotStatus int, body string) {
	t.Helper()
	require.Equal(t, status, gotStatus, body)
	require.Contains(t, body, "<Code>"+code+"</Code>", body)
}

// A presigned URL is good for exactly the request it was signed for, as on
// S3: the signature is recomputed over the method, the path, the query and
// the signed headers' values. Re-pointed at another retailer's slot, with a
// signed header dropped or changed, with its query edited, or signed with
// another key pair, it gets 403; intact it stores the object once, and a
// second PUT gets 412.
func TestPresignedSignatureChecked(t *testing.T) {
	t.Parallel()
	var got sink
	srv, client := start(t, s3server.Options{NotifyPrefix: "snapshots/", Notify: got.notify})
	key, other := "snapshots/r1/1/upload", "snapshots/r2/1/upload"
	u, h := presignSingleUse(t, client, key)

	// The same query on another slot's path.
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	repointed := *parsed
	repointed.Path = "/" + bucket + "/" + other
	status, resp := putWith(t, repointed.String(), h, []byte("into r2's slot"))
	requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", status, resp)
	requireNoObject(t, client, other)

	// The signed If-None-Match: * dropped, or given another value.
	status, resp = httpPut(t, u, []byte("no header"))
	requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", status, resp)
	for _, v := range []string{`"some-etag"`, "*, *", ""} {
		changed := http.Header{"If-None-Match": {v}}
		status, resp = putWith(t, u, changed, []byte("changed header"))
		requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", status, resp)
	}
	requireNoObject(t, client, key)

	// The query edited: a longer expiry, another signature, no signature.
	for _, edit := range []func(url.Values){
		func(q url.Values) { q.Set("X-Amz-Expires", "604800") },
		func(q url.Values) { q.Set("X-Amz-Signature", strings.Repeat("0", 64)) },
		func(q url.Values) { q.Set("x-id", "GetObject") },
	} {
		e := *parsed
		q := e.Query()
		edit(q)
		e.RawQuery = q.Encode()
		status, resp = putWith(t, e.String(), h, []byte("edited"))
		requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", status, resp)
	}
	e := *parsed
	q := e.Query()
	q.Del("X-Amz-Signature")
	e.RawQuery = q.Encode()
	status, resp = putWith(t, e.String(), h, []byte("unsigned"))
	requireS3Error(t, http.StatusBadRequest, "AuthorizationQueryParametersError", status, resp)

	// Another method on the same URL.
	req, err := http.NewRequest(http.MethodDelete, u, nil)
	require.NoError(t, err)
	for k, v := range h {
		req.Header[k] = v
	}
	dresp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	b, _ := io.ReadAll(dresp.Body)
	dresp.Body.Close()
	requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", dresp.StatusCode, string(b))

	// Signed with another secret, or another key id.
	for _, tc := range []struct{ id, secret, code string }{
		{"local", "not-the-secret", "SignatureDoesNotMatch"},
		{"someone-else", "local", "InvalidAccessKeyId"},
	} {
		foreign := clientWith(t, srv, tc.id, tc.secret)
		fu, fh := presignSingleUse(t, foreign, key)
		status, resp = putWith(t, fu, fh, []byte("foreign"))
		requireS3Error(t, http.StatusForbidden, tc.code, status, resp)
	}
	requireNoObject(t, client, key)
	require.Empty(t, got.all())

	// Intact: stored once; the second PUT gets 412 and changes nothing.
	status, resp = putWith(t, u, h, []byte("the upload"))
	require.Equal(t, http.StatusOK, status, resp)
	status, resp = putWith(t, u, h, []byte("overwrite"))
	requireS3Error(t, http.StatusPreconditionFailed, "PreconditionFailed", status, resp)
	require.Equal(t, []byte("the upload"), getObject(t, client, key))
	require.Len(t, got.all(), 1)

	// A presigned GET works for its key only.
	gu, err := s3.NewPresignClient(client).PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)}, s3.WithPresignExpires(time.Minute))
	require.NoError(t, err)
	gresp, err := http.Get(gu.URL)
	require.NoError(t, err)
	b, _ = io.ReadAll(gresp.Body)
	gresp.Body.Close()
	require.Equal(t, http.StatusOK, gresp.StatusCode)
	require.Equal(t, "the upload", string(b))
	gparsed, err := url.Parse(gu.URL)
	require.NoError(t, err)
	gparsed.Path = "/" + bucket + "/snapshots/r1/2/upload"
	gresp, err = http.Get(gparsed.String())
	require.NoError(t, err)
	b, _ = io.ReadAll(gresp.Body)
	gresp.Body.Close()
	requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", gresp.StatusCode, string(b))
}

// clientWith is an S3 client of srv signing with another key pair.
func clientWith(t *testing.T, srv *s3server.Server, id, secret string) *s3.Client {
	t.Helper()
	return s3.New(s3.Options{Region: s3server.Region, Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""),
		BaseEndpoint: aws.String(srv.Endpoint()), UsePathStyle: true,
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
		Retryer:                    aws.NopRetryer{}})
}

// signedRequest is a request header-signed as the SDK signs it (payload
// hash of signedBody) that carries body.
func signedRequest(t *testing.T, srv *s3server.Server, method, path string, signedBody, body []byte, at time.Time, header http.Header) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, srv.Endpoint()+path, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	sum := sha256.Sum256(signedBody)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	require.NoError(t, signer.SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"},
		req, hex.EncodeToString(sum[:]), "s3", s3server.Region, at))
	return req
}

func do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Header-signed requests (the SDK clients') are verified too: another key
// pair, an unsigned request, a signed header changed, a body that is not
// the one whose SHA-256 was signed (PutObject, UploadPart, a tagging
// document), a clock 20 minutes off and a streaming payload are refused,
// and nothing is stored.
func TestHeaderSignatureChecked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var got sink
	srv, client := start(t, s3server.Options{NotifyPrefix: "snapshots/", Notify: got.notify})
	key := "snapshots/r1/1/upload"
	_, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/x"), Body: bytes.NewReader([]byte("x"))})
	require.NoError(t, err)

	// The SDK signing with another secret: every operation refused.
	foreign := clientWith(t, srv, "local", "not-the-secret")
	_, err = foreign.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte("evil"))})
	requireAPIError(t, err, "SignatureDoesNotMatch")
	_, err = foreign.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/x")})
	requireAPIError(t, err, "SignatureDoesNotMatch")
	_, err = foreign.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	requireAPIError(t, err, "SignatureDoesNotMatch")
	_, err = foreign.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("staging/x")})
	requireAPIError(t, err, "SignatureDoesNotMatch")
	require.Equal(t, []byte("x"), getObject(t, client, "staging/x"))

	// Unsigned.
	resp, err := http.Get(srv.Endpoint() + "/" + bucket + "/staging/x")
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	requireS3Error(t, http.StatusForbidden, "AccessDenied", resp.StatusCode, string(b))
	status, body := httpPut(t, srv.Endpoint()+"/"+bucket+"/"+key, []byte("anonymous"))
	requireS3Error(t, http.StatusForbidden, "AccessDenied", status, body)

	// Intact, as a check of the helper: stored.
	path := "/" + bucket + "/snapshots/r1/2/upload"
	status, body = do(t, signedRequest(t, srv, http.MethodPut, path, []byte("good"), []byte("good"), time.Now(), nil))
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, []byte("good"), getObject(t, client, "snapshots/r1/2/upload"))

	// A signed header changed after signing.
	req := signedRequest(t, srv, http.MethodPut, "/"+bucket+"/"+key, []byte("good"), []byte("good"), time.Now(),
		http.Header{"X-Amz-Meta-Origin": {"catalogctl"}})
	req.Header.Set("X-Amz-Meta-Origin", "someone else")
	status, body = do(t, req)
	requireS3Error(t, http.StatusForbidden, "SignatureDoesNotMatch", status, body)

	// Another body than the signed one, of the same length.
	status, body = do(t, signedRequest(t, srv, http.MethodPut, "/"+bucket+"/"+key, []byte("good"), []byte("evil"), time.Now(), nil))
	requireS3Error(t, http.StatusBadRequest, "XAmzContentSHA256Mismatch", status, body)
	requireNoObject(t, client, key)

	// The same for a part of a multipart upload, and a tagging document.
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	require.NoError(t, err)
	partPath := "/" + bucket + "/" + key + "?partNumber=1&uploadId=" + url.QueryEscape(aws.ToString(up.UploadId))
	status, body = do(t, signedRequest(t, srv, http.MethodPut, partPath, []byte("good part"), []byte("evil part"), time.Now(), nil))
	requireS3Error(t, http.StatusBadRequest, "XAmzContentSHA256Mismatch", status, body)
	parts, err := client.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: up.UploadId})
	require.NoError(t, err)
	require.Empty(t, parts.Parts, "the tampered part is not kept")
	tags := func(v string) []byte {
		return []byte(`<Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet><Tag><Key>k</Key><Value>` + v + `</Value></Tag></TagSet></Tagging>`)
	}
	status, body = do(t, signedRequest(t, srv, http.MethodPut, "/"+bucket+"/staging/x?tagging=", tags("good"), tags("evil"), time.Now(), nil))
	requireS3Error(t, http.StatusBadRequest, "XAmzContentSHA256Mismatch", status, body)
	tagsOut, err := client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(bucket), Key: aws.String("staging/x")})
	require.NoError(t, err)
	require.Empty(t, tagsOut.TagSet)

	// Signed 20 minutes ago.
	status, body = do(t, signedRequest(t, srv, http.MethodGet, "/"+bucket+"/staging/x", nil, nil, time.Now().Add(-20*time.Minute), nil))
	requireS3Error(t, http.StatusForbidden, "RequestTimeTooSkewed", status, body)

	// A streaming (aws-chunked) payload, which gofakes3 would store with
	// its framing unchecked.
	req = signedRequest(t, srv, http.MethodPut, "/"+bucket+"/"+key, nil, []byte("framed"), time.Now(), nil)
	req.Header.Set("X-Amz-Content-Sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
	status, body = do(t, req)
	requireS3Error(t, http.StatusNotImplemented, "NotImplemented", status, body)
	requireNoObject(t, client, key)
	require.Len(t, got.all(), 1, "only the intact upload notified")
}

func requireAPIError(t *testing.T, err error, code string) {
	t.Helper()
	var apiErr smithy.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, code, apiErr.ErrorCode(), err.Error())
}

// An x-amz-* header the signature does not cover is refused, as on S3: a
// presigned PUT with an unsigned X-Amz-Copy-Source would otherwise copy
// any object (another retailer's upload) into the slot.
func TestUnsignedAmzHeaderRefused(t *testing.T) {
	t.Parallel()
	_, client := start(t, s3server.Options{})
	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket),
		Key: aws.String("snapshots/r2/1/upload"), Body: bytes.NewReader([]byte("r2's catalog"))})
	require.NoError(t, err)
	key := "snapshots/r1/1/upload"
	u, h := presignSingleUse(t, client, key)
	for _, extra := range []http.Header{
		{"X-Amz-Copy-Source": {bucket + "/snapshots/r2/1/upload"}},
		{"X-Amz-Meta-Origin": {"someone"}},
	} {
		hh := h.Clone()
		for k, v := range extra {
			hh[k] = v
		}
		status, resp := putWith(t, u, hh, nil)
		requireS3Error(t, http.StatusForbidden, "AccessDenied", status, resp)
		require.Contains(t, resp, "not signed")
		requireNoObject(t, client, key)
	}
}

// dribble writes s to conn a byte every interval until it is written or a
// write fails (the server closed the connection).
func dribble(conn net.Conn, s string, interval time.Duration) {
	for i := 0; i < len(s); i++ {
		if _, err := conn.Write([]byte{s[i]}); err != nil {
			return
		}
		time.Sleep(interval)
	}
}

// requireClosedWithin reads conn until the server closes it and checks
// that this took from min to max; it returns what was read.
func requireClosedWithin(t *testing.T, conn net.Conn, start time.Time, min, max time.Duration) []byte {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(start.Add(max+2*time.Second)))
	got, err := io.ReadAll(conn)
	took := time.Since(start)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server did not close the connection within %v", max+2*time.Second)
	require.GreaterOrEqual(t, took, min, "closed too early")
	require.LessOrEqual(t, took, max, "closed too late")
	return got
}

func dial(t *testing.T, srv *s3server.Server) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.Endpoint(), "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// A client that sends its headers a byte at a time is cut off at
// ReadHeaderTimeout, however steadily it sends; an idle keep-alive
// connection is closed after IdleTimeout.
func TestHeaderAndIdleTimeouts(t *testing.T) {
	t.Parallel()
	srv, client := start(t, s3server.Options{ReadHeaderTimeout: 400 * time.Millisecond, IdleTimeout: 400 * time.Millisecond})

	conn := dial(t, srv)
	begin := time.Now()
	go dribble(conn, "GET /"+bucket+"/x HTTP/1.1\r\nHost: x\r\nX-Padding: "+strings.Repeat("a", 200)+"\r\n\r\n", 20*time.Millisecond)
	requireClosedWithin(t, conn, begin, 350*time.Millisecond, 1500*time.Millisecond)

	_, err := client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("k"), Body: bytes.NewReader([]byte("v"))})
	require.NoError(t, err)
	req, err := s3.NewPresignClient(client).PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("k")}, s3.WithPresignExpires(time.Minute))
	require.NoError(t, err)
	u, err := url.Parse(req.URL)
	require.NoError(t, err)
	conn = dial(t, srv)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.RequestURI(), u.Host)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.False(t, resp.Close, "a keep-alive connection")
	idleFrom := time.Now()
	require.NoError(t, conn.SetReadDeadline(idleFrom.Add(3*time.Second)))
	_, err = br.ReadByte()
	require.ErrorIs(t, err, io.EOF, "the idle connection is closed by the server")
	require.GreaterOrEqual(t, time.Since(idleFrom), 350*time.Millisecond)
	require.LessOrEqual(t, time.Since(idleFrom), 1500*time.Millisecond)
}

// A body that stops coming is cut off after BodyTimeout (400
// RequestTimeout, nothing stored); one that keeps coming slowly is taken,
// however long it takes: the bound is per read, not per request. A client
// that stops reading a response is cut off likewise.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	srv, client := start(t, s3server.Options{BodyTimeout: 300 * time.Millisecond})
	put := func(key string, length int) net.Conn {
		u, err := url.Parse(presignPut(t, client, key))
		require.NoError(t, err)
		conn := dial(t, srv)
		fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, length)
		return conn
	}

	conn := put("stalled", 1000)
	_, err := conn.Write(bytes.Repeat([]byte("x"), 10))
	require.NoError(t, err)
	begin := time.Now()
	got := requireClosedWithin(t, conn, begin, 250*time.Millisecond, 1500*time.Millisecond)
	require.Contains(t, string(got), "400 Bad Request")
	require.Contains(t, string(got), "<Code>RequestTimeout</Code>")
	requireNoObject(t, client, "stalled")

	// 40 bytes over 2 s: seven times the timeout, a byte every 50 ms.
	conn = put("slow", 40)
	dribble(conn, strings.Repeat("s", 40), 50*time.Millisecond)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	require.Equal(t, strings.Repeat("s", 40), string(getObject(t, client, "slow")))

	// A GET of 32 MiB (more than the socket buffers hold) never read.
	big := bytes.Repeat([]byte("b"), 32<<20)
	_, err = client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("big"), Body: bytes.NewReader(big)})
	require.NoError(t, err)
	req, err := s3.NewPresignClient(client).PresignGetObject(context.Background(),
		&s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("big")}, s3.WithPresignExpires(time.Minute))
	require.NoError(t, err)
	u, err := url.Parse(req.URL)
	require.NoError(t, err)
	conn = dial(t, srv)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", u.RequestURI(), u.Host)
	time.Sleep(1500 * time.Millisecond) // the server's writes stall, then time out
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	n, err := io.Copy(io.Discard, conn)
	require.Less(t, n, int64(len(big)), "the server gave up on the reader that stalled")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closed the connection")
}
