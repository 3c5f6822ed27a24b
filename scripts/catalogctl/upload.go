package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/apiclient"
)

// maxSinglePut is the most one upload may hold: one S3 PUT (DESIGN 4).
const maxSinglePut int64 = 5 << 30

// retailerIDPattern is the API's rule for retailer ids, checked before a
// long compression rather than after.
var retailerIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

func init() {
	register(&Command{
		Name: "upload", Args: "--retailer R [--mode delta] [--dry-run] FILE", Token: RetailerToken,
		Summary: "upload a catalog snapshot, wait until it is applied, print its status",
		Help: `Reserves the retailer's next generation, PUTs FILE to the presigned URL
the API returns (streamed from disk, with the returned headers exactly as
given, a progress bar on stderr), then follows the upload until it settles,
showing its state and the apply's chunks, and prints the final status JSON
on stdout.

FILE is CSV or JSON Lines (docs/RETAILERS.md), plain or gzipped, at most
5 GiB (one S3 PUT). --format is taken from the name (.csv, .jsonl, .ndjson,
with or without .gz) when not given, else the API sniffs the content.
--gzip compresses FILE first, into a temporary file in $TMPDIR (a presigned
PUT needs the exact length before it starts, so the compressed copy is
written out whole, then uploaded); it needs that much free space there and
is skipped for a file that is gzipped already. A PUT that breaks off is
retried (up to 3 tries) through the same URL.

--mode delta uploads a delta (docs/RETAILERS.md, "Delta uploads"): each row
names a product_id and the attributes it changes, null removes one (JSON
Lines), _delete true deletes the product; the rest of the catalog stays.

--dry-run previews FILE (docs/RETAILERS.md, "Trying a file first"): it is
read and compared with the catalog as it is, and nothing is applied; with
--mode delta, the delta is laid over the catalog as it is then, without
waiting for an upload in progress.

exit codes:
  0  applied
  2  rejected (the status names the problem and its line; nothing applied)
  3  held (an empty snapshot or a mass delete/update: confirm it with
     catalogctl confirm R G, or upload a corrected file)
  1  anything else: superseded by a newer upload, expired, --timeout
     passed, the API or the upload URL failed or cannot be reached
  0  previewed, with --dry-run (the counts and the first field changes on
     stderr; the whole plan: catalogctl plan R G)
With --no-wait: 0 once the file is stored, and the status as it is then.`,
		Flags: func(fs *flag.FlagSet) Runner {
			retailer := fs.String("retailer", "", "the retailer's `id` (required)")
			format := fs.String("format", "", "`csv` or jsonl (default: from FILE's name, else sniffed)")
			mode := fs.String("mode", "full", "`full` (the whole catalog) or delta (changes laid over it)")
			gz := fs.Bool("gzip", false, "gzip FILE before uploading (through a temporary file in $TMPDIR)")
			wait := fs.Bool("wait", true, "wait until the upload settles (applied, rejected, held, superseded)")
			noWait := fs.Bool("no-wait", false, "return once the file is stored (same as --wait=false)")
			timeout := fs.Duration("timeout", time.Hour, "how long to wait for the upload to settle")
			dryRun := fs.Bool("dry-run", false, "preview FILE: read and diff it, apply nothing; print its counts and first field changes")
			return func(ctx context.Context, c *Call, args []string) error {
				u := uploadRun{c: c, retailer: *retailer, format: *format, mode: *mode, gzip: *gz, wait: *wait && !*noWait, timeout: *timeout,
					dryRun: *dryRun}
				if len(args) != 1 {
					return c.Usagef("want one FILE, got %d arguments", len(args))
				}
				u.path = args[0]
				return u.run(ctx)
			}
		},
	})
}

// uploadRun is one `catalogctl upload`.
type uploadRun struct {
	c                *Call
	retailer, format string
	mode             string // "full" or "delta"
	path             string
	gzip, wait       bool
	timeout          time.Duration
	dryRun           bool // a preview (DESIGN 13)
}

func (u *uploadRun) run(ctx context.Context) error {
	c := u.c
	if u.retailer == "" {
		return c.Usagef("--retailer is required")
	}
	if !retailerIDPattern.MatchString(u.retailer) {
		return c.Usagef("--retailer %q is not a retailer id ([A-Za-z0-9_-], 1-64 characters)", u.retailer)
	}
	switch u.format {
	case "":
		u.format = formatFromName(u.path)
	case "csv", "jsonl":
	default:
		return c.Usagef(`--format must be "csv" or "jsonl", got %q`, u.format)
	}
	if u.timeout <= 0 {
		return c.Usagef("--timeout must be positive, got %v", u.timeout)
	}
	switch u.mode {
	case "", "full":
		u.mode = ""
	case "delta":
	default:
		return c.Usagef(`--mode must be "full" or "delta", got %q`, u.mode)
	}

	f, size, err := openSnapshot(u.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if u.gzip {
		gzipped, err := isGzip(f)
		if err != nil {
			return err
		}
		if gzipped {
			fmt.Fprintf(c.Stderr, "%s is gzipped already: uploading it as it is\n", u.path)
		} else {
			tmp, tmpSize, err := u.compress(ctx, f, size)
			if err != nil {
				return err
			}
			defer os.Remove(tmp.Name())
			defer tmp.Close()
			f, size = tmp, tmpSize
		}
	}
	if size > maxSinglePut {
		hint := "compress it with --gzip"
		if gzipped, _ := isGzip(f); gzipped || u.gzip {
			hint = "a larger catalog does not fit in one upload"
		}
		return fmt.Errorf("%s is %s; one upload is at most %s (a single S3 PUT): %s", u.path, byteSize(size), byteSize(maxSinglePut), hint)
	}

	mode := u.mode
	if mode == "full" {
		mode = "" // the default
	}
	slot, err := c.API.ReserveWith(ctx, c.Token, u.retailer, u.format, apiclient.ReserveOptions{Mode: mode, DryRun: u.dryRun})
	if err != nil {
		return fmt.Errorf("reserve a generation for %s: %w", u.retailer, err)
	}
	name := fmt.Sprintf("%s/%d", u.retailer, slot.Generation)
	fmt.Fprintf(c.Stderr, "%s: generation %d reserved; uploading %s (%s)\n", name, slot.Generation, u.path, byteSize(size))
	start := time.Now()
	if err := u.put(ctx, slot, f, size); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(c.Stderr, "%s: uploaded %s in %v\n", name, byteSize(size), time.Since(start).Round(time.Millisecond))

	if !u.wait {
		raw, _, err := getStatus(ctx, c, u.retailer, slot.Generation)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.Stderr, "%s: not waiting; follow it with: catalogctl status %s %d --wait\n", name, u.retailer, slot.Generation)
		return printJSON(c, raw)
	}
	raw, st, err := waiter{retailer: u.retailer, gen: slot.Generation, timeout: u.timeout, stored: true}.wait(ctx, c)
	if err != nil {
		return err
	}
	if st.State == "previewed" {
		printPlanHead(ctx, c, u.retailer, slot.Generation, planHeadItems)
	}
	return finalStatus(c, raw, st)
}

// openSnapshot opens a regular file and returns its size.
func openSnapshot(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is not a regular file (a presigned PUT needs the length up front)", path)
	}
	return f, info.Size(), nil
}

// formatFromName is "csv" or "jsonl" by FILE's extension (a .gz aside), or
// "" for the API to sniff.
func formatFromName(path string) string {
	name := strings.ToLower(filepath.Base(path))
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".gzip")
	switch filepath.Ext(name) {
	case ".csv":
		return "csv"
	case ".jsonl", ".ndjson":
		return "jsonl"
	}
	return ""
}

// isGzip reports whether f starts with gzip's magic bytes, and rewinds it.
func isGzip(f *os.File) (bool, error) {
	magic := make([]byte, 2)
	n, err := io.ReadFull(f, magic)
	if _, serr := f.Seek(0, io.SeekStart); serr != nil {
		return false, serr
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return false, err
	}
	return n == 2 && bytes.Equal(magic, []byte{0x1f, 0x8b}), nil
}

// compress gzips f into a temporary file (removed by the caller) and
// returns it rewound with its size.
func (u *uploadRun) compress(ctx context.Context, f *os.File, size int64) (*os.File, int64, error) {
	tmp, err := os.CreateTemp("", "catalogctl-*.gz")
	if err != nil {
		return nil, 0, fmt.Errorf("--gzip: %w", err)
	}
	fail := func(err error) (*os.File, int64, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, 0, fmt.Errorf("--gzip: compress %s to %s: %w", u.path, tmp.Name(), err)
	}
	m := u.c.newMeter("compressing", size, true)
	zw := gzip.NewWriter(tmp)
	if _, err := io.Copy(zw, io.TeeReader(ctxReader{ctx, f}, m)); err != nil {
		return fail(err)
	}
	if err := zw.Close(); err != nil {
		return fail(err)
	}
	m.Finish()
	info, err := tmp.Stat()
	if err != nil {
		return fail(err)
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fail(err)
	}
	fmt.Fprintf(u.c.Stderr, "compressed %s to %s (%.0f%%)\n", byteSize(size), byteSize(info.Size()), 100*float64(info.Size())/float64(max(size, 1)))
	return tmp, info.Size(), nil
}

// ctxReader stops a long copy when ctx ends (Ctrl-C).
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// putTries is how often a PUT that broke off is tried through the same URL.
const putTries = 3

// put PUTs f through the slot, with a progress meter; a PUT that broke off
// (no answer, or a 5xx) is tried again from the start. A 412 on a retry means
// an earlier try did store the file (the URL is single-use): that is success.
func (u *uploadRun) put(ctx context.Context, slot apiclient.Slot, f *os.File, size int64) error {
	m := u.c.newMeter("uploading", size, true)
	defer m.Finish()
	for try := 1; ; try++ {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		m.Restart()
		err := u.c.API.PutBody(ctx, slot, io.TeeReader(ctxReader{ctx, f}, m), size)
		var apiErr *apiclient.APIError
		isAPIErr := errors.As(err, &apiErr)
		switch {
		case err == nil:
			return nil
		case try > 1 && isAPIErr && apiErr.Status == http.StatusPreconditionFailed:
			fmt.Fprintf(u.c.Stderr, "the upload URL is used: an earlier try stored the file after all\n")
			return nil
		case ctx.Err() == nil && try < putTries && transient(err):
			fmt.Fprintf(u.c.Stderr, "upload try %d of %d failed (%v); trying again\n", try, putTries, err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(try) * time.Second):
			}
		case ctx.Err() != nil:
			return err
		default:
			return u.explainPut(slot, size, try, err)
		}
	}
}

// explainPut says what a failed PUT means and what to do.
func (u *uploadRun) explainPut(slot apiclient.Slot, size int64, tries int, err error) error {
	again := "run catalogctl upload again: it reserves a new generation"
	var apiErr *apiclient.APIError
	var urlErr *url.Error
	switch {
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusPreconditionFailed:
		return fmt.Errorf("the upload URL was used already (%v): one URL takes one file; %s", apiErr, again)
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusForbidden:
		return fmt.Errorf("the upload URL was refused (%v); it was valid until %s; %s",
			apiErr, slot.Upload.ExpiresAt.Local().Format(time.RFC3339), again)
	case errors.As(err, &apiErr) && apiErr.Status == http.StatusRequestEntityTooLarge:
		return fmt.Errorf("the file (%s) is over the upload size limit (%v): compress it with --gzip", byteSize(size), apiErr)
	case errors.As(err, &apiErr):
		return fmt.Errorf("upload refused: %v", apiErr)
	case errors.As(err, &urlErr):
		host := urlErr.URL
		if parsed, perr := url.Parse(urlErr.URL); perr == nil {
			host = parsed.Host
		}
		return fmt.Errorf("upload to %s failed (tries: %d): %v", host, tries, urlErr.Err)
	}
	return fmt.Errorf("upload: %w", err)
}
