package usage

import (
	"fmt"
	"time"
)

// DateLayout is the layout of a UTC day in usage records and reports.
const DateLayout = "2006-01-02"

// Usage is what one retailer used on one UTC day: the counters of DESIGN 10.
// Every field is a count that only grows during the day; Add sums records.
type Usage struct {
	// Uploads is the snapshot files received (a diff started on them).
	Uploads int64 `json:"uploads"`
	// BytesUploaded is the size of those files as stored in S3.
	BytesUploaded int64 `json:"bytes_uploaded"`
	// RowsReceived is the rows the diff read from them.
	RowsReceived int64 `json:"rows_received"`
	// RowsInserted, RowsUpdated and RowsDeleted are the changes the diff
	// emitted and the apply committed, counted once per chunk.
	RowsInserted int64 `json:"rows_inserted"`
	RowsUpdated  int64 `json:"rows_updated"`
	RowsDeleted  int64 `json:"rows_deleted"`
	// Chunks is the chunks applied, each counted once however often SQS
	// delivered it.
	Chunks int64 `json:"chunks"`
	// DBRowsWritten is the rows the database wrote for the retailer
	// (products, tombstones, outbox, directory), as the statements reported.
	DBRowsWritten int64 `json:"db_rows_written"`
	// Reads is the storefront requests answered for the retailer.
	Reads int64 `json:"reads"`
	// ReadBytes is the bytes of those answers.
	ReadBytes int64 `json:"read_bytes"`
	// APIRequests is the other API requests of the retailer (upload slots,
	// statuses, confirmations, settings).
	APIRequests int64 `json:"api_requests"`
	// S3ClassA is PUT, COPY, POST and LIST requests; S3ClassB GET, HEAD and
	// the others.
	S3ClassA int64 `json:"s3_class_a"`
	S3ClassB int64 `json:"s3_class_b"`
	// S3ByteDays is the bytes written to S3 times the days the bucket's
	// lifecycle keeps them (storage is committed when an object is written).
	S3ByteDays int64 `json:"s3_byte_days"`
	// SQSStandard and SQSFIFO are SQS requests (send, receive, delete,
	// visibility changes) on standard and FIFO queues.
	SQSStandard int64 `json:"sqs_standard_requests"`
	SQSFIFO     int64 `json:"sqs_fifo_requests"`
	// SNSPublishes is messages published to SNS topics.
	SNSPublishes int64 `json:"sns_requests"`
	// Functions is Lambda usage per function name ("upload", "diff",
	// "apply-small", "read", ...).
	Functions map[string]FunctionUsage `json:"functions,omitempty"`
}

// FunctionUsage is one function's Lambda usage.
type FunctionUsage struct {
	// Invocations is the invocations (Lambda requests) on the retailer's
	// behalf; a storefront read is one, a batch of chunks one per chunk.
	Invocations int64 `json:"invocations"`
	// MBms is the billed milliseconds times the configured memory in MB.
	MBms int64 `json:"mb_ms"`
}

// StorefrontFunctions are the functions whose usage is the storefront's;
// every other function is ingestion.
var StorefrontFunctions = map[string]bool{"read": true}

// BilledMBms is what Lambda bills for one invocation of d at memoryMB: the
// duration rounded up to the next millisecond, times the memory.
func BilledMBms(d time.Duration, memoryMB int) int64 {
	if d < 0 {
		d = 0
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	return int64(ms) * int64(memoryMB)
}

// MBmsPerGBs is the MB-milliseconds in one GB-second (GB = 1024 MB).
const MBmsPerGBs = 1024 * 1000

// RowsChanged is inserted + updated + deleted.
func (u Usage) RowsChanged() int64 { return u.RowsInserted + u.RowsUpdated + u.RowsDeleted }

// Counters are the scalar counters of Usage (Functions aside), in the
// column order of the usage tables.
var Counters = []func(u *Usage) *int64{
	func(u *Usage) *int64 { return &u.Uploads },
	func(u *Usage) *int64 { return &u.BytesUploaded },
	func(u *Usage) *int64 { return &u.RowsReceived },
	func(u *Usage) *int64 { return &u.RowsInserted },
	func(u *Usage) *int64 { return &u.RowsUpdated },
	func(u *Usage) *int64 { return &u.RowsDeleted },
	func(u *Usage) *int64 { return &u.Chunks },
	func(u *Usage) *int64 { return &u.DBRowsWritten },
	func(u *Usage) *int64 { return &u.Reads },
	func(u *Usage) *int64 { return &u.ReadBytes },
	func(u *Usage) *int64 { return &u.APIRequests },
	func(u *Usage) *int64 { return &u.S3ClassA },
	func(u *Usage) *int64 { return &u.S3ClassB },
	func(u *Usage) *int64 { return &u.S3ByteDays },
	func(u *Usage) *int64 { return &u.SQSStandard },
	func(u *Usage) *int64 { return &u.SQSFIFO },
	func(u *Usage) *int64 { return &u.SNSPublishes },
}

// Add adds o to u.
func (u *Usage) Add(o Usage) {
	for _, f := range Counters {
		*f(u) += *f(&o)
	}
	for name, f := range o.Functions {
		u.AddFunction(name, f)
	}
}

// AddFunction adds a function's usage.
func (u *Usage) AddFunction(name string, f FunctionUsage) {
	if u.Functions == nil {
		u.Functions = map[string]FunctionUsage{}
	}
	cur := u.Functions[name]
	cur.Invocations += f.Invocations
	cur.MBms += f.MBms
	u.Functions[name] = cur
}

// S3Requests is class A + class B.
func (u Usage) S3Requests() int64 { return u.S3ClassA + u.S3ClassB }

// SQSRequests is standard + FIFO.
func (u Usage) SQSRequests() int64 { return u.SQSStandard + u.SQSFIFO }

// DayUsage is one retailer's usage on one UTC day.
type DayUsage struct {
	// Date is the UTC day, DateLayout.
	Date       string `json:"date"`
	RetailerID string `json:"retailer_id"`
	Usage
}

// ParseDay parses a YYYY-MM-DD day.
func ParseDay(s string) (time.Time, error) {
	d, err := time.Parse(DateLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("date %q: want YYYY-MM-DD", s)
	}
	return d, nil
}
