// Package metrics is how every function publishes its business metrics:
// CloudWatch Embedded Metric Format (EMF) lines written to the function's
// log stream (stdout on Lambda), which CloudWatch Logs turns into metrics
// with no API call. Locally the lines go where the logs go (`up -v`).
//
// One call per event, in the handler, where the event happens:
//
//	h.Metrics.Emit(ctx, metrics.Fields{RetailerID: r, Generation: g},
//		metrics.Count(metrics.ChunksApplied, 1),
//		metrics.Count(metrics.Uploads, 1).By("State", "applied"))
//
// A metric has no dimension (one series for the whole system, whichever
// function emits it), or one breakdown (By), published both in total and
// per value. Dimensions never include a retailer: per-retailer figures
// live in the databases (DESIGN 9); the retailer, generation, function and
// request ids ride on the line as plain properties, so CloudWatch Logs
// Insights finds every line of one upload.
//
// A nil *Recorder records nothing, so handlers need no metrics in tests.
// The names of DESIGN 9 are the constants below; a function that adds a
// metric adds its name here (and its alarm to infra/monitoring.go).
package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/retailcatalog/catalog/functions/platform/logging"
)

// DefaultNamespace is the CloudWatch namespace of the metrics unless configured.
const DefaultNamespace = "Catalog"

// Unit is a CloudWatch unit.
type Unit string

// Units the metrics use.
const (
	UnitCount        Unit = "Count"
	UnitSeconds      Unit = "Seconds"
	UnitMilliseconds Unit = "Milliseconds"
	UnitBytes        Unit = "Bytes"
)

// Metric names (DESIGN 9). Dimensions in brackets: a breakdown, also
// published in total.
const (
	// UploadsReserved: generations reserved (the ingestion funnel's start).
	UploadsReserved = "UploadsReserved"
	// UploadsReceived: uploads whose file arrived (at least once: a
	// duplicate S3 event counts again).
	UploadsReceived = "UploadsReceived"
	// Uploads [State]: uploads that reached a final state (applied,
	// rejected, held, superseded, expired).
	Uploads = "Uploads"
	// Rejections [Code]: rejected uploads by error code.
	Rejections = "Rejections"
	// RowsInserted, RowsUpdated, RowsDeleted, RowsUnchanged: the diff's
	// figures of each generation it sends to apply.
	RowsInserted  = "RowsInserted"
	RowsUpdated   = "RowsUpdated"
	RowsDeleted   = "RowsDeleted"
	RowsUnchanged = "RowsUnchanged"
	// RowsWritten: rows the apply actually wrote (a redelivered chunk writes none).
	RowsWritten = "RowsWritten"
	// DiffSeconds: one diff run, from its start to its last chunk sent (or its end).
	DiffSeconds = "DiffSeconds"
	// PutToAppliedSeconds: from the upload's arrival (received_at) to its
	// last chunk's commit.
	PutToAppliedSeconds = "PutToAppliedSeconds"
	// ChunksApplied: chunks whose rows were written and counted.
	ChunksApplied = "ChunksApplied"
	// FencedWritesRefused: chunks that wrote nothing because a newer
	// generation had arrived (I2, I4).
	FencedWritesRefused = "FencedWritesRefused"
	// OutboxAgeSeconds: the age of the oldest change event waiting (relay).
	OutboxAgeSeconds = "OutboxAgeSeconds"
	// OutboxParked: change events parked in the outboxes because they
	// cannot be published (a gauge, each sweep; relay).
	OutboxParked = "OutboxParked"
	// WebhookDeliveries and WebhookFailures (consumers).
	WebhookDeliveries = "WebhookDeliveries"
	WebhookFailures   = "WebhookFailures"
	// ReplicaFallbacks: storefront reads a replica could not answer, served by the writer.
	ReplicaFallbacks = "ReplicaFallbacks"
	// GenerationsRedriven: stuck generations the sweeper re-drove.
	GenerationsRedriven = "GenerationsRedriven"
	// GenerationsStuck: offboardings still stuck after every re-drive (a
	// gauge, each sweep; any other generation ends rejected instead).
	GenerationsStuck = "GenerationsStuck"
	// GenerationsFailed [Code]: generations the pipeline could not finish
	// (diff_failed, apply_failed), rejected and undone (I10). Not the
	// retailers' doing: alarmed.
	GenerationsFailed = "GenerationsFailed"
	// ReconcileRetailersChecked, ReconcileDivergentRetailers,
	// ReconcileDivergentProducts (missing + extra + different) and
	// ReconcileRepairedProducts: one retailer's reconciliation.
	ReconcileRetailersChecked   = "ReconcileRetailersChecked"
	ReconcileDivergentRetailers = "ReconcileDivergentRetailers"
	ReconcileDivergentProducts  = "ReconcileDivergentProducts"
	ReconcileRepairedProducts   = "ReconcileRepairedProducts"
	// ReconcileSeconds: one retailer's reconciliation.
	ReconcileSeconds = "ReconcileSeconds"
	// ReconcileFailures: retailers a reconciliation could not check after
	// its retries (their result records the error).
	ReconcileFailures = "ReconcileFailures"
	// RowsCollected [Kind]: rows collection removed (DESIGN 14), by kind:
	// tombstones, directory_entries, chunk_rows, outbox_rows,
	// consumer_versions.
	RowsCollected = "RowsCollected"
	// CollectionSeconds: one retailer's collection.
	CollectionSeconds = "CollectionSeconds"
)

// Value is one metric value.
type Value struct {
	Name  string
	Unit  Unit
	Value float64
	// Dim and DimValue break the metric down (By); "" publishes it in total only.
	Dim, DimValue string
}

// Count is a count.
func Count(name string, n int64) Value { return Value{Name: name, Unit: UnitCount, Value: float64(n)} }

// Duration is a time in seconds.
func Duration(name string, d time.Duration) Value {
	return Value{Name: name, Unit: UnitSeconds, Value: d.Seconds()}
}

// By breaks the metric down by one dimension: it is published in total and
// for dim=value. value must have few distinct values (a state, an error
// code), never an id.
func (v Value) By(dim, value string) Value {
	v.Dim, v.DimValue = dim, value
	return v
}

// Fields are the properties of a line that are not metrics: searchable in
// CloudWatch Logs Insights, never dimensions.
type Fields struct {
	RetailerID string
	Generation int64
}

// Options configure a Recorder.
type Options struct {
	Namespace string // [DefaultNamespace]
	Function  string // the function's name, a property of every line
	// Level is the function's log level: lines carry "level" INFO, or
	// Level when higher, so that Lambda's log-level filtering (which
	// treats a line by its "level") never drops them.
	Level slog.Level
	Now   func() time.Time // [time.Now]
}

// Recorder writes EMF lines to one stream.
type Recorder struct {
	w io.Writer
	o Options
}

// New returns a Recorder writing to w (each line with one Write call; share
// a logging.SyncWriter with the logger when both write to one stream).
func New(w io.Writer, o Options) *Recorder {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Recorder{w: w, o: o}
}

// Function is the name the recorder writes its lines under.
func (r *Recorder) Function() string {
	if r == nil {
		return ""
	}
	return r.o.Function
}

// Emit writes the values as one EMF line (or a few, when two values share
// a name or a dimension with different values). NaN and infinite values,
// and names that clash with the line's own properties (level, function,
// retailer_id, ...), are dropped. A nil Recorder does nothing.
func (r *Recorder) Emit(ctx context.Context, f Fields, values ...Value) {
	if r == nil || r.w == nil {
		return
	}
	var lines [][]Value
	for _, v := range values {
		if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) || v.Name == "" || reserved[v.Name] || (v.Dim != "" && reserved[v.Dim]) {
			continue
		}
		placed := false
		for i, line := range lines {
			if fits(line, v) {
				lines[i] = append(line, v)
				placed = true
				break
			}
		}
		if !placed {
			lines = append(lines, []Value{v})
		}
	}
	for _, line := range lines {
		r.w.Write(r.encode(ctx, f, line))
	}
}

// fits reports whether v can join a line: its name is not there yet and
// its dimension, if any, has no other value there.
func fits(line []Value, v Value) bool {
	for _, o := range line {
		if o.Name == v.Name || o.Name == v.Dim || o.Dim == v.Name {
			return false
		}
		if v.Dim != "" && o.Dim == v.Dim && o.DimValue != v.DimValue {
			return false
		}
	}
	return true
}

// reserved are the line's own properties: a metric or dimension of that name would clash.
var reserved = map[string]bool{"_aws": true, "level": true, "msg": true, "function": true,
	"retailer_id": true, "generation": true, logging.RequestIDKey: true, logging.APIRequestIDKey: true}

func (r *Recorder) encode(ctx context.Context, f Fields, values []Value) []byte {
	level := max(r.o.Level, slog.LevelInfo)
	var b bytes.Buffer
	b.WriteString(`{"_aws":{"Timestamp":`)
	b.WriteString(strconv.FormatInt(r.o.Now().UnixMilli(), 10))
	b.WriteString(`,"CloudWatchMetrics":[`)
	// One directive per dimension: the metrics without a breakdown, then
	// each breakdown's metrics.
	var dims []string
	seen := map[string]bool{}
	for _, v := range values {
		if !seen[v.Dim] {
			seen[v.Dim] = true
			dims = append(dims, v.Dim)
		}
	}
	for i, dim := range dims {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"Namespace":`)
		writeString(&b, r.o.Namespace)
		b.WriteString(`,"Dimensions":[[]`)
		if dim != "" {
			b.WriteString(`,[`)
			writeString(&b, dim)
			b.WriteByte(']')
		}
		b.WriteString(`],"Metrics":[`)
		n := 0
		for _, v := range values {
			if v.Dim != dim {
				continue
			}
			if n > 0 {
				b.WriteByte(',')
			}
			n++
			b.WriteString(`{"Name":`)
			writeString(&b, v.Name)
			if v.Unit != "" {
				b.WriteString(`,"Unit":`)
				writeString(&b, string(v.Unit))
			}
			b.WriteByte('}')
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]},"level":`)
	writeString(&b, level.String())
	b.WriteString(`,"msg":"metrics"`)
	prop := func(k, v string) {
		if v != "" {
			b.WriteByte(',')
			writeString(&b, k)
			b.WriteByte(':')
			writeString(&b, v)
		}
	}
	prop("function", r.o.Function)
	if ctx != nil {
		prop(logging.RequestIDKey, logging.LambdaRequestID(ctx))
		prop(logging.APIRequestIDKey, logging.APIRequestID(ctx))
	}
	prop("retailer_id", f.RetailerID)
	if f.Generation != 0 {
		b.WriteString(`,"generation":`)
		b.WriteString(strconv.FormatInt(f.Generation, 10))
	}
	for _, v := range values {
		if v.Dim != "" {
			prop(v.Dim, v.DimValue)
		}
	}
	for _, v := range values {
		b.WriteByte(',')
		writeString(&b, v.Name)
		b.WriteByte(':')
		b.WriteString(strconv.FormatFloat(v.Value, 'g', -1, 64))
	}
	b.WriteString("}\n")
	return b.Bytes()
}

func writeString(b *bytes.Buffer, s string) {
	enc, _ := json.Marshal(s)
	b.Write(enc)
}
