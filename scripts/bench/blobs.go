package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/retailcatalog/catalog/functions/blob"
	"github.com/retailcatalog/catalog/functions/catalog"
)

// fileBlobs is a diff.Blobs over a local directory: the diff reads the
// upload and the indexes, and writes the index and the chunk objects, as it
// does on S3, through the same code path. Keys map to files under root;
// alias maps a key to another file (the generated upload).
type fileBlobs struct {
	root  string
	alias map[string]string
}

func (b *fileBlobs) path(key string) string {
	if p, ok := b.alias[key]; ok {
		return p
	}
	return filepath.Join(b.root, filepath.FromSlash(key))
}

// Open opens a file; the ETag is its size and modification time.
func (b *fileBlobs) Open(ctx context.Context, key, ifMatch string) (blob.Object, error) {
	f, err := os.Open(b.path(key))
	if errors.Is(err, fs.ErrNotExist) {
		return blob.Object{}, fmt.Errorf("open %s: %w", key, blob.ErrNotFound)
	}
	if err != nil {
		return blob.Object{}, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return blob.Object{}, err
	}
	etag := fmt.Sprintf("%d-%d", st.Size(), st.ModTime().UnixNano())
	if ifMatch != "" && ifMatch != etag {
		f.Close()
		return blob.Object{}, fmt.Errorf("open %s: %w", key, blob.ErrChanged)
	}
	return blob.Object{Body: f, Size: st.Size(), ETag: etag}, nil
}

// Put writes a file.
func (b *fileBlobs) Put(ctx context.Context, key string, body []byte) error {
	p := b.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, body, 0o644)
}

// discardQueue counts the chunk messages the diff sends.
type discardQueue struct {
	mu   sync.Mutex
	sent int
}

func (q *discardQueue) Send(ctx context.Context, queueURL, body, groupID, dedupID string) error {
	q.mu.Lock()
	q.sent++
	q.mu.Unlock()
	return nil
}

// benchShard stands in for the retailer's shard in the diff bench: the
// generation proceeds against a given baseline and stays the latest.
type benchShard struct {
	baseline, baselineProducts int64
	counts                     catalog.Counts
	chunks                     int
	failure                    error
}

func (s *benchShard) Retailer(ctx context.Context, retailerID string) (catalog.Retailer, error) {
	return benchRetailer, nil
}

func (s *benchShard) BeginDiff(ctx context.Context, retailerID string, gen int64) (catalog.DiffDecision, error) {
	return catalog.DiffDecision{Proceed: true, Format: "csv", Baseline: s.baseline, BaselineProducts: s.baselineProducts}, nil
}

func (s *benchShard) TakeOver(ctx context.Context, retailerID string, gen int64) (catalog.DiffDecision, error) {
	return catalog.DiffDecision{Proceed: true, Format: "csv", Baseline: s.baseline, BaselineProducts: s.baselineProducts}, nil
}

func (s *benchShard) IsLatest(ctx context.Context, retailerID string, gen int64) (bool, error) {
	return true, nil
}

func (s *benchShard) StartApplying(ctx context.Context, retailerID string, gen int64, c catalog.Counts, chunks int) error {
	s.counts, s.chunks = c, chunks
	return nil
}

func (s *benchShard) Reject(ctx context.Context, retailerID string, gen int64, code, message string, line int) error {
	s.failure = fmt.Errorf("snapshot rejected: %s line %d: %s", code, line, message)
	return nil
}

func (s *benchShard) Hold(ctx context.Context, retailerID string, gen int64, code, message string, c catalog.Counts) error {
	s.failure = fmt.Errorf("snapshot held: %s: %s", code, message)
	return nil
}

var benchRetailer = catalog.Retailer{ID: "bench", Hold: catalog.DefaultHoldPolicy}
