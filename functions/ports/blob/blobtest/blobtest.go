// Package blobtest is the contract of a blob store: one suite that every
// implementation (s3blob.Store on the S3 stand-in, inmem.Blobs) must pass,
// so that what the handlers assume of one holds of the other.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// Store is every blob store operation the handlers use (each handler
// declares the part it needs).
type Store interface {
	Open(ctx context.Context, key, ifMatch string) (blob.Object, error)
	Get(ctx context.Context, key string) ([]byte, error)
	Put(ctx context.Context, key string, body []byte) error
	PutNew(ctx context.Context, key string, body []byte) error
	Create(ctx context.Context, key string) (blob.Writer, error)
	Size(ctx context.Context, key string) (int64, error)
	List(ctx context.Context, prefix string) ([]string, error)
	Tag(ctx context.Context, key, tagKey, tagValue string) error
	Tags(ctx context.Context, key string) (map[string]string, error)
	PresignPut(ctx context.Context, key string, ttl time.Duration) (blob.PresignedRequest, error)
	// PresignGet's URL must be served over HTTP (inmem.Blobs: BaseURL).
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
	Bucket() string
}

var prefixes atomic.Int64

// Run runs the suite; newStore returns a store for one test (tests may
// share one store: each writes under keys of its own).
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store, prefix string)
	}{
		{"PutThenGet", testPutThenGet},
		{"MissingIsNotFound", testMissingIsNotFound},
		{"OverwriteChangesETag", testOverwriteChangesETag},
		{"EmptyObject", testEmptyObject},
		{"StreamAppearsAtClose", testStreamAppearsAtClose},
		{"StreamLargerThanParts", testStreamLarge},
		{"StreamAbortLeavesNothing", testStreamAbort},
		{"ListUnderPrefixInKeyOrder", testList},
		{"TagsReplaceTags", testTags},
		{"PresignPut", testPresign},
		{"PresignGetUntilItExpires", testPresignGet},
		{"PutNewOnlyOnce", testPutNew},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			prefix := fmt.Sprintf("blobtest/%d-%d/", time.Now().UnixNano(), prefixes.Add(1))
			tc.fn(t, newStore(t), prefix)
		})
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func check(t *testing.T, err error, what string) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func read(t *testing.T, obj blob.Object) []byte {
	t.Helper()
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	check(t, err, "read body")
	return b
}

// An object reads back as written, whole or streamed, with its size and a version tag.
func testPutThenGet(t *testing.T, s Store, prefix string) {
	key, body := prefix+"a/object", []byte("product_id,price\np1,1\n")
	check(t, s.Put(ctx(t), key, body), "put")
	got, err := s.Get(ctx(t), key)
	check(t, err, "get")
	if !bytes.Equal(got, body) {
		t.Fatalf("get = %q, want %q", got, body)
	}
	obj, err := s.Open(ctx(t), key, "")
	check(t, err, "open")
	if obj.ETag == "" || obj.Size != int64(len(body)) {
		t.Fatalf("open: etag %q size %d, want a tag and size %d", obj.ETag, obj.Size, len(body))
	}
	if b := read(t, obj); !bytes.Equal(b, body) {
		t.Fatalf("open body = %q, want %q", b, body)
	}
	obj, err = s.Open(ctx(t), key, obj.ETag)
	check(t, err, "open with its own etag")
	read(t, obj)
	size, err := s.Size(ctx(t), key)
	check(t, err, "size")
	if size != int64(len(body)) {
		t.Fatalf("size = %d, want %d", size, len(body))
	}
}

// Every read of a missing object is blob.ErrNotFound.
func testMissingIsNotFound(t *testing.T, s Store, prefix string) {
	key := prefix + "missing"
	if _, err := s.Open(ctx(t), key, ""); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("open: %v, want blob.ErrNotFound", err)
	}
	if _, err := s.Get(ctx(t), key); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("get: %v, want blob.ErrNotFound", err)
	}
	if _, err := s.Size(ctx(t), key); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("size: %v, want blob.ErrNotFound", err)
	}
	if _, err := s.Tags(ctx(t), key); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("tags: %v, want blob.ErrNotFound", err)
	}
}

// A rewritten object has a new tag; asking for the old version is blob.ErrChanged.
func testOverwriteChangesETag(t *testing.T, s Store, prefix string) {
	key := prefix + "upload"
	check(t, s.Put(ctx(t), key, []byte("first")), "put")
	first, err := s.Open(ctx(t), key, "")
	check(t, err, "open")
	read(t, first)
	check(t, s.Put(ctx(t), key, []byte("second, longer")), "overwrite")
	got, err := s.Get(ctx(t), key)
	check(t, err, "get")
	if string(got) != "second, longer" {
		t.Fatalf("get after overwrite = %q", got)
	}
	if _, err := s.Open(ctx(t), key, first.ETag); !errors.Is(err, blob.ErrChanged) {
		t.Fatalf("open with the old etag: %v, want blob.ErrChanged", err)
	}
}

// An empty object exists, with size 0.
func testEmptyObject(t *testing.T, s Store, prefix string) {
	key := prefix + "empty"
	check(t, s.Put(ctx(t), key, nil), "put")
	got, err := s.Get(ctx(t), key)
	check(t, err, "get")
	if len(got) != 0 {
		t.Fatalf("get = %q, want empty", got)
	}
	size, err := s.Size(ctx(t), key)
	check(t, err, "size")
	if size != 0 {
		t.Fatalf("size = %d, want 0", size)
	}
}

// List returns exactly the keys under the prefix, in key order.
func testList(t *testing.T, s Store, prefix string) {
	for _, k := range []string{"idx/3", "idx/10", "idx/1", "other/1", "idxx"} {
		check(t, s.Put(ctx(t), prefix+k, []byte(k)), "put "+k)
	}
	got, err := s.List(ctx(t), prefix+"idx/")
	check(t, err, "list")
	want := []string{prefix + "idx/1", prefix + "idx/10", prefix + "idx/3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("list = %v, want %v", got, want)
	}
	got, err = s.List(ctx(t), prefix+"none/")
	check(t, err, "list of an empty prefix")
	if len(got) != 0 {
		t.Fatalf("list of an empty prefix = %v", got)
	}
}

// Tag sets an object's tags to one tag; the object itself is unchanged.
func testTags(t *testing.T, s Store, prefix string) {
	key := prefix + "index"
	check(t, s.Put(ctx(t), key, []byte("index")), "put")
	tags, err := s.Tags(ctx(t), key)
	check(t, err, "tags")
	if len(tags) != 0 {
		t.Fatalf("tags of a new object = %v", tags)
	}
	check(t, s.Tag(ctx(t), key, "a", "1"), "tag")
	check(t, s.Tag(ctx(t), key, "catalog-superseded", "true"), "tag again")
	tags, err = s.Tags(ctx(t), key)
	check(t, err, "tags")
	if fmt.Sprint(tags) != "map[catalog-superseded:true]" {
		t.Fatalf("tags = %v, want only catalog-superseded=true", tags)
	}
	got, err := s.Get(ctx(t), key)
	check(t, err, "get")
	if string(got) != "index" {
		t.Fatalf("tagging changed the object: %q", got)
	}
}

// A presigned PUT names the method, a URL and when it expires.
func testPresign(t *testing.T, s Store, prefix string) {
	before := time.Now()
	req, err := s.PresignPut(ctx(t), prefix+"upload", 10*time.Minute)
	check(t, err, "presign")
	if req.Method != "PUT" || req.URL == "" || req.Headers == nil {
		t.Fatalf("presigned request %+v: want PUT, a URL and headers", req)
	}
	if req.Expires.Before(before.Add(9*time.Minute)) || req.Expires.After(time.Now().Add(11*time.Minute)) {
		t.Fatalf("expires %v, want about 10 minutes from now", req.Expires)
	}
	if s.Bucket() == "" {
		t.Fatal("no bucket name")
	}
}

// A presigned GET reads the object's exact bytes without credentials; a
// URL changed in any way (another key, another expiry, one more query
// parameter) is refused 403, as is one expired; one sent with an
// Authorization header besides is refused (S3: 400 InvalidArgument, only
// one auth mechanism).
func testPresignGet(t *testing.T, s Store, prefix string) {
	key, other := prefix+"problems/r1/7", prefix+"problems/r2/7"
	body := append(bytes.Repeat([]byte(`{"code":"malformed_csv","line":2,"message":"\"quoted\" é"}`+"\n"), 1000), 0, 0xff)
	check(t, s.Put(ctx(t), key, body), "put")
	check(t, s.Put(ctx(t), other, []byte("another retailer's")), "put other")
	link, err := s.PresignGet(ctx(t), key, 10*time.Minute)
	check(t, err, "presign get")
	if status, got := httpGet(t, link, ""); status != http.StatusOK || !bytes.Equal(got, body) {
		t.Fatalf("GET presigned: %d, %d bytes, want 200 and the %d bytes put (%.300s)", status, len(got), len(body), got)
	}
	u, err := url.Parse(link)
	check(t, err, "parse presigned URL")
	otherKey := *u
	otherKey.Path = strings.Replace(u.Path, "/r1/", "/r2/", 1)
	otherKey.RawPath = ""
	later := *u
	q := u.Query()
	for name, v := range q {
		if strings.HasSuffix(strings.ToLower(name), "expires") {
			q.Set(name, v[0]+"0")
		}
	}
	later.RawQuery = q.Encode()
	more := *u
	more.RawQuery += "&response-content-type=text%2Fhtml"
	for what, changed := range map[string]string{"another key": otherKey.String(), "a later expiry": later.String(), "one more parameter": more.String()} {
		if later.RawQuery == u.RawQuery && what == "a later expiry" {
			t.Fatalf("no expiry parameter in %s", link)
		}
		if status, got := httpGet(t, changed, ""); status != http.StatusForbidden {
			t.Fatalf("GET presigned URL with %s: %d %s, want 403", what, status, got)
		}
	}
	if status, got := httpGet(t, link, "Bearer rt_x"); status != http.StatusBadRequest {
		t.Fatalf("GET presigned with an Authorization header: %d %s, want 400", status, got)
	}

	short, err := s.PresignGet(ctx(t), key, time.Second)
	check(t, err, "presign get")
	time.Sleep(2100 * time.Millisecond)
	if status, got := httpGet(t, short, ""); status != http.StatusForbidden {
		t.Fatalf("GET expired presigned URL: %d %s, want 403", status, got)
	}
}

// httpGet GETs a URL with a client of its own (no credentials but the
// authorization given, no redirect followed).
func httpGet(t *testing.T, link, authorization string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), http.MethodGet, link, nil)
	check(t, err, "request")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	check(t, err, "GET "+link)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	check(t, err, "read answer")
	return resp.StatusCode, b
}

// A streamed object appears whole at Close, not before (an older version
// stays readable until then); an empty stream is an empty object.
func testStreamAppearsAtClose(t *testing.T, s Store, prefix string) {
	key := prefix + "streamed"
	check(t, s.Put(ctx(t), key, []byte("old version")), "put")
	w, err := s.Create(ctx(t), key)
	check(t, err, "create")
	var want []byte
	for i := 0; i < 100; i++ {
		part := bytes.Repeat([]byte{byte('a' + i%26)}, 1+i*37)
		want = append(want, part...)
		if _, err := w.Write(part); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got, err := s.Get(ctx(t), key); err != nil || string(got) != "old version" {
		t.Fatalf("before Close: %q, %v; want the old version", got, err)
	}
	if keys, err := s.List(ctx(t), prefix); err != nil || len(keys) != 1 {
		t.Fatalf("list before Close = %q, %v; want the old object only", keys, err)
	}
	check(t, w.Close(), "close")
	got, err := s.Get(ctx(t), key)
	check(t, err, "get")
	if !bytes.Equal(got, want) {
		t.Fatalf("streamed object: %d bytes, want %d", len(got), len(want))
	}
	check(t, w.Abort(), "abort after close")
	if _, err := s.Size(ctx(t), key); err != nil {
		t.Fatalf("abort after close removed the object: %v", err)
	}

	empty := prefix + "empty-stream"
	w, err = s.Create(ctx(t), empty)
	check(t, err, "create empty")
	check(t, w.Close(), "close empty")
	if size, err := s.Size(ctx(t), empty); err != nil || size != 0 {
		t.Fatalf("empty stream: size %d, %v", size, err)
	}
}

// streamBytes is larger than the parts of any store (s3blob: 8 MiB), so
// that a stream takes several.
const streamBytes = 20<<20 + 12345

// A stream of several parts reads back byte for byte.
func testStreamLarge(t *testing.T, s Store, prefix string) {
	key := prefix + "large"
	w, err := s.Create(ctx(t), key)
	check(t, err, "create")
	sum := sha256.New()
	chunk := make([]byte, 1<<20+7)
	for written, i := 0, 0; written < streamBytes; i++ {
		n := min(len(chunk), streamBytes-written)
		for j := range chunk[:n] {
			chunk[j] = byte(i*31 + j)
		}
		if _, err := w.Write(chunk[:n]); err != nil {
			t.Fatalf("write: %v", err)
		}
		sum.Write(chunk[:n])
		written += n
	}
	check(t, w.Close(), "close")
	obj, err := s.Open(ctx(t), key, "")
	check(t, err, "open")
	defer obj.Body.Close()
	got := sha256.New()
	n, err := io.Copy(got, obj.Body)
	check(t, err, "read")
	if n != streamBytes || !bytes.Equal(got.Sum(nil), sum.Sum(nil)) {
		t.Fatalf("read back %d bytes (sha256 match %v), want %d", n, bytes.Equal(got.Sum(nil), sum.Sum(nil)), streamBytes)
	}
}

// An aborted stream leaves no object, small or past a part, and writes
// after it fail.
func testStreamAbort(t *testing.T, s Store, prefix string) {
	for _, size := range []int{10, 9 << 20} {
		key := fmt.Sprintf("%saborted-%d", prefix, size)
		w, err := s.Create(ctx(t), key)
		check(t, err, "create")
		if _, err := w.Write(make([]byte, size)); err != nil {
			t.Fatalf("write: %v", err)
		}
		check(t, w.Abort(), "abort")
		if _, err := s.Open(ctx(t), key, ""); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("open after abort (%d bytes): %v, want blob.ErrNotFound", size, err)
		}
		if _, err := w.Write([]byte("x")); err == nil {
			t.Fatalf("write after abort succeeded")
		}
		if err := w.Close(); err == nil {
			t.Fatalf("close after abort succeeded")
		}
		if keys, err := s.List(ctx(t), prefix); err != nil || len(keys) != 0 {
			t.Fatalf("list after abort = %q, %v; want nothing", keys, err)
		}
	}
}

// PutNew writes a key once: a second PutNew changes nothing and is no error.
func testPutNew(t *testing.T, s Store, prefix string) {
	key := prefix + "once"
	check(t, s.PutNew(ctx(t), key, []byte("first")), "put new")
	check(t, s.PutNew(ctx(t), key, []byte("second")), "put new again")
	got, err := s.Get(ctx(t), key)
	check(t, err, "get")
	if string(got) != "first" {
		t.Fatalf("after a second PutNew the object is %q, want %q", got, "first")
	}
	check(t, s.PutNew(ctx(t), prefix+"empty", nil), "put new empty")
	if n, err := s.Size(ctx(t), prefix+"empty"); err != nil || n != 0 {
		t.Fatalf("empty object: size %d, %v", n, err)
	}
}
