package snapshot

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/retailcatalog/catalog/functions/core/catalog"
)

// CountAttributes counts, per attribute, the products that have it and
// those with a value other than "" or null: CSV columns are in every
// product, JSON keys where given; serial and parallel alike.
func TestAttributeCounts(t *testing.T) {
	t.Parallel()
	var csv, jsonl strings.Builder
	csv.WriteString("product_id,title,color\n")
	for i := range 1000 {
		color := "red"
		if i%4 == 0 {
			color = ""
		}
		fmt.Fprintf(&csv, "p%d,t%d,%s\n", i, i, color)
		switch i % 5 {
		case 0:
			fmt.Fprintf(&jsonl, `{"product_id":"p%d","title":"t","color":null}`+"\n", i)
		case 1:
			fmt.Fprintf(&jsonl, `{"color":"","product_id":"p%d","title":"t"}`+"\n", i)
		case 2:
			fmt.Fprintf(&jsonl, `{"product_id":"p%d","title":"t"}`+"\n", i)
		case 3:
			fmt.Fprintf(&jsonl, `{"product_id":"p%d"}`+"\n", i)
		default:
			fmt.Fprintf(&jsonl, `{"product_id":"p%d","title":"t","color":{"a":1}}`+"\n", i)
		}
	}
	for _, tc := range []struct {
		format Format
		data   string
		want   catalog.AttributeCounts
	}{
		{FormatCSV, csv.String(), catalog.AttributeCounts{"title": {Present: 1000, Valued: 1000}, "color": {Present: 1000, Valued: 750}}},
		{FormatJSONL, jsonl.String(), catalog.AttributeCounts{"title": {Present: 800, Valued: 800}, "color": {Present: 600, Valued: 200}}},
	} {
		for name, workers := range map[string]int{"serial": 1, "parallel": 3} {
			rd, err := NewReader(bytes.NewReader([]byte(tc.data)), tc.format, Limits{})
			require.NoError(t, err)
			rd.CountAttributes, rd.Workers, rd.SkipAttributes = true, workers, true
			if workers > 1 {
				rd.batchBytes, rd.batchRecords = 100, 7
			}
			for err == nil {
				_, err = rd.Scan()
			}
			require.ErrorIs(t, err, io.EOF)
			require.Equal(t, tc.want, rd.AttributeCounts(), "%s %s", tc.format, name)
			rd.Close()
		}
	}
	rd, err := NewReader(strings.NewReader(csv.String()), FormatCSV, Limits{})
	require.NoError(t, err)
	require.Nil(t, rd.AttributeCounts(), "not asked")
}

// What counting costs pass 1 (SkipAttributes, Scan): off and on, CSV and
// JSON Lines; compare cpu-ns/row (steadier than wall time on a shared
// machine).
func BenchmarkCountAttributes(b *testing.B) {
	for _, tc := range []struct {
		name string
		data []byte
	}{{"csv", genCSV(benchRows)}, {"jsonl", genJSONL(benchRows)}} {
		for _, on := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/count=%v", tc.name, on), func(b *testing.B) {
				b.SetBytes(int64(len(tc.data)))
				defer reportCPU(b)()
				for b.Loop() {
					r, err := NewReader(bytes.NewReader(tc.data), FormatAuto, Limits{})
					if err != nil {
						b.Fatal(err)
					}
					r.SkipAttributes, r.CountAttributes = true, on
					for {
						if _, err := r.Scan(); err == io.EOF {
							break
						} else if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// A row of one attribute between two rows whose keys come in the same
// order: the third reuses the first's key order and is counted all the
// same (this lost counts before the one-attribute row reset the order).
func TestAttributeCountsAfterOneKeyRow(t *testing.T) {
	t.Parallel()
	data := `{"product_id":"a","title":"t","color":"red"}` + "\n" + `{"product_id":"b","title":"t"}` + "\n" +
		`{"product_id":"c","title":"t","color":""}` + "\n"
	rd, err := NewReader(strings.NewReader(data), FormatJSONL, Limits{})
	require.NoError(t, err)
	rd.CountAttributes = true
	for err == nil {
		_, err = rd.Next()
	}
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, catalog.AttributeCounts{"title": {Present: 3, Valued: 3}, "color": {Present: 2, Valued: 1}}, rd.AttributeCounts())
}
