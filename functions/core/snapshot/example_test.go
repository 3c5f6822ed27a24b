package snapshot_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/retailcatalog/catalog/functions/core/snapshot"
)

func ExampleReader() {
	file := "title,product_id,price\r\n" +
		"\"Shirt, blue\",sku-1,9.99\r\n" +
		"Hat,sku-2,5\r\n"
	r, err := snapshot.NewReader(strings.NewReader(file), snapshot.FormatAuto, snapshot.Limits{})
	if err != nil {
		panic(err)
	}
	for {
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		var bad *snapshot.Error
		if errors.As(err, &bad) {
			fmt.Println("rejected:", bad.Code, bad.Message)
			return
		}
		fmt.Println(row.Line, row.ProductID, string(row.Attributes), row.Hash)
	}
	fmt.Println(r.Format(), r.BytesRead())
	// Output:
	// 2 sku-1 {"price":"9.99","title":"Shirt, blue"} fceeb1b63a3e61fca3511ebc71ee63ea
	// 3 sku-2 {"price":"5","title":"Hat"} 8429ee1de2823a55e97684f57b649d24
	// csv 63
}

func ExampleReader_rejected() {
	file := `{"product_id":"sku-1","tags":["a"]}` + "\n" + `{"product_id":"sku-2","tags":["a"],"tags":["b"]}` + "\n"
	r, _ := snapshot.NewReader(strings.NewReader(file), snapshot.FormatAuto, snapshot.Limits{})
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		var bad *snapshot.Error
		if errors.As(err, &bad) {
			fmt.Println(bad.Code, bad.Line, bad.Message)
			return
		}
	}
	// Output:
	// duplicate_column 2 line 2: key "tags" appears twice in one object
}

func ExampleMerge() {
	file := "product_id,title,price\n" +
		"p1,Monitor 27\" wide,9.99\n" + // a quote inside a field is a literal character
		"p2,\"Desk, oak\"x,120\n" + // text after a closing quote
		"p1,Chair,40\n" + // p1 again
		",Lamp,15\n" // no product_id
	r, _ := snapshot.NewReader(strings.NewReader(file), snapshot.FormatAuto, snapshot.Limits{})
	seen := map[string]int{}
	var dups []snapshot.Problem
	var rejected *snapshot.Error
	for {
		row, err := r.Next()
		if err == io.EOF {
			break
		}
		if errors.As(err, &rejected) {
			break
		}
		if first, ok := seen[row.ProductID]; ok {
			dups = append(dups, snapshot.DuplicateProblem(row.ProductID, first, row.Line))
		}
		seen[row.ProductID] = row.Line
	}
	all := snapshot.Merge(rejected, dups...)
	for _, p := range all.Problems {
		fmt.Println(p.Code, p.Line)
	}
	fmt.Println(r.AttributeNames())
	// Output:
	// malformed_csv 3
	// duplicate_product_id 4
	// missing_product_id 5
	// [price title]
}
