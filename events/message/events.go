// Package events holds the Go types of every message that crosses a boundary
// between functions: the chunk message on the apply FIFO queues, the diff job
// on the diff-jobs queue (an S3 event notification, of which we read a subset),
// and the envelope of the change events published to downstream systems
// (with the upload status it may carry). Each has sample JSON in testdata,
// round-trip tested.
package message

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/retailcatalog/catalog/functions/core/keys"
)

// ChunkMessage is the body of one message on apply-small.fifo or
// apply-large.fifo. Rows travel by reference: the chunk object under Key holds
// them, and SHA256 guards against reading a different object than was sent.
type ChunkMessage struct {
	RetailerID string `json:"retailer_id"`
	Generation int64  `json:"generation"`
	Seq        int    `json:"seq"`
	Total      int    `json:"total"`
	Rows       int    `json:"rows"`
	Key        string `json:"key"`
	SHA256     string `json:"sha256"`
}

// ChunkOp is one line of a chunk object (JSON Lines): an upsert carries the
// canonical attributes and their hash; a delete carries only the product id.
type ChunkOp struct {
	Op         string          `json:"op"` // "upsert" or "delete"
	ProductID  string          `json:"product_id"`
	Hash       string          `json:"hash,omitempty"` // hex content hash of Attributes
	Attributes json.RawMessage `json:"attributes,omitempty"`
}

// Chunk operation names.
const (
	OpUpsert = "upsert"
	OpDelete = "delete"
)

// MessageGroupID is the FIFO group of chunk seq of a retailer: with inflight
// groups per retailer, at most inflight chunks of one retailer are in flight at
// once (I9) while that many workers can share a big retailer.
func MessageGroupID(retailerID string, seq, inflight int) string {
	if inflight <= 0 {
		inflight = 1
	}
	return retailerID + "#" + strconv.Itoa(seq%inflight)
}

// MessageDeduplicationID is the FIFO deduplication id of a chunk message.
func MessageDeduplicationID(retailerID string, generation int64, seq int) string {
	return fmt.Sprintf("%s:%d:%d", retailerID, generation, seq)
}

// Object keys in the bucket.

// DiffJob is what the diff function reads from one diff-jobs message: the
// object that was created.
type DiffJob struct {
	Bucket     string
	Key        string
	RetailerID string
	Generation int64
	Size       int64
	// ETag is the version of the object the event announces, quoted as S3
	// returns it from GetObject; "" when the event does not say (a job
	// re-sent by a confirmation or a restart).
	ETag      string
	EventTime time.Time
}

// DiffJobsFromS3Event extracts the diff jobs of an S3 event notification.
// Records that are not object-created events under snapshots/ are skipped; a
// key that looks like an upload but does not parse is an error.
func DiffJobsFromS3Event(ev lambdaevents.S3Event) ([]DiffJob, error) {
	var jobs []DiffJob
	for _, rec := range ev.Records {
		if !strings.HasPrefix(rec.EventName, "ObjectCreated:") {
			continue
		}
		if !strings.HasPrefix(rec.S3.Object.Key, "snapshots/") {
			continue
		}
		retailerID, generation, err := keys.ParseUpload(rec.S3.Object.Key)
		if err != nil {
			return nil, err
		}
		key, _ := url.QueryUnescape(rec.S3.Object.Key)
		jobs = append(jobs, DiffJob{
			Bucket:     rec.S3.Bucket.Name,
			Key:        key,
			RetailerID: retailerID,
			Generation: generation,
			Size:       rec.S3.Object.Size,
			ETag:       QuoteETag(rec.S3.Object.ETag),
			EventTime:  rec.EventTime,
		})
	}
	return jobs, nil
}

// DiffJobGroupID is the FIFO group of a retailer's diff jobs on
// diff-jobs.fifo: one group per retailer, so that SQS hands out one job of a
// retailer at a time (one diff running per retailer) while every other
// retailer's group stays available to the other diff workers.
func DiffJobGroupID(retailerID string) string { return retailerID }

// DiffJobDedupID is the FIFO deduplication id of a diff-jobs.fifo message
// body: the same S3 event delivered twice is one job, while a re-sent job
// (a confirmation, a restart) carries a new event time and goes through.
func DiffJobDedupID(body string) string {
	sum := sha256.Sum256([]byte(body))
	return hex.EncodeToString(sum[:])
}

// QuoteETag returns an ETag in the quoted form GetObject returns (S3 events
// carry it bare); "" stays "".
func QuoteETag(etag string) string {
	if etag == "" || strings.HasPrefix(etag, `"`) {
		return etag
	}
	return `"` + etag + `"`
}

// NewObjectCreatedEvent builds the S3 event notification for an object, the
// way S3 sends it (the key URL-encoded). The confirm route and crash recovery
// use it to ask the diff function to look at an upload again.
func NewObjectCreatedEvent(region, bucket, key string, size int64, at time.Time) lambdaevents.S3Event {
	return lambdaevents.S3Event{Records: []lambdaevents.S3EventRecord{{
		EventVersion: "2.1",
		EventSource:  "aws:s3",
		AWSRegion:    region,
		EventTime:    at.UTC(),
		EventName:    "ObjectCreated:Put",
		S3: lambdaevents.S3Entity{
			SchemaVersion: "1.0",
			Bucket:        lambdaevents.S3Bucket{Name: bucket, Arn: "arn:aws:s3:::" + bucket},
			Object:        lambdaevents.S3Object{Key: EncodeEventKey(key), Size: size},
		},
	}}}
}

// EncodeEventKey encodes an object key the way S3 event notifications do:
// form URL encoding (a space becomes '+'), with '/' left as is. Consumers
// decode it with url.QueryUnescape.
func EncodeEventKey(key string) string {
	return strings.ReplaceAll(url.QueryEscape(key), "%2F", "/")
}

// ObjectCreatedMessage is the diff-jobs message body that asks the diff to
// look at an upload (again): the JSON of NewObjectCreatedEvent.
func ObjectCreatedMessage(region, bucket, key string, at time.Time) string {
	body, _ := json.Marshal(NewObjectCreatedEvent(region, bucket, key, 0, at))
	return string(body)
}

// AppendChunkLine appends op as one JSON line of a chunk object. Attributes must
// already be canonical JSON; they are copied as they are.
func AppendChunkLine(buf []byte, op ChunkOp) []byte {
	buf = append(buf, `{"op":`...)
	buf = strconv.AppendQuote(buf, op.Op)
	buf = append(buf, `,"product_id":`...)
	buf = appendJSONString(buf, op.ProductID)
	if op.Hash != "" {
		buf = append(buf, `,"hash":`...)
		buf = strconv.AppendQuote(buf, op.Hash)
	}
	if len(op.Attributes) > 0 {
		buf = append(buf, `,"attributes":`...)
		buf = append(buf, op.Attributes...)
	}
	return append(buf, "}\n"...)
}

// AppendUpsertLine appends the chunk line of an upsert, byte for byte what
// AppendChunkLine writes for ChunkOp{Op: OpUpsert, ProductID: id, Hash:
// hex(hash), Attributes: attributes}, without allocating.
func AppendUpsertLine(buf, id []byte, hash [16]byte, attributes []byte) []byte {
	buf = append(buf, `{"op":"upsert","product_id":`...)
	buf = appendJSONString(buf, id)
	buf = append(buf, `,"hash":"`...)
	buf = hex.AppendEncode(buf, hash[:])
	buf = append(buf, `","attributes":`...)
	buf = append(buf, attributes...)
	return append(buf, "}\n"...)
}

// AppendDeleteLine appends the chunk line of a delete, as AppendChunkLine does.
func AppendDeleteLine(buf []byte, id string) []byte {
	buf = append(buf, `{"op":"delete","product_id":`...)
	buf = appendJSONString(buf, id)
	return append(buf, "}\n"...)
}

// appendJSONString appends s quoted as encoding/json.Marshal does (HTML
// characters escaped too): plain printable ASCII is copied, anything else
// goes through encoding/json.
func appendJSONString[S string | []byte](buf []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(string(s))
			return append(buf, b...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// ReadChunk decodes a chunk object written with AppendChunkLine (see
// DecodeChunk, which also checks the object's checksum).
func ReadChunk(r io.Reader) ([]ChunkOp, error) { return DecodeChunk(r, "") }

// parseChunkLine decodes a line in exactly the layout AppendUpsertLine and
// AppendDeleteLine write, with an id that needs no unescaping, without
// encoding/json; ok is false for anything else (json.Unmarshal decides). The
// attributes are not validated here: the shard's jsonb cast does that. The
// attributes alias b.
func parseChunkLine(b []byte) (op ChunkOp, ok bool) {
	const up, del = `{"op":"upsert","product_id":"`, `{"op":"delete","product_id":"`
	var rest []byte
	switch {
	case bytes.HasPrefix(b, []byte(up)):
		op.Op, rest = OpUpsert, b[len(up):]
	case bytes.HasPrefix(b, []byte(del)):
		op.Op, rest = OpDelete, b[len(del):]
	default:
		return op, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return op, false
	}
	id := rest[:end]
	for _, c := range id {
		if c < 0x20 || c == '\\' {
			return op, false
		}
	}
	if !utf8.Valid(id) {
		return op, false
	}
	rest = rest[end+1:]
	if op.Op == OpDelete {
		if string(rest) != "}" {
			return op, false
		}
		op.ProductID = string(id)
		return op, true
	}
	const hashKey, attrKey = `,"hash":"`, `","attributes":`
	if len(rest) < len(hashKey)+32+len(attrKey)+3 || string(rest[:len(hashKey)]) != hashKey {
		return op, false
	}
	h := rest[len(hashKey) : len(hashKey)+32]
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return op, false
		}
	}
	rest = rest[len(hashKey)+32:]
	if string(rest[:len(attrKey)]) != attrKey {
		return op, false
	}
	attrs := rest[len(attrKey) : len(rest)-1]
	if rest[len(rest)-1] != '}' || attrs[0] != '{' || attrs[len(attrs)-1] != '}' {
		return op, false
	}
	op.ProductID = string(id)
	op.Hash = string(h)
	op.Attributes = attrs
	return op, true
}

// Sizes of chunk lines, for chunk planning before the lines are written.
const (
	upsertLineFixed = len(`{"op":"upsert","product_id":`) + len(`,"hash":"`) + 32 + len(`","attributes":`) + len("}\n")
	deleteLineFixed = len(`{"op":"delete","product_id":`) + len("}\n")
)

// UpsertLineLen is len(AppendUpsertLine(nil, id, hash, attributes)) for
// attributes of attributesLen bytes.
func UpsertLineLen(id []byte, attributesLen int) int {
	return upsertLineFixed + jsonStringLen(id) + attributesLen
}

// DeleteLineLen is len(AppendDeleteLine(nil, id)).
func DeleteLineLen(id string) int { return deleteLineFixed + jsonStringLen(id) }

// jsonStringLen is len(appendJSONString(nil, s)).
func jsonStringLen[S string | []byte](s S) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(string(s))
			return len(b)
		}
	}
	return len(s) + 2
}
