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

	"github.com/retailcatalog/catalog/functions/blob"
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

	mu      sync.Mutex
	objects map[string]memObject
	links   map[string]string // key -> a file holding the object
	tags    map[string]map[string]string
	version int64
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
	defer b.mu.Unlock()
	if path := b.file(key); path != "" {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return fmt.Errorf("put %s: %w", key, err)
		}
		return nil
	}
	if b.objects == nil {
		b.objects = map[string]memObject{}
	}
	b.version++
	b.objects[key] = memObject{body: bytes.Clone(body), etag: `"v` + strconv.FormatInt(b.version, 10) + `"`}
	return nil
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
			if err != nil || d.IsDir() {
				return err
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
