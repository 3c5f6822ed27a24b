package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retailcatalog/catalog/scripts/local/testenv"
)

// TestEventsSmoke runs the events bench small on the test server and
// emulator: every retailer's uploads apply (the first load twice, in
// mirrored order), every change event of the fast-path retailers reaches
// a Parquet file and its webhook, the relay publishes the others' backlog,
// and the table has every figure.
func TestEventsSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the local stack")
	}
	t.Parallel()
	var out bytes.Buffer
	err := runEventsBench(context.Background(), eventsOptions{rows: 400, rounds: 2, firstLoads: 2, chunkRows: 100, seed: 1,
		analyticsWindow: 100 * time.Millisecond, settle: 10 * time.Millisecond, timeout: 2 * time.Minute,
		postgresURL: testenv.Postgres(t), sqsEndpoint: testenv.SQS(t), prefix: testenv.Name("b"), out: &out})
	if err != nil {
		t.Fatal(err)
	}
	table := out.String()
	t.Log(table)
	for _, figure := range []string{"| first load: apply rows/s, relay fast path on (ref: off) |", "| 1 changes: apply rows/s, fast path on (ref: off) |",
		"| first load: the median upload's rows/s (2 a side), fast path on (ref: off) |", "| changes: the median upload's rows/s (1 a side), fast path on (ref: off) |",
		"| first load: the median of the 2 pairs' ratios (each pair the same data, one after the other) |",
		"| changes: the median of the 1 rounds' ratios (each round the same data, one after the other) |", "| relay throughput (",
		"| fast path: its publishing time, in the background of the apply invocations (share of their time) |",
		"| fast path: the apply invocations' wait after their last chunk (share of their time; ref: fast path off) |",
		"| commit to Parquet file, p50 (", "| commit to Parquet file, p99 |", "| commit to webhook, p50 (3 events) |", "| commit to webhook, p99 |"} {
		if !strings.Contains(table, figure) {
			t.Errorf("no %q in\n%s", figure, table)
		}
	}
}
