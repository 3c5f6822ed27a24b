package message

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	lambdaevents "github.com/aws/aws-lambda-go/events"
	"github.com/retailcatalog/catalog/functions/core/keys"
	"github.com/stretchr/testify/require"
)

// roundTrip decodes a sample into v, encodes it again and checks that the JSON
// means the same as the sample.
func roundTrip(t *testing.T, path string, v any) {
	t.Helper()
	sample, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(sample, v))
	again, err := json.Marshal(v)
	require.NoError(t, err)
	var want, got any
	require.NoError(t, json.Unmarshal(sample, &want))
	require.NoError(t, json.Unmarshal(again, &got))
	require.Equal(t, want, got)
}

func TestChunkMessageRoundTrip(t *testing.T) {
	t.Parallel()
	var m ChunkMessage
	roundTrip(t, "testdata/chunk_message.json", &m)
	require.Equal(t, "acme", m.RetailerID)
	require.EqualValues(t, 8, m.Generation)
	require.Equal(t, keys.Chunk("acme", 8, 3), m.Key)
}

func TestChunkObjectRoundTrip(t *testing.T) {
	t.Parallel()
	sample, err := os.ReadFile("testdata/chunk_object.jsonl")
	require.NoError(t, err)
	ops, err := ReadChunk(bytes.NewReader(sample))
	require.NoError(t, err)
	require.Len(t, ops, 2)
	var buf []byte
	for _, op := range ops {
		buf = AppendChunkLine(buf, op)
	}
	require.Equal(t, string(sample), string(buf))
}

func TestReadChunkRejectsBadLines(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"op":"upsert","product_id":"a"}`,
		`{"op":"drop","product_id":"a"}`,
		`{"op":"delete","product_id":""}`,
		`{"op":`,
	} {
		_, err := ReadChunk(strings.NewReader(bad + "\n"))
		require.Error(t, err, bad)
	}
}

func TestS3EventToDiffJobs(t *testing.T) {
	t.Parallel()
	// The SDK type adds urlDecodedKey on decode, so compare decoded values.
	sample, err := os.ReadFile("testdata/s3_event.json")
	require.NoError(t, err)
	var ev, again lambdaevents.S3Event
	require.NoError(t, json.Unmarshal(sample, &ev))
	encoded, err := json.Marshal(ev)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(encoded, &again))
	require.Equal(t, ev, again)
	jobs, err := DiffJobsFromS3Event(ev)
	require.NoError(t, err)
	require.Equal(t, []DiffJob{{
		Bucket: "catalog-snapshots", Key: "snapshots/acme/8/upload", RetailerID: "acme",
		Generation: 8, Size: 1024, ETag: `"d41d8cd98f00b204e9800998ecf8427e"`,
		EventTime: time.Date(2026, 11, 30, 4, 0, 0, 0, time.UTC),
	}}, jobs)
}

func TestNewObjectCreatedEventEscapesLikeS3(t *testing.T) {
	t.Parallel()
	ev := NewObjectCreatedEvent("us-east-1", "b", "snapshots/r_1-x/12/upload", 5, time.Unix(0, 0))
	jobs, err := DiffJobsFromS3Event(ev)
	require.NoError(t, err)
	require.Len(t, jobs, 1)
	require.Equal(t, "r_1-x", jobs[0].RetailerID)
	require.EqualValues(t, 12, jobs[0].Generation)
}

func TestMessageIDs(t *testing.T) {
	t.Parallel()
	require.Equal(t, "acme#3", MessageGroupID("acme", 23, 20))
	require.Equal(t, "acme:8:23", MessageDeduplicationID("acme", 8, 23))
}

// The allocation-free encoders write what AppendChunkLine writes, and the
// fast decoding path reads back what encoding/json reads.
func TestChunkLineFastPaths(t *testing.T) {
	t.Parallel()
	ids := []string{"sku-1", "a/b c", `q"uote`, `back\slash`, "<tag>&", "é", "tab\there", "\u2028", "x\x7f"}
	hash := [16]byte{1, 2, 3, 0xff}
	attrs := []byte(`{"a":"b","n":1}`)
	var all []byte
	var want []ChunkOp
	for _, id := range ids {
		up := ChunkOp{Op: OpUpsert, ProductID: id, Hash: hex.EncodeToString(hash[:]), Attributes: attrs}
		del := ChunkOp{Op: OpDelete, ProductID: id}
		require.Equal(t, string(AppendChunkLine(nil, up)), string(AppendUpsertLine(nil, []byte(id), hash, attrs)))
		require.Equal(t, string(AppendChunkLine(nil, del)), string(AppendDeleteLine(nil, id)))
		all = AppendUpsertLine(all, []byte(id), hash, attrs)
		all = AppendDeleteLine(all, id)
		want = append(want, up, del)
		for _, line := range [][]byte{AppendChunkLine(nil, up), AppendChunkLine(nil, del)} {
			var slow ChunkOp
			require.NoError(t, json.Unmarshal(line, &slow))
			if fast, ok := parseChunkLine(bytes.TrimSpace(line)); ok {
				require.Equal(t, slow, fast, "line %s", line)
			}
		}
	}
	got, err := ReadChunk(bytes.NewReader(all))
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// BenchmarkChunkEncode writes a 5,000-row chunk of typical upserts.
func BenchmarkChunkEncode(b *testing.B) {
	attrs := []byte(`{"availability":"in stock","brand":"Acme","category":"Apparel > Shirts","color":"red","currency":"USD","description":"soft cotton durable","gtin":"0123456789012","image_url":"https://img.example.com/p/0001234567.jpg","price":"12.50","size":"M","title":"Acme soft classic tee","updated":"2025-01-01T10:00:00Z"}`)
	var hash [16]byte
	id := []byte("SKU-0001234567")
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := 0; i < 5000; i++ {
			buf = AppendUpsertLine(buf, id, hash, attrs)
		}
	}
	b.SetBytes(int64(len(buf)))
}

// BenchmarkChunkDecode reads it back, as the apply does.
func BenchmarkChunkDecode(b *testing.B) {
	attrs := []byte(`{"availability":"in stock","brand":"Acme","price":"12.50","title":"Acme soft classic tee"}`)
	var buf []byte
	for i := 0; i < 5000; i++ {
		buf = AppendUpsertLine(buf, []byte("SKU-0001234567"), [16]byte{}, attrs)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadChunk(bytes.NewReader(buf)); err != nil {
			b.Fatal(err)
		}
	}
}

func TestObjectCreatedMessageIsADiffJob(t *testing.T) {
	t.Parallel()
	var ev lambdaevents.S3Event
	require.NoError(t, json.Unmarshal([]byte(ObjectCreatedMessage("us-east-1", "b", keys.Upload("r1", 3), time.Unix(0, 0))), &ev))
	jobs, err := DiffJobsFromS3Event(ev)
	require.NoError(t, err)
	require.Equal(t, []DiffJob{{Bucket: "b", Key: "snapshots/r1/3/upload", RetailerID: "r1", Generation: 3, EventTime: time.Unix(0, 0).UTC()}}, jobs)
}

func TestEnvelopeRoundTrip(t *testing.T) {
	t.Parallel()
	var ch Envelope
	roundTrip(t, "testdata/envelope_changes.json", &ch)
	require.NoError(t, ch.Validate())
	require.Equal(t, EventID(TypeChanges, "acme", 8, 3), ch.ID)
	require.Equal(t, keys.Change("acme", 8, 3), ch.Object)

	var held Envelope
	roundTrip(t, "testdata/envelope_snapshot_held.json", &held)
	require.NoError(t, held.Validate())
	require.Equal(t, SnapshotType("held"), held.Type)
	require.Equal(t, EventID(held.Type, "acme", 9, 0), held.ID)
	require.Equal(t, "mass_delete", held.Status.Error.Code)
}

func TestEnvelopeValidate(t *testing.T) {
	t.Parallel()
	seq := 0
	ok := Envelope{ID: "r:1:changes:0", Type: TypeChanges, Time: time.Now(), RetailerID: "r", Generation: 1,
		Seq: &seq, Count: 1, Object: "chunks/r/1/0", SHA256: strings.Repeat("a", 64)}
	require.NoError(t, ok.Validate())
	for name, mutate := range map[string]func(*Envelope){
		"no seq":         func(e *Envelope) { e.Seq = nil },
		"no count":       func(e *Envelope) { e.Count = 0 },
		"short sha":      func(e *Envelope) { e.SHA256 = "ab" },
		"unknown type":   func(e *Envelope) { e.Type = "catalog.snapshot.diffing" },
		"status missing": func(e *Envelope) { e.Type = TypeSnapshotApplied },
		"no generation":  func(e *Envelope) { e.Generation = 0 },
		"no time":        func(e *Envelope) { e.Time = time.Time{} },
		"no retailer id": func(e *Envelope) { e.RetailerID = "" },
	} {
		bad := ok
		mutate(&bad)
		require.Error(t, bad.Validate(), name)
	}
	require.Empty(t, SnapshotType("diffing"))
	require.Equal(t, "r:2:applied", EventID(TypeSnapshotApplied, "r", 2, 0))
}

// Keys in events are form-encoded, "/" kept, and decode back.
func TestEncodeEventKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"snapshots/r1/7/upload": "snapshots/r1/7/upload",
		"a b/c+d":               "a+b/c%2Bd",
		"ü/€=?&":                "%C3%BC/%E2%82%AC%3D%3F%26",
	} {
		require.Equal(t, want, EncodeEventKey(key))
		back, err := url.QueryUnescape(want)
		require.NoError(t, err)
		require.Equal(t, key, back)
	}
}
