package inmem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/ports/blob"
)

// Blobs is a blob store in memory, or in a directory when Dir is set (then
// several processes share its objects, as the diff bench's children do).
// Its methods are those of s3blob.Store, with the same contract (blobtest).
type Blobs struct {
	// Dir, when set, keeps each object as a file under it instead of in
	// memory; tags stay in memory.
	Dir string
	// BucketName is what Bucket returns ["inmem"].
	BucketName string
	// BaseURL, when set, is where the store is served (ServeHTTP, say by an
	// httptest.Server): PresignGet's URLs point there, path-style
	// (BaseURL/bucket/key). Unset, they name the object
	// (inmem://bucket/key?...) and nothing serves them.
	BaseURL string

	mu      sync.Mutex
	objects map[string]memObject
	links   map[string]string // key -> a file holding the object
	tags    map[string]map[string]string
	version int64
	signKey []byte // signs the presigned GETs (made at the first)
}

type memObject struct {
	body []byte
	etag string
}

// NewBlobs returns an empty store in memory.
func NewBlobs() *Blobs { return &Blobs{} }

// Link makes key an object whose content is the file at path, read at each
// Open (a large generated upload, kept out of memory). Its ETag is the
// file's size and modification time.
func (b *Blobs) Link(key, path string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.links == nil {
		b.links = map[string]string{}
	}
	b.links[key] = path
}

// Bucket names the store (the bucket of the S3 events a confirmation sends).
func (b *Blobs) Bucket() string {
	if b.BucketName == "" {
		return "inmem"
	}
	return b.BucketName
}

// file returns the path of key's file, or "" when objects live in memory.
func (b *Blobs) file(key string) string {
	if p, ok := b.links[key]; ok {
		return p
	}
	if b.Dir == "" {
		return ""
	}
	return filepath.Join(b.Dir, filepath.FromSlash(key))
}

// Open streams an object. With ifMatch set, blob.ErrChanged when the
// object's ETag differs; blob.ErrNotFound when it does not exist.
func (b *Blobs) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	if err := ctx.Err(); err != nil {
		return blob.Object{}, err
	}
	b.mu.Lock()
	path := b.file(key)
	o, ok := b.objects[key]
	b.mu.Unlock()
	var obj blob.Object
	if path != "" {
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return blob.Object{}, fmt.Errorf("open %s: %w", key, blob.ErrNotFound)
		}
		if err != nil {
			return blob.Object{}, fmt.Errorf("open %s: %w", key, err)
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return blob.Object{}, fmt.Errorf("open %s: %w", key, err)
		}
		obj = blob.Object{Body: f, Size: st.Size(), ETag: fmt.Sprintf(`"%d-%d"`, st.Size(), st.ModTime().UnixNano())}
	} else {
		if !ok {
			return blob.Object{}, fmt.Errorf("open %s: %w", key, blob.ErrNotFound)
		}
		obj = blob.Object{Body: io.NopCloser(bytes.NewReader(o.body)), Size: int64(len(o.body)), ETag: o.etag}
	}
	if ifMatch != "" && ifMatch != obj.ETag {
		obj.Body.Close()
		return blob.Object{}, fmt.Errorf("open %s: %w", key, blob.ErrChanged)
	}
	return obj, nil
}

// Get reads a whole object; blob.ErrNotFound when it does not exist.
func (b *Blobs) Get(ctx context.Context, key string) ([]byte, error) {
	obj, err := b.Open(ctx, key, "")
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	return io.ReadAll(obj.Body)
}

// Put writes an object (a copy of body).
func (b *Blobs) Put(ctx context.Context, key string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if path := b.file(key); path != "" {
		b.mu.Unlock()
		// Written outside the lock, to a temporary file renamed over the
		// object's: PUTs of different keys run at once, and a reader sees
		// the old object or the new one whole, as on S3.
		if err := putFile(path, body); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		return nil
	}
	defer b.mu.Unlock()
	if b.objects == nil {
		b.objects = map[string]memObject{}
	}
	b.version++
	b.objects[key] = memObject{body: bytes.Clone(body), etag: `"v` + strconv.FormatInt(b.version, 10) + `"`}
	return nil
}

// putFile writes body to a temporary file beside path and renames it to
// path.
func putFile(path string, body []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), createPrefix+"*")
	if err != nil {
		return err
	}
	_, err = f.Write(body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// PutNew writes key unless an object is there already (then nothing
// changes, no error), as a conditional PUT with If-None-Match: * does.
func (b *Blobs) PutNew(ctx context.Context, key string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	if path := b.file(key); path != "" {
		b.mu.Unlock()
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return fmt.Errorf("put %s: %w", key, err)
			}
			f, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		}
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		_, err = f.Write(body)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	_, exists := b.objects[key]
	b.mu.Unlock()
	if exists {
		return nil
	}
	return b.Put(ctx, key, body)
}

// Size returns an object's size; blob.ErrNotFound when it does not exist.
func (b *Blobs) Size(ctx context.Context, key string) (int64, error) {
	obj, err := b.Open(ctx, key, "")
	if err != nil {
		return 0, err
	}
	obj.Body.Close()
	return obj.Size, nil
}

// List returns the keys under prefix, in key order.
func (b *Blobs) List(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for k := range b.objects {
		seen[k] = true
	}
	for k := range b.links {
		seen[k] = true
	}
	if b.Dir != "" {
		err := filepath.WalkDir(b.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), createPrefix) {
				return err // (a streamed object not closed yet is no object)
			}
			rel, err := filepath.Rel(b.Dir, path)
			if err == nil {
				seen[filepath.ToSlash(rel)] = true
			}
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
	}
	var keys []string
	for k := range seen {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// Tag sets an object's tags to the one tag key=value; blob.ErrNotFound when
// the object does not exist.
func (b *Blobs) Tag(ctx context.Context, key, tagKey, tagValue string) error {
	if _, err := b.Size(ctx, key); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tags == nil {
		b.tags = map[string]map[string]string{}
	}
	b.tags[key] = map[string]string{tagKey: tagValue}
	return nil
}

// Tags returns an object's tags; blob.ErrNotFound when it does not exist.
func (b *Blobs) Tags(ctx context.Context, key string) (map[string]string, error) {
	if _, err := b.Size(ctx, key); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]string{}
	for k, v := range b.tags[key] {
		out[k] = v
	}
	return out, nil
}

// PresignPut returns a PUT request for key valid for ttl. Its URL names the
// object (inmem://bucket/key); nothing serves it: tests Put the body.
func (b *Blobs) PresignPut(ctx context.Context, key string, ttl time.Duration) (blob.PresignedRequest, error) {
	if err := ctx.Err(); err != nil {
		return blob.PresignedRequest{}, err
	}
	return blob.PresignedRequest{Method: "PUT", URL: "inmem://" + b.Bucket() + "/" + key,
		Headers: map[string]string{}, Expires: time.Now().Add(ttl).UTC()}, nil
}

// Create starts an object written as a stream (blob.Writer): in a
// directory, to a temporary file beside it, renamed at Close; in memory, a
// buffer put at Close.
func (b *Blobs) Create(ctx context.Context, key string) (blob.Writer, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	b.mu.Lock()
	path := b.file(key)
	b.mu.Unlock()
	w := &writer{b: b, ctx: ctx, key: key, path: path}
	if path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", key, err)
		}
		f, err := os.CreateTemp(filepath.Dir(path), createPrefix+"*")
		if err != nil {
			return nil, fmt.Errorf("create %s: %w", key, err)
		}
		w.f = f
	}
	return w, nil
}

// createPrefix starts the name of the temporary file of a streamed object.
const createPrefix = ".create-"

// writer is a blob.Writer of Blobs.
type writer struct {
	b    *Blobs
	ctx  context.Context
	key  string
	path string   // the object's file, or "" in memory
	f    *os.File // the temporary file, in a directory
	buf  bytes.Buffer
	err  error
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errors.New("inmem: write after close")
	}
	if w.f == nil {
		return w.buf.Write(p)
	}
	n, err := w.f.Write(p)
	if err != nil {
		w.fail(fmt.Errorf("write %s: %w", w.key, err))
	}
	return n, w.err
}

func (w *writer) Close() error {
	if w.err != nil || w.done {
		return w.err
	}
	w.done = true
	if w.f == nil {
		if err := w.b.Put(w.ctx, w.key, w.buf.Bytes()); err != nil {
			w.err = err
		}
		w.buf = bytes.Buffer{}
		return w.err
	}
	if err := w.f.Close(); err != nil {
		w.fail(fmt.Errorf("write %s: %w", w.key, err))
		return w.err
	}
	w.b.mu.Lock()
	defer w.b.mu.Unlock()
	if err := os.Rename(w.f.Name(), w.path); err != nil {
		w.fail(fmt.Errorf("write %s: %w", w.key, err))
	}
	return w.err
}

func (w *writer) Abort() error {
	if w.done && w.err == nil {
		return nil
	}
	w.fail(errors.New("inmem: write aborted"))
	return nil
}

// fail keeps the first error and drops what was written.
func (w *writer) fail(err error) {
	if w.err == nil {
		w.err = err
	}
	w.done = true
	w.buf = bytes.Buffer{}
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}
