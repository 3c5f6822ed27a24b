package read

import (
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/retailcatalog/catalog/functions/core/catalog"
	"github.com/retailcatalog/catalog/functions/core/snapshot"
	"github.com/retailcatalog/catalog/functions/platform/httpapi"
)

// The storefront's two answers are encoded by hand: they are the hot path
// (~22K requests/s at design load), and encoding/json's reflection and its
// re-validation of the attributes cost more than the rest of the handler.
// TestEncodingMatchesEncodingJSON checks the output against encoding/json.

// bodies recycles response buffers.
var bodies = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// appendProduct appends the contract's JSON of one product. The attributes
// are PostgreSQL's text of the jsonb column: valid JSON, written as it is.
func appendProduct(b []byte, p catalog.Product) []byte {
	b = append(b, `{"retailer_id":`...)
	b = snapshot.AppendJSONString(b, p.RetailerID)
	b = append(b, `,"product_id":`...)
	b = snapshot.AppendJSONString(b, p.ProductID)
	b = append(b, `,"attributes":`...)
	if len(p.Attributes) == 0 {
		b = append(b, "{}"...) // never: tombstones are not read
	} else {
		b = append(b, p.Attributes...)
	}
	b = append(b, `,"generation":`...)
	b = strconv.AppendInt(b, p.Generation, 10)
	b = append(b, `,"updated_at":"`...)
	b = p.UpdatedAt.UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

// pageTailBytes bounds what follows a page's last item: `],"next_after":`,
// the id quoted (at most 6 bytes a byte escaped), `}` and a newline.
const pageTailBytes = len(`],"next_after":`) + 2 + 6*snapshot.MaxProductIDBytes + 2

// appendPage appends the contract's JSON of a page: at most limit rows and,
// past the first, no more than keep the page within maxBytes (and within
// httpapi.MaxLambdaBodyBytes once escaped into the Lambda response), then
// next_after when there are more (rows beyond, or rows left out to keep
// the page within maxBytes); n is how many rows it holds. rows come from a
// read that stopped after maxBytes of attributes: when they hold that
// much, there may be more after them.
func appendPage(b []byte, rows []catalog.Product, limit, maxBytes int) (out []byte, n int) {
	start := len(b)
	b = append(b, `{"items":[`...)
	more := len(rows) > limit
	attrs := 0
	for _, p := range rows {
		attrs += len(p.Attributes)
	}
	if attrs >= maxBytes {
		more = true // the read may have stopped early
	}
	// escaped is the page's size as the Lambda response's JSON string
	// carries it, counted only once the page passes half of what that may
	// hold (below, twice its size fits): most pages never pay for it.
	escaped := -1
	for i, p := range rows[:min(len(rows), limit)] {
		mark := len(b)
		if i > 0 {
			b = append(b, ',')
		}
		b = appendProduct(b, p)
		switch {
		case escaped >= 0:
			escaped += httpapi.LambdaStringBytes(b[mark:]) - 3
		case len(b)-start+pageTailBytes > httpapi.MaxLambdaBodyBytes/2:
			escaped = httpapi.LambdaStringBytes(b[start:]) - 3
		}
		if i > 0 && (len(b)-start+pageTailBytes > maxBytes || escaped+2*pageTailBytes > httpapi.MaxLambdaBodyBytes) {
			b, more = b[:mark], true
			break
		}
		n++
	}
	b = append(b, `],"next_after":`...)
	if more && n > 0 {
		b = snapshot.AppendJSONString(b, rows[n-1].ProductID)
	} else {
		b = append(b, "null"...)
	}
	return append(b, '}'), n
}

// TuneGC sets the garbage collector of a process serving the storefront,
// unless GOGC is set (gogc is its value, read by the entry point). The live
// heap is a few MB, so the default (collect at twice the live heap) ran ~4
// collections a second at 3,500 requests/s, each taking one of two cores
// for ~12 ms, and that made the p99. At 5x the live heap (~25 MB of a 1 GB
// function) collections are 4x rarer.
func TuneGC(gogc string) {
	if gogc == "" {
		debug.SetGCPercent(400)
	}
}
