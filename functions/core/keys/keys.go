// Package keys is the layout of the snapshot bucket (DESIGN 7): where an
// upload, a generation's index, its chunks and its change objects live.
// Every key the pipeline reads or writes is made here.
package keys

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Upload is where a retailer PUTs the snapshot of a generation.
func Upload(retailerID string, generation int64) string {
	return fmt.Sprintf("snapshots/%s/%d/upload", retailerID, generation)
}

// UploadPrefix is the prefix of every upload key of a retailer.
func UploadPrefix(retailerID string) string { return "snapshots/" + retailerID + "/" }

// UploadGeneration returns the generation of an upload key of retailerID.
func UploadGeneration(retailerID, key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, UploadPrefix(retailerID))
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, "/upload")
	if !ok {
		return 0, false
	}
	gen, err := strconv.ParseInt(rest, 10, 64)
	return gen, err == nil && gen > 0
}

// Index is where the diff keeps a generation's sorted (product_id, hash) index.
func Index(retailerID string, generation int64) string {
	return fmt.Sprintf("indexes/%s/%d", retailerID, generation)
}

// IndexPrefix is the prefix of every index key of a retailer.
func IndexPrefix(retailerID string) string { return "indexes/" + retailerID + "/" }

// IndexGeneration returns the generation of an index key of retailerID.
func IndexGeneration(retailerID, key string) (int64, bool) {
	rest, ok := strings.CutPrefix(key, IndexPrefix(retailerID))
	if !ok {
		return 0, false
	}
	gen, err := strconv.ParseInt(rest, 10, 64)
	return gen, err == nil && gen > 0
}

// The tag the diff puts on an index no diff will read again, and on an
// upload that is no longer the content of the applied generation; the
// bucket's lifecycle rules (infra) expire tagged objects once they are old
// enough (an upload: upload_retention_days after it was made).
const (
	SupersededTagKey   = "catalog-superseded"
	SupersededTagValue = "true"
)

// Chunk is where the diff writes chunk seq of a generation.
func Chunk(retailerID string, generation int64, seq int) string {
	return fmt.Sprintf("chunks/%s/%d/%d", retailerID, generation, seq)
}

// ParseUpload returns the retailer and generation of an upload key as it
// appears in an S3 event notification (URL-encoded, spaces as '+').
func ParseUpload(escapedKey string) (retailerID string, generation int64, err error) {
	key, err := url.QueryUnescape(escapedKey)
	if err != nil {
		return "", 0, fmt.Errorf("unescape key %q: %w", escapedKey, err)
	}
	parts := strings.Split(key, "/")
	if len(parts) != 4 || parts[0] != "snapshots" || parts[3] != "upload" || parts[1] == "" {
		return "", 0, fmt.Errorf("key %q is not snapshots/{retailer_id}/{generation}/upload", key)
	}
	generation, err = strconv.ParseInt(parts[2], 10, 64)
	if err != nil || generation <= 0 {
		return "", 0, fmt.Errorf("key %q: bad generation %q", key, parts[2])
	}
	return parts[1], generation, nil
}

// Change is where the relay writes the change object of chunk seq when it
// differs from the chunk object (some of the chunk's ops changed nothing).
func Change(retailerID string, generation int64, seq int) string {
	return fmt.Sprintf("changes/%s/%d/%d", retailerID, generation, seq)
}

// Problems is where the diff writes every problem of a generation it read
// (DESIGN 13, "Every problem"): JSON Lines, up to 100,000, empty when the
// file had none. Kept as long as the upload (upload_retention_days).
func Problems(retailerID string, generation int64) string {
	return fmt.Sprintf("problems/%s/%d", retailerID, generation)
}

// PlanIndex is where the diff writes the page index of a generation's
// plan (DESIGN 13): the first product_id and item count of each page.
func PlanIndex(retailerID string, generation int64) string {
	return fmt.Sprintf("plans/%s/%d/index", retailerID, generation)
}

// PlanPage is where the diff writes page n of a generation's plan: its
// items in product_id order, one JSON object a line.
func PlanPage(retailerID string, generation int64, n int) string {
	return fmt.Sprintf("plans/%s/%d/%d", retailerID, generation, n)
}
