package systemtest_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/scripts/local/stack"
)

// gzipBomb is gzip of a CSV header and then inflated bytes of two-byte
// rows ("a\n"): 1 MB that inflates to 1 GiB.
func gzipBomb(t *testing.T, inflated int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	_, err = zw.Write([]byte("product_id\n"))
	require.NoError(t, err)
	rows := bytes.Repeat([]byte("a\n"), 1<<19)
	for written := 0; written < inflated; written += len(rows) {
		_, err = zw.Write(rows)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// spilled is what the diff's spill directory holds (it unlinks its files
// at creation: nothing should be left).
func spilled(t *testing.T, e *env) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(e.Stack.Options.DataDir, "tmp"))
	require.NoError(t, err)
	var out []string
	for _, d := range entries {
		out = append(out, d.Name())
	}
	return out
}

// Defect 4 (issue 21): 1 MB of gzip inflating to 1 GiB of two-byte rows
// used to time out on every diff attempt, spill ~860 MB, stay diffing and be
// resumed at every start. With the stack's defaults (50 million products, a
// 50 GiB inflate limit, a 2-minute diff) it ends rejected too_many_products,
// with its line, on its first attempt, within the diff's budget.
func TestGzipBombEndsWithinTheDiffBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{HandlerTimeout: 5 * time.Second, DiffTimeout: 2 * time.Minute})
	e.Onboard("bomb")
	bomb := gzipBomb(t, 1<<30)
	require.Less(t, len(bomb), 2<<20, "a small file")
	start := time.Now()
	gen, err := e.API.Upload(context.Background(), e.Token("bomb"), "bomb", "csv", bomb)
	require.NoError(t, err)
	s := e.Wait("bomb", gen)
	took := time.Since(start)
	t.Logf("the bomb ended %s in %s", s.State, took.Round(time.Millisecond))
	require.Equal(t, "rejected", s.State)
	require.Equal(t, "too_many_products", s.Error.Code, s.Error.Message)
	require.NotNil(t, s.Error.Line)
	require.Equal(t, 50_000_002, *s.Error.Line, "the header, then 50 million products: the next one is refused")
	require.Less(t, took, 2*time.Minute, "within one diff's budget")
	require.Empty(t, spilled(t, e), "nothing left on disk")
	e.RequireCatalog("bomb", nil)
}

// The inflate limit: a gzip file that inflates past it ends rejected
// file_too_large at once (here the limit is 64 MiB, of blank JSON Lines
// that hold no product at all).
func TestGzipInflateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, stack.Options{MaxInflatedBytes: 64 << 20})
	e.Onboard("bomb")
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	blank := bytes.Repeat([]byte("\n"), 1<<20)
	for range 128 {
		_, err = zw.Write(blank)
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	gen, err := e.API.Upload(context.Background(), e.Token("bomb"), "bomb", "jsonl", buf.Bytes())
	require.NoError(t, err)
	s := e.Wait("bomb", gen)
	require.Equal(t, "rejected", s.State)
	require.Equal(t, "file_too_large", s.Error.Code, s.Error.Message)
}
